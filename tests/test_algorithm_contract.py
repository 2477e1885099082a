"""An algorithm registered from outside hsd runs through the CLI, the benchmark, the app's handlers and the
pictures, with no other module edited: "SD with lookahead 1", on a pair that shares one vocabulary."""

import dataclasses
import json

import pandas as pd
import pytest

import hsd
from hsd import marks, viz
from hsd.algorithms import sd
from hsd.cli import main


def _sd_lookahead_1(s):
    s.settings = dataclasses.replace(s.settings, lookahead=1)
    return sd.step(s)


@pytest.fixture
def sd1():
    algorithm = hsd.register(dataclasses.replace(
        sd.ALGORITHM, name="sd1", step=_sd_lookahead_1, about="**SD1**: SD drafting one token per round."))
    yield algorithm
    hsd.unregister("sd1")


def test_registry_lists_what_applies_and_why_not(model_dirs, sd1):
    hetero = hsd.load_pair(model_dirs["target"], model_dirs["drafter"], device="cpu")
    shared = hsd.load_pair(model_dirs["target"], model_dirs["target"], device="cpu")
    assert "sd1" not in hsd.usable_algorithms(hetero) and "shared vocabulary" in hsd.availability(hetero)["sd1"]
    assert hsd.usable_algorithms(shared)[0] == "ar" and "sd1" in hsd.usable_algorithms(shared)
    target_only = hsd.load_pair(model_dirs["target"], device="cpu")
    assert hsd.usable_algorithms(target_only) == ["ar"]


def test_a_registered_algorithm_is_lossless_and_drafts_one_token_per_round(model_dirs, sd1):
    pair = hsd.load_pair(model_dirs["target"], model_dirs["target"], device="cpu")
    res = hsd.generate(pair, "def f(x):", algorithm="sd1", max_new_tokens=10, lookahead=5)
    assert res.token_ids == hsd.generate(pair, "def f(x):", algorithm="ar", max_new_tokens=10).token_ids
    assert all(len(r.drafted) <= 1 for r in res.rounds) and res.metrics.proposed > 0


def test_a_registered_algorithm_runs_through_the_cli(model_dirs, sd1, tmp_path, capsys):
    out = tmp_path / "run.json"
    rc = main(["generate", "--target", model_dirs["target"], "--drafter", model_dirs["target"], "--device", "cpu",
               "--algorithm", "sd1", "--prompt", "def f(x):", "--max-new-tokens", "8", "--json", str(out)])
    assert rc == 0 and "tok/s" in capsys.readouterr().err
    data = json.loads(out.read_text())
    assert data["algorithm"] == "sd1" and len(data["token_ids"]) == 8


def test_a_registered_algorithm_runs_through_the_benchmark(model_dirs, sd1, tmp_path):
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text('{"prompt": "def fib(n):\\n"}\n')
    rc = main(["bench", "--target", model_dirs["target"], "--drafter", model_dirs["target"], "--device", "cpu",
               "--algorithms", "ar", "sd1", "--temperatures", "0", "--prompts", str(prompts), "--max-new-tokens", "8",
               "--repeats", "1", "--warmups", "0", "--no-peer", "--no-png", "--out", str(tmp_path / "out")])
    assert rc == 0
    row = pd.read_csv(tmp_path / "out" / "results.csv").set_index("algorithm").loc["sd1"]
    assert row.greedy_equals_ar == "1/1" and row.tokens_per_s > 0


def test_a_registered_algorithm_runs_through_the_app_and_its_pictures(model_dirs, sd1):
    import app
    from hsd.forms import Form

    t = model_dirs["target"]
    status, html, _, view, _, state = list(app.run(t, t, "sd1", Form("def f(x):", lookahead=4, max_new_tokens=8)))[-1]
    assert status.startswith(f"{marks.OK} **SD1**") and "hsd-output" in html and "q (proposal)" in view
    report, availability, choices = app.check_pair(t, t, "auto", "auto", "sd1")
    assert f"{marks.YES} **sd1**" in availability and "sd1" in choices["choices"]
    out = list(app.compare(t, t, Form("def f(x):", lookahead=4, max_new_tokens=6)))[-1]
    assert "sd1" in out[0] and "✓ sd1: identical to AR" in out[1] and "sd1" in list(out[2].data[0].x)
    assert "sd1" in list(out[7]["algorithm"])
    assert "q (proposal)" in viz.round_html(state["result"].rounds[0], algorithm="sd1")
