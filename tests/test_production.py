"""Production configurations (hsd/production.py, ``python -m hsd production``): every algorithm maps to what
vLLM and Transformers offer, with the parameter names their docs and source use, or says there is none."""

from __future__ import annotations

import ast
import json

import pytest

from hsd.cli import main
from hsd.errors import IncompatiblePairError, InvalidSettingError
from hsd.production import (MATCHES, PairFacts, facts_of_pair, format_production, inspect_pair, production_config,
                            string_intersection)

T, D = "org/target-7b", "org/drafter-100m"
HETERO = PairFacts(False, 4096, 1024, 934, 669)
SHARED = PairFacts(True, 4096, 4096, 4000, 4000)
EQUAL_SIZES = PairFacts(False, 32000, 32000, 20000, 19000)


def _cfg(algorithm, facts=HETERO, **kw):
    return production_config(T, D if algorithm != "ar" else None, algorithm, facts=facts, **kw)


def _compiles(code: str) -> None:
    ast.parse(code)


@pytest.mark.parametrize("algorithm", ["ar", "slem", "tli", "slrs"])
@pytest.mark.parametrize("temperature", [0.0, 0.7])
def test_every_algorithm_gives_both_engines_a_snippet_that_parses_and_a_verdict(algorithm, temperature):
    p = _cfg(algorithm, temperature=temperature, top_k=20 if temperature else 0, top_p=0.9 if temperature else 1.0)
    for e in (p.vllm, p.transformers):
        _compiles(e.python)
        assert e.match in MATCHES and e.runs
        json.dumps(e.config)
    text = format_production(p)
    assert "vLLM" in text and "Transformers" in text and "match:" in text
    assert "```python" in format_production(p, markdown=True)


def test_tli_maps_to_vllms_heterogeneous_draft_model_with_greedy_drafts():
    greedy, sampled = _cfg("tli", lookahead=4), _cfg("tli", temperature=0.8, lookahead=4)
    spec = greedy.vllm.config["speculative_config"]
    assert spec == {"method": "draft_model", "model": D, "num_speculative_tokens": 4, "use_heterogeneous_vocab": True}
    assert greedy.vllm.match == "same"
    assert sampled.vllm.match == "same distribution, less acceptance"
    assert "draft_sample_method" not in sampled.vllm.config["speculative_config"]  # only greedy is supported
    assert any("greedily" in n for n in sampled.vllm.notes)
    assert any("669" in n and "934" in n for n in sampled.vllm.notes)  # the two intersections
    assert "--speculative-config" in greedy.vllm.cli and '"use_heterogeneous_vocab": true' in greedy.vllm.cli
    # Transformers: do_sample=True runs its TLI, lossy in 5.24; greedy runs SLEM (same output)
    assert sampled.transformers.match == "lossy" and any("0.371" in n for n in sampled.transformers.notes)
    assert sampled.transformers.config["generate_kwargs"]["top_k"] == 0  # its default is 50
    assert greedy.transformers.match == "same output, other algorithm"
    assert greedy.transformers.config["generate_kwargs"]["do_sample"] is False


def test_slem_and_slrs_have_no_vllm_equivalent_and_slem_runs_in_transformers_only_greedy():
    for algorithm in ("slem", "slrs"):
        p = _cfg(algorithm)
        assert p.vllm.match == "none" and "use_heterogeneous_vocab" in p.vllm.config["speculative_config"]
    assert _cfg("slem").transformers.match == "same"
    kwargs = _cfg("slem").transformers.config["generate_kwargs"]
    assert kwargs["assistant_tokenizer"] == D and kwargs["tokenizer"] == T and kwargs["do_sample"] is False
    assert _cfg("slem").transformers.config["assistant_generation_config"] == {
        "num_assistant_tokens": 5, "num_assistant_tokens_schedule": "constant", "assistant_confidence_threshold": 0.0}
    assert _cfg("slem", temperature=1.0).transformers.match == "none"
    assert _cfg("slrs").transformers.match == "none"


