"""The benchmark, the limit model and the advice, on two tiny local model directories (fast)."""

from __future__ import annotations

import json
import math
import re

import pandas as pd
import pytest

import hsd
import hsd.advise
from hsd.advise import advise, advise_steps, expected_tokens, format_advice, recommend
from hsd.cli import advise_thresholds, build_parser, main
from hsd.costs import Costs, ideal_decode_seconds
from hsd.machine import machine_info
from hsd.peer import version as peer_version

PROMPTS = ['{"prompt": "def fib(n):\\n"}', '{"prompt": "import os\\n\\nclass A:\\n    def f(self):\\n"}']
COLUMNS = {"temperature", "algorithm", "implementation", "prompts", "new_tokens", "ttft_ms", "tpot_ms", "tokens_per_s",
           "speedup", "tau", "draft_acceptance_rate", "verified_acceptance_rate", "per_position_acceptance", "target_forwards_per_token",
           "drafter_forwards_per_token", "ideal_tokens_per_s", "efficiency", "cpu_efficiency", "outside_forwards",
           "vs_transformers", "greedy_equals_ar", "note"}


@pytest.fixture(scope="module")
def bench_out(model_dirs, tmp_path_factory):
    out = tmp_path_factory.mktemp("bench")
    prompts = out / "prompts.jsonl"
    prompts.write_text("\n".join(PROMPTS) + "\n")
    rc = main(["bench", "--target", model_dirs["target"], "--drafter", model_dirs["drafter"], "--device", "cpu",
               "--prompts", str(prompts), "--max-new-tokens", "12", "--repeats", "1", "--warmups", "1",
               "--temperatures", "0", "1", "--no-png", "--scale", "--scale-new-tokens", "8", "16",
               "--scale-prompt-tokens", "8", "--out", str(out / "run")])
    assert rc == 0
    return out / "run"


def test_bench_writes_csv_markdown_and_html_with_expected_columns(bench_out):
    for name in ("results.csv", "per_prompt.csv", "results.md", "report.json", "throughput.html",
                 "acceptance.html", "scale.csv", "scale.html"):
        assert (bench_out / name).stat().st_size > 0, name
    df = pd.read_csv(bench_out / "results.csv")
    assert COLUMNS <= set(df.columns)
    md = (bench_out / "results.md").read_text()
    assert "torch" in md and "transformers" in md and "| algorithm |" in md  # the machine is in every output


def test_bench_numbers_are_finite_and_ar_is_the_speedup_baseline(bench_out):
    df = pd.read_csv(bench_out / "results.csv")
    hsd_rows = df[df.implementation == "hsd"]
    assert set(hsd_rows.algorithm) == {"ar", "slem", "tli"}
    for col in ("ttft_ms", "tpot_ms", "tokens_per_s", "speedup", "tau", "ideal_tokens_per_s", "efficiency",
                "cpu_efficiency"):
        assert hsd_rows[col].map(math.isfinite).all(), col
    assert (df[df.algorithm == "ar"].speedup == 1.0).all()
    greedy_slem = df[(df.algorithm == "slem") & (df.temperature == 0)].iloc[0]
    assert greedy_slem.greedy_equals_ar == "2/2"  # lossless: greedy SLEM emits AR's tokens
    scale = pd.read_csv(bench_out / "scale.csv")
    assert set(scale.axis) == {"max_new_tokens", "prompt_tokens"} and scale.tpot_ms.map(math.isfinite).all()


def test_transformers_peer_rows_run_or_say_why(bench_out):
    df = pd.read_csv(bench_out / "results.csv").fillna("")
    peer = df[df.implementation == "transformers"]
    assert set(peer.algorithm) == {"hf-ar", "hf-slem", "hf-tli"}
    for _, row in peer.iterrows():
        assert row.note or math.isfinite(row.tokens_per_s), row.algorithm
        if row.note and "raised" in row.note:  # a crash names the version it happened in
            assert re.fullmatch(rf"(failed on prompt \d+: )?Transformers {re.escape(peer_version())} raised .+",
                                row.note), row.note
    ar = peer[(peer.algorithm == "hf-ar") & (peer.temperature == 0)].iloc[0]
    assert ar.greedy_equals_ar == "2/2"  # Transformers' greedy AR and hsd's AR agree on these fp32 models


