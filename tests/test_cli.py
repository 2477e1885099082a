"""The CLI end to end on models saved like Hub checkpoints, offline."""

import json
import subprocess
import sys

import hsd


def _run(*args):
    return subprocess.run([sys.executable, "-m", "hsd", *args], capture_output=True, text=True, timeout=180)


def test_generate_prints_text_and_metrics_and_writes_json(model_dirs, tmp_path):
    out = tmp_path / "run.json"
    proc = _run("generate", "--target", model_dirs["target"], "--drafter", model_dirs["drafter"], "--algorithm",
                "slem", "--prompt", "def f(x):", "--max-new-tokens", "12", "--json", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "tok/s" in proc.stderr and "tau" in proc.stderr
    data = json.loads(out.read_text())
    assert set(data) >= {"text", "token_ids", "rounds", "metrics"}
    assert len(data["token_ids"]) == 12
    pair = hsd.load_pair(model_dirs["target"], model_dirs["drafter"], device="cpu")
    assert data["token_ids"] == hsd.generate(pair, "def f(x):", algorithm="ar", max_new_tokens=12).token_ids


def test_generate_takes_the_drafters_own_temperature(model_dirs, tmp_path):
    """--drafter-temperature reaches the engine (the same seed gives the API's run with it) and is checked
    before any model loads."""
    out = tmp_path / "run.json"
    common = ("--target", model_dirs["target"], "--drafter", model_dirs["drafter"], "--algorithm", "slem",
              "--prompt", "def f(x):", "--max-new-tokens", "12", "--temperature", "1", "--seed", "3")
    proc = _run("generate", *common, "--drafter-temperature", "0", "--json", str(out))
    assert proc.returncode == 0, proc.stderr
    pair = hsd.load_pair(model_dirs["target"], model_dirs["drafter"], device="cpu")
    res = hsd.generate(pair, "def f(x):", algorithm="slem", max_new_tokens=12, temperature=1.0, seed=3,
                       drafter_temperature=0.0)
    data = json.loads(out.read_text())
    assert data["token_ids"] == res.token_ids
    assert [[d["id"] for d in r["drafted"]] for r in data["rounds"]] == [[d.id for d in r.drafted] for r in res.rounds]
    assert {d["prob"] for r in data["rounds"] for d in r["drafted"]} == {1.0}  # a greedy drafter's q is one-hot
    bad = _run("generate", *common, "--drafter-temperature", "-1")
    assert bad.returncode != 0 and "--drafter-temperature" in bad.stderr and "Traceback" not in bad.stderr


def test_generate_takes_a_draft_threshold(model_dirs, tmp_path):
    """--draft-threshold: the API's run with the same threshold (drafts cut short), checked before loading."""
    out = tmp_path / "run.json"
    common = ("--target", model_dirs["target"], "--drafter", model_dirs["drafter"], "--algorithm", "tli",
              "--prompt", "def f(x):", "--max-new-tokens", "16", "--lookahead", "8")
    proc = _run("generate", *common, "--draft-threshold", "0.6", "--json", str(out))
    assert proc.returncode == 0, proc.stderr
    pair = hsd.load_pair(model_dirs["target"], model_dirs["drafter"], device="cpu")
    res = hsd.generate(pair, "def f(x):", algorithm="tli", max_new_tokens=16, lookahead=8, draft_threshold=0.6)
    data = json.loads(out.read_text())
    assert [len(r["drafted"]) for r in data["rounds"]] == [len(r.drafted) for r in res.rounds]
    bad = _run("generate", *common, "--draft-threshold", "1")
    assert bad.returncode == 2 and "draft_threshold must be a number in [0, 1)" in bad.stderr


def test_vocab_report(model_dirs, tmp_path):
    out = tmp_path / "vocab.json"
    proc = _run("vocab", "--target", model_dirs["target"], "--drafter", model_dirs["drafter"], "--json", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "heterogeneous" in proc.stdout and "intersection" in proc.stdout
    report = json.loads(out.read_text())
    assert report["shared"] is False and report["intersection"] > 100
    assert report["algorithms"]["tli"] == "ok" and report["algorithms"]["sd"] != "ok"


def test_load_pair_offline_from_directories_is_cached_and_unmodified(model_dirs):
    pair = hsd.load_pair(model_dirs["target"], model_dirs["drafter"], device="cpu", dtype="float32")
    again = hsd.load_pair(model_dirs["target"], model_dirs["drafter"], device="cpu", dtype="float32")
    assert again.target.model is pair.target.model
    before = {k: v.clone() for k, v in pair.drafter.model.state_dict().items()}
    hsd.generate(pair, "x", algorithm="tli", max_new_tokens=8, temperature=1.0)
    after = pair.drafter.model.state_dict()
    assert before.keys() == after.keys() and all(torch_equal(before[k], after[k]) for k in before)


def torch_equal(a, b):
    return a.shape == b.shape and bool((a == b).all())


def test_load_pair_returns_the_cached_pair_and_reports_what_is_loaded(model_dirs):
    a = hsd.load_pair(model_dirs["target"], model_dirs["drafter"], device="cpu")
    b = hsd.load_pair(model_dirs["target"], model_dirs["drafter"], device="cpu")
    assert a is b and a.vocab is b.vocab
    assert hsd.is_loaded(model_dirs["target"], device="cpu")
    assert not hsd.is_loaded(model_dirs["target"], device="cpu", dtype="float16")