def test_sd_and_a_shared_vocabulary_map_to_the_plain_draft_model():
    p = _cfg("sd", facts=None, temperature=0.9)
    assert p.vllm.config["speculative_config"] == {"method": "draft_model", "model": D, "num_speculative_tokens": 5,
                                                    "draft_sample_method": "probabilistic"}
    assert p.vllm.match == p.transformers.match == "same"
    assert "assistant_tokenizer" not in p.transformers.config["generate_kwargs"]
    tli = _cfg("tli", facts=SHARED)
    assert "use_heterogeneous_vocab" not in tli.vllm.config["speculative_config"]
    assert any("reduces to SD" in n for n in tli.vllm.notes)
    with pytest.raises(IncompatiblePairError, match="sd needs"):
        _cfg("sd")


def test_ar_needs_no_drafter_and_transformers_refuses_equal_vocab_sizes():
    p = _cfg("ar", temperature=0.5, top_k=40)
    assert p.vllm.config["speculative_config"] is None and "speculative" not in p.vllm.python
    assert p.vllm.config["sampling_params"] == {"temperature": 0.5, "max_tokens": 128, "seed": 0, "top_k": 40}
    assert "assistant_model" not in p.transformers.python
    equal = _cfg("slem", facts=EQUAL_SIZES)
    assert equal.transformers.match == "none" and "refuses assistant_tokenizer" in equal.transformers.notes[0]


@pytest.mark.parametrize("kw, match", [(dict(algorithm="fast"), "Unknown algorithm"),
                                        (dict(temperature=-1.0), "emperature"),
                                        (dict(lookahead=0), "lookahead"),
                                        (dict(drafter=None), "needs a drafter"),
                                        (dict(draft_threshold=1.0), "draft_threshold must be a number in"),
                                        (dict(draft_threshold=-0.2), "draft_threshold must be a number in"),
                                        (dict(drafter_temperature=-1.0), "drafter_temperature: .*emperature")])
def test_bad_settings_are_refused(kw, match):
    args = dict(target=T, drafter=D, algorithm="tli")
    args.update(kw)
    with pytest.raises(InvalidSettingError, match=match):
        production_config(args.pop("target"), args.pop("drafter"), args.pop("algorithm"), **args)


def test_the_embedded_pairs_facts_come_from_the_tokenizers_alone():
    facts = inspect_pair("assets/tiny-code/target", "assets/tiny-code/drafter")
    assert facts.shared_vocabulary is False and (facts.target_vocab_size, facts.drafter_vocab_size) == (4096, 1024)
    assert 0 < facts.string_intersection <= facts.byte_intersection  # strings miss byte-fallback forms
    import hsd

    pair = hsd.load_pair(preset="tiny-code", device="cpu")
    assert facts_of_pair(pair) == facts
    assert string_intersection(pair.target.tokenizer, pair.target.tokenizer) == len(pair.target.tokenizer.get_vocab())