def test_ideal_time_is_drafter_steps_plus_one_verification_per_round():
    costs = Costs(draft=0.001, verify={1: 0.010, 2: 0.011, 3: 0.012})
    # the first round is in TTFT, not in TPOT's numerator
    rounds = [(2, 2, 3), (2, 2, 1), (0, 0, 1)]
    assert ideal_decode_seconds(rounds, costs) == pytest.approx(2 * 0.001 + 0.012 + 0.010)
    assert costs.verify_cost(5) == pytest.approx(0.014)  # linear beyond the measured sizes


def test_expected_tokens_per_round_follows_the_acceptance_chain():
    assert expected_tokens([1.0, 1.0], 3) == 4.0
    assert expected_tokens([0.5], 2) == pytest.approx(1 + 0.5 + 0.25)
    assert expected_tokens([0.0, 1.0], 5) == 1.0


def test_advise_returns_a_recommendation_for_every_lookahead(model_dirs):
    import hsd

    pair = hsd.load_pair(model_dirs["target"], model_dirs["drafter"], device="cpu")
    advice = advise(pair, ["def fib(n):\n", "class A:\n"], max_new_tokens=10, log=lambda *_: None)
    rec = advice["recommendation"]
    assert set(rec) >= {"algorithm", "lookahead", "tokens_per_s", "speedup", "beats_ar", "text"}
    assert rec["algorithm"] == "ar" or rec["lookahead"] in range(1, 13)
    fixed = [p for p in advice["predictions"] if p["draft_threshold"] is None]
    assert {(p["algorithm"], p["lookahead"]) for p in fixed} == {(a, k) for a in ("slem", "tli") for k in range(1, 13)}
    assert all(math.isfinite(p["tokens_per_s"]) and p["tokens_per_s"] > 0 for p in advice["predictions"])
    json.dumps(advice, default=str)


def test_advise_predicts_each_dynamic_lookahead_from_its_own_calibration(model_dirs, monkeypatch):
    calls = []
    real = hsd.advise.generate
    monkeypatch.setattr(hsd.advise, "generate", lambda *a, **kw: calls.append(kw) or real(*a, **kw))
    pair = hsd.load_pair(model_dirs["target"], model_dirs["drafter"], device="cpu")
    advice = advise(pair, ["def fib(n):\n"], max_new_tokens=12, lookaheads=[2], draft_thresholds=(0.6,),
                    log=lambda *_: None)
    dynamic = [p for p in advice["predictions"] if p["draft_threshold"] is not None]
    assert {(p["algorithm"], p["lookahead"], p["draft_threshold"]) for p in dynamic} == {
        ("slem", 12, 0.6), ("tli", 12, 0.6)}
    assert advice["draft_thresholds"] == [0.6] and advice["dynamic_lookahead"] == 12
    costs = hsd.costs.Costs(advice["costs"]["draft_ms"] / 1e3, {})
    for p in dynamic:
        assert {"algorithm": p["algorithm"], "lookahead": 12, "draft_threshold": 0.6} in [
            {k: c.get(k) for k in ("algorithm", "lookahead", "draft_threshold")} for c in calls]  # calibrated so
        cal = advice["calibration"][p["algorithm"]]["12, stop < 0.6"]
        assert p["tau"] == cal["tau"]  # measured tokens per round, not the α chain
        # mean drafted tokens × (drafter step + its overhead) + mean target forward + round overhead
        expected = (cal["drafted_per_round"] * (costs.draft * 1e3 + cal["o_draft_ms"]) + cal["verify_ms"]
                    + cal["o_round_ms"])
        assert p["round_ms"] == pytest.approx(expected)
        assert p["speedup"] == pytest.approx(p["tokens_per_s"] / advice["ar_tokens_per_s"])
        assert 0 < cal["drafted_per_round"] <= 12
    json.dumps(advice, default=str)


def test_advise_without_draft_thresholds_calibrates_no_dynamic_lookahead(model_dirs):
    pair = hsd.load_pair(model_dirs["target"], model_dirs["drafter"], device="cpu")
    steps = list(advise_steps(pair, ["def f(x):\n"], max_new_tokens=6, lookaheads=[2], algorithms=["slem"],
                              draft_thresholds=()))
    advice = steps[-1]
    assert [p["draft_threshold"] for p in advice["predictions"]] == [None]
    assert list(advice["calibration"]["slem"]) == [2] and advice["draft_thresholds"] == []
    assert not any("stop <" in line for line in steps[:-1])


