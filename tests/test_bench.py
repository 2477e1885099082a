"""The benchmark, the limit model and the advice, on two tiny local model directories (fast)."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from hsd.advise import advise, expected_tokens
from hsd.cli import main
from hsd.costs import Costs, ideal_decode_seconds

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
    assert {(p["algorithm"], p["lookahead"]) for p in advice["predictions"]} == {
        (a, k) for a in ("slem", "tli") for k in range(1, 13)}
    assert all(math.isfinite(p["tokens_per_s"]) and p["tokens_per_s"] > 0 for p in advice["predictions"])
    json.dumps(advice, default=str)