def test_cli_prints_both_engines_and_writes_json(tmp_path, capsys):
    out = tmp_path / "prod.json"
    assert main(["production", "--algorithm", "tli", "--temperature", "0.8", "--lookahead", "4",
                 "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "use_heterogeneous_vocab" in text and "assistant_tokenizer" in text and "vllm serve" in text
    data = json.loads(out.read_text())
    assert data["vllm"]["config"]["speculative_config"]["num_speculative_tokens"] == 4
    assert data["facts"]["shared_vocabulary"] is False
    assert main(["production", "--algorithm", "sd", "--drafter", "tiny-code-bytes"]) == 2
    assert "sd needs" in capsys.readouterr().err
    assert main(["production", "--algorithm", "slem", "--target", "org/x", "--no-inspect"]) == 2
    assert "needs a --drafter" in capsys.readouterr().err


def test_draft_threshold_is_transformers_assistant_confidence_threshold_and_vllm_says_it_has_none():
    p = _cfg("slem", lookahead=12, draft_threshold=0.5)
    assert p.transformers.config["assistant_generation_config"] == {
        "num_assistant_tokens": 12, "num_assistant_tokens_schedule": "constant", "assistant_confidence_threshold": 0.5}
    assert "assistant_model.generation_config.assistant_confidence_threshold = 0.5" in p.transformers.python
    assert any("up to 12 tokens" in n and "ConfidenceCriteria" in n for n in p.transformers.notes)
    assert p.vllm.config["speculative_config"]["num_speculative_tokens"] == 12  # the most hsd drafts
    assert any(n.startswith("vLLM has no equivalent of hsd's draft_threshold=0.5") for n in p.vllm.notes)
    sampled = _cfg("sd", facts=SHARED, temperature=0.8, draft_threshold=0.7)
    assert any("scikit-learn" in n and "0.7 is only where it starts" in n for n in sampled.transformers.notes)
    assert any("reads the drafted token's probability after the sampling settings" in n
               for n in sampled.transformers.notes)
    ignored = _cfg("slrs", draft_threshold=0.5)  # hsd's SLRS has no dynamic lookahead
    assert ignored.transformers.config["assistant_generation_config"]["assistant_confidence_threshold"] == 0.0
    assert any("hsd's slrs ignores it" in n for n in ignored.vllm.notes + ignored.transformers.notes)
    assert not any("draft_threshold" in n for n in _cfg("slem").vllm.notes + _cfg("slem").transformers.notes)


def test_a_greedy_drafter_is_vllms_greedy_draft_sampling_and_other_drafter_temperatures_have_no_equivalent():
    sd = _cfg("sd", facts=SHARED, temperature=0.8, drafter_temperature=0)
    assert "draft_sample_method" not in sd.vllm.config["speculative_config"]  # greedy: vLLM's default
    assert sd.vllm.match == "same" and any("draft_sample_method='greedy'" in n for n in sd.vllm.notes)
    tli = _cfg("tli", temperature=0.8, drafter_temperature=0)
    assert tli.vllm.match == "same"  # vLLM's heterogeneous drafting is greedy TLI: hsd's with a greedy drafter
    warm = _cfg("sd", facts=SHARED, temperature=0.8, drafter_temperature=0.5)
    assert warm.vllm.config["speculative_config"]["draft_sample_method"] == "probabilistic"
    assert any("vLLM has no drafter temperature" in n and "0.5" in n for n in warm.vllm.notes)
    for p in (sd, tli, warm):
        assert any(n.startswith("Transformers has no drafter temperature") for n in p.transformers.notes)
    same = _cfg("tli", temperature=0.8, drafter_temperature=0.8)  # the target's own: nothing to say
    assert not any("drafter temperature" in n for n in same.vllm.notes + same.transformers.notes)


def test_the_settings_line_names_the_drafter_temperature_and_the_draft_threshold():
    head = format_production(_cfg("slem", drafter_temperature=0, draft_threshold=0.5)).splitlines()[0]
    assert head.endswith("seed 0, drafter temperature 0, draft threshold 0.5")
    assert "## hsd: slem" in format_production(_cfg("slem", draft_threshold=0.5), markdown=True)
    assert "drafter temperature" not in format_production(_cfg("slem")).splitlines()[0]


def test_cli_takes_the_drafter_temperature_and_the_draft_threshold(tmp_path, capsys):
    out = tmp_path / "prod.json"
    assert main(["production", "--algorithm", "slem", "--lookahead", "12", "--draft-threshold", "0.5",
                 "--drafter-temperature", "0", "--no-inspect", "--json", str(out)]) == 0
    assert "draft threshold 0.5" in capsys.readouterr().out
    data = json.loads(out.read_text())
    assert data["settings"]["draft_threshold"] == 0.5 and data["settings"]["drafter_temperature"] == 0.0
    assert data["transformers"]["config"]["assistant_generation_config"]["assistant_confidence_threshold"] == 0.5
    assert main(["production", "--algorithm", "slem", "--draft-threshold", "1.5", "--no-inspect"]) == 2
    assert "draft_threshold must be a number in [0, 1)" in capsys.readouterr().err