@pytest.mark.parametrize("bad", [(1.0,), (0,), (-0.1,), (0.5, 1.5), ("0.5",), (True,), 0.5, "0.5", (math.nan,)])
def test_a_draft_threshold_outside_zero_to_one_is_refused_before_anything_runs(bad):
    with pytest.raises(hsd.InvalidSettingError, match="draft_thresholds must be"):
        next(advise_steps(None, ["x"], draft_thresholds=bad))  # no pair needed: refused first


@pytest.mark.parametrize("bad,message", [(dict(dynamic_lookahead=0), "dynamic_lookahead must be an integer"),
                                         (dict(drafter_temperature=-1.0), "temperature")])
def test_advise_refuses_a_bad_dynamic_lookahead_or_drafter_temperature_before_anything_runs(bad, message):
    with pytest.raises(hsd.InvalidSettingError, match=message):
        next(advise_steps(None, ["x"], **bad))


def _advice(predictions, recommendation):
    return {"machine": machine_info(), "temperature": 0.0, "ar_tokens_per_s": 10.0, "costs": {"draft_ms": 1.0, "verify_1_ms": 5.0},
            "skipped": {}, "predictions": predictions, "recommendation": recommendation}


def _row(algorithm, lookahead, threshold, speedup, calibrated_at=None):
    return {"algorithm": algorithm, "lookahead": lookahead, "draft_threshold": threshold,
            "calibrated_at": calibrated_at or lookahead, "tau": 2.0, "round_ms": 1.0, "tokens_per_s": 10.0 * speedup,
            "speedup": speedup}


def test_the_recommendation_names_a_dynamic_lookahead_by_its_threshold():
    rows = [_row("slem", 5, None, 1.3), _row("slem", 12, 0.5, 1.6), _row("tli", 12, 0.5, 1.1)]
    rec = recommend(rows, 10.0)
    assert (rec["algorithm"], rec["lookahead"], rec["draft_threshold"], rec["beats_ar"]) == ("slem", 12, 0.5, True)
    assert rec["text"].startswith("Use slem with lookahead 12, stopping a draft after a token the drafter gives below "
                                  "0.5 (draft_threshold=0.5): predicted 16.0 tokens/s, 1.60x AR")
    fixed = recommend([_row("slem", 5, None, 1.3), _row("slem", 12, 0.5, 1.2)], 10.0)
    assert fixed["draft_threshold"] is None and fixed["text"].startswith("Use slem with lookahead 5: predicted")
    slower = recommend([_row("tli", 12, 0.7, 0.8)], 10.0)
    assert slower["algorithm"] == "ar" and slower["draft_threshold"] is None
    assert "the best, tli with lookahead 12, stopping a draft after a token the drafter gives below 0.7" in slower["text"]


def test_format_advice_shows_each_dynamic_lookahead_as_its_own_row():
    rows = [_row("slem", 5, None, 1.3), _row("tli", 5, None, 0.9), _row("slem", 12, 0.5, 1.6),
            _row("tli", 12, 0.5, 1.1), _row("slem", 12, 0.7, 1.5), _row("slrs", 5, None, 0.4)]
    text = format_advice(_advice(rows, recommend(rows, 10.0)))
    lines = text.splitlines()
    assert any(line.split() == ["12,", "stop", "<", "0.5", "1.60", "1.10", "-", "this", "setting"] for line in lines)
    assert any(line.split() == ["12,", "stop", "<", "0.7", "1.50", "-", "-", "this", "setting"] for line in lines)
    assert any(line.split() == ["5", "1.30", "0.90", "0.40", "this", "k"] for line in lines)
    assert "draft_threshold=θ" in text and text.endswith("(draft_threshold=0.5): predicted 16.0 tokens/s, 1.60x AR "
                                                         "(10.0 tokens/s).")
    assert "stop <" not in format_advice(_advice(rows[:2], recommend(rows[:2], 10.0)))  # none: no legend either


@pytest.mark.parametrize("argv,thresholds", [([], hsd.advise.DRAFT_THRESHOLDS), (["--draft-thresholds"], ()),
                                             (["--draft-thresholds", "0"], ()),
                                             (["--draft-thresholds", "0.7", "0.4", "0.7"], (0.4, 0.7))])
