"""Hostile and unusual inputs that need a model or a file built for them: a chat template that
refuses a role, a model that needs remote code, a --json path that vanishes mid-run, a drafter with a short
context. The one-line-per-input tables (API, loading, public app, CLI, app handlers) are in test_catalogue.py.
"""

import json
import math

import pytest
import torch
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast

import hsd
import hsd.loading
from builders import BigramLM, sentencepiece_tokenizer, tiny_llama
from hsd.cli import main
from pairs import heterogeneous


@pytest.fixture(scope="module")
def pair():
    return heterogeneous("bpe<-sp")


@pytest.fixture
def paths(model_dirs, tmp_path):
    (tmp_path / "latin1.txt").write_bytes(b"ab\xe9t\xe9")
    (tmp_path / "a-file").write_text("x")
    remote = tmp_path / "remote"
    remote.mkdir()
    (remote / "config.json").write_text(json.dumps({"model_type": "hsd-custom", "auto_map": {
        "AutoConfig": "configuration_x.XConfig", "AutoModelForCausalLM": "modeling_x.XModel"}}))
    return dict(model_dirs, dir=tmp_path, file=tmp_path / "a-file", bad_utf8=tmp_path / "latin1.txt", remote=remote)


def _templated_pair() -> hsd.Pair:
    tk = Tokenizer(models.WordLevel({"<eos>": 0, "alpha": 1, "beta": 2}, unk_token="<eos>"))
    tk.pre_tokenizer = pre_tokenizers.Whitespace()
    tok = PreTrainedTokenizerFast(tokenizer_object=tk, eos_token="<eos>")
    tok.chat_template = ("{% for m in messages %}{% if m['role'] not in ['user', 'assistant'] %}"
                         "{{ raise_exception('Conversation roles must be user or assistant') }}{% endif %}"
                         "{{ m['content'] }} {% endfor %}")
    return hsd.Pair.from_models(BigramLM(torch.zeros(3, 3), 0), tok)


@pytest.mark.parametrize("messages,fragment", [
    ([{"role": "tool", "content": "alpha"}], "refused these messages: Conversation roles must be user or assistant"),
    ([{"role": "user", "content": "alpha"}], None),
])
def test_api_chat_template_refusal_is_a_prompt_error(messages, fragment):
    pair = _templated_pair()
    if fragment is None:
        assert hsd.generate(pair, messages=messages, algorithm="ar", max_new_tokens=2).token_ids
        return
    with pytest.raises(hsd.PromptError, match=fragment):
        hsd.generate(pair, messages=messages, algorithm="ar", max_new_tokens=2)


def test_api_remote_code_says_how_to_turn_it_on(paths):
    with pytest.raises(hsd.RemoteCodeError, match=r"trust_remote_code=True .* --trust-remote-code"):
        hsd.load_model(str(paths["remote"]))


def test_cli_json_write_failing_after_the_run_prints_the_json(paths, monkeypatch, capsys):
    monkeypatch.setattr("hsd.cli.check_output_file", lambda *a, **k: None)  # the folder vanished mid-run
    argv = ["generate", "--target", paths["target"], "--drafter", paths["drafter"], "--prompt", "def f",
            "--max-new-tokens", "4", "--json", str(paths["dir"])]
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert "printed to stdout instead" in err
    assert len(json.loads(out[out.index("{"):])["token_ids"]) == 4


@pytest.mark.parametrize("algorithm", ["slem", "tli", "slrs"])
def test_prompt_longer_than_the_drafters_context_runs_target_only_like_ar(pair, algorithm):
    sp = sentencepiece_tokenizer()
    short = tiny_llama(sp, 1)
    short.config.max_position_embeddings = 16
    small = hsd.Pair.from_models(pair.target.model, pair.target.tokenizer, short, sp)
    prompt = "def fibonacci(number):\n    return number if number < 2 else fibonacci(number - 1)"
    assert len(sp(prompt)["input_ids"]) > 16
    ar = hsd.generate(small, prompt, algorithm="ar", max_new_tokens=10)
    res = hsd.generate(small, prompt, algorithm=algorithm, max_new_tokens=10)
    assert res.token_ids == ar.token_ids
    assert res.metrics["drafter_forwards"] == 0 and not math.isnan(res.metrics["tokens_per_s"] or 0)


def test_a_prompt_longer_than_the_byte_drafters_context_runs_without_transformers_length_warning():
    """The byte drafter's 1,024 positions hold fewer bytes than a long prompt: the run goes on target-only, as the
    test above checks, and Transformers' "Token indices sequence length is longer..." warning (about an indexing
    error hsd never makes) is not printed."""
    import logging

    from transformers.utils import logging as hf_logging

    seen = []

    class Catch(logging.Handler):
        def emit(self, record):
            seen.append(record.getMessage())

    handler = Catch()
    hf_logging.get_logger().addHandler(handler)
    try:
        pair = hsd.load_pair(preset="tiny-code-bytes", device="cpu")
        prompt = "def f(x):\n    '''" + "Return x. " * 120 + "'''"
        assert len(prompt.encode()) > 1024
        res = hsd.generate(pair, prompt, algorithm="slrs", lookahead=1, max_new_tokens=4)
    finally:
        hf_logging.get_logger().removeHandler(handler)
    assert res.metrics["drafter_forwards"] == 0
    assert not [m for m in seen if "sequence length is longer" in m]