def test_advise_command_line_takes_draft_thresholds_and_none_disables_them(argv, thresholds):
    args = build_parser().parse_args(["advise", *argv])
    assert advise_thresholds(args.draft_thresholds) == thresholds


def test_advise_command_line_prints_and_writes_the_dynamic_lookahead(model_dirs, tmp_path, capsys):
    out = tmp_path / "advice.json"
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text(PROMPTS[0] + "\n")
    assert main(["advise", "--target", model_dirs["target"], "--drafter", model_dirs["drafter"], "--device", "cpu",
                 "--prompts", str(prompts), "--num-prompts", "1", "--max-new-tokens", "6", "--algorithms", "slem",
                 "--draft-thresholds", "0.6", "--json", str(out)]) == 0
    assert any(line.startswith("12, stop < 0.6") for line in capsys.readouterr().out.splitlines())
    advice = json.loads(out.read_text())
    assert advice["draft_thresholds"] == [0.6] and "draft_threshold" in advice["recommendation"]
    assert [p["draft_threshold"] for p in advice["predictions"] if p["draft_threshold"]] == [0.6]


def test_advise_command_line_takes_the_drafter_temperature(model_dirs, tmp_path, capsys):
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text(PROMPTS[0] + "\n")
    common = ["advise", "--target", model_dirs["target"], "--drafter", model_dirs["drafter"], "--device", "cpu",
              "--prompts", str(prompts), "--num-prompts", "1", "--max-new-tokens", "6", "--algorithms", "slem",
              "--draft-thresholds", "--temperature", "0.7"]
    assert main([*common, "--drafter-temperature", "-1"]) == 2  # refused before a model loads
    assert "--drafter-temperature" in capsys.readouterr().err
    out = tmp_path / "advice.json"
    assert main([*common, "--drafter-temperature", "0", "--json", str(out)]) == 0
    advice = json.loads(out.read_text())
    assert advice["temperature"] == 0.7 and advice["drafter_temperature"] == 0.0


def test_measured_prompts_never_include_the_calibration_ones():
    from hsd.bench import load_prompts, measured_prompts

    every = load_prompts("code")
    assert measured_prompts(3) == every[:3]
    assert measured_prompts(10_000) == every[:-4] and measured_prompts(10_000, calibration=12) == every[:-12]


def test_the_engine_benchmark_runs_and_reports_the_share_outside_forwards(capsys):
    """benchmarks/engine.py end to end on the embedded pair, tiny: the rounds' own forward time is what it reads."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    import engine

    engine.main(["--max-new-tokens", "4", "--repeats", "1", "--threads", "1", "--algorithms", "ar", "slem"])
    lines = capsys.readouterr().out.splitlines()
    rows = {line.split()[0]: line.split() for line in lines if line.split()[:1] in (["ar"], ["slem"])}
    assert set(rows) == {"ar", "slem"} and all(row[-1] == "yes" for row in rows.values())  # = AR's text
    assert all(0 <= float(row[5].rstrip("%")) <= 100 for row in rows.values())  # outside fwd, a share



def test_a_peer_crash_names_the_transformers_version_and_what_is_known(monkeypatch):
    from hsd import peer

    monkeypatch.setattr(peer, "version", lambda: "5.25.0")
    note = peer.failure_note("hf-slem", RuntimeError("cannot reshape tensor of 0 elements into shape [1, 0, -1, 64]"))
    assert note.startswith("Transformers 5.25.0 raised RuntimeError: cannot reshape tensor of 0 elements")
    assert "5.24.0 runs this row" in note
    assert peer.failure_note("hf-tli", ValueError("x")) == "Transformers 5.25.0 raised ValueError: x"


def test_the_peers_rows_run_on_hsds_cpu_layout_with_inference_tensors(model_dirs):
    """The peer runs under torch.inference_mode, where its drafter's weights become inference tensors (copied or
    pruned there), which have no version counter for hsd's CPU layout to read: every hf-slem/hf-tli row failed
    with 'Inference tensors do not track version counter' before Transformers even ran."""
    import hsd
    from hsd.peer import Peer

    pair = hsd.load_pair(model_dirs["target"], model_dirs["drafter"], device="cpu")
    p = Peer(pair, 3)
    ids = pair.target.tokenizer("def f(x):")["input_ids"]
    for _ in range(2):  # the second call reuses the drafter's copy
        assert p.generate("hf-tli", ids, max_new_tokens=4, temperature=1.0, seed=0).token_ids
