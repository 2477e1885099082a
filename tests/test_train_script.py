"""End-to-end test of scripts/train_pair.py on a tiny slice, plus a load test of the shipped pair."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "train_pair.py"
SHIPPED = ROOT / "assets" / "tiny-code"
ROLES = ("target", "drafter", "drafter-bytes")
TEXT = 'def add(a, b):\n    """Sum."""\n        return a + b  # café ✓\n\tpass\n'


def _offline_env():
    env = dict(os.environ)
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    return env


@pytest.fixture(scope="module")
def tiny_pair(tmp_path_factory):
    out = tmp_path_factory.mktemp("pair")
    cmd = [sys.executable, str(SCRIPT), "--out", str(out), "--preset", "tiny", "--max-files", "12",
           "--steps-target", "4", "--steps-drafter", "3", "--steps-bytes", "3", "--distill-samples", "4",
           "--distill-new-tokens", "8", "--measure-reps", "2", "--measure-rounds", "1", "--sample-tokens", "4",
           "--eval-max-windows", "4", "--seed", "7"]
    proc = subprocess.run(cmd, cwd=ROOT, env=_offline_env(), capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return out


def _load(path):
    os.environ["HF_HUB_OFFLINE"] = "1"
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path).eval()
    return tok, model


def _check_dir(path: Path):
    import torch

    for f in ("config.json", "model.safetensors", "generation_config.json", "tokenizer.json",
              "tokenizer_config.json", "README.md"):
        assert (path / f).is_file(), f"{path}/{f} missing"
    tok, model = _load(path)
    assert model.dtype == torch.float32
    assert tok.bos_token_id is not None and tok.eos_token_id is not None
    assert tok.pad_token_id is not None and tok.unk_token_id is not None
    assert model.config.vocab_size == len(tok)
    gen = json.loads((path / "generation_config.json").read_text())
    assert gen["eos_token_id"] == tok.eos_token_id
    ids = tok.encode(TEXT, add_special_tokens=False)
    assert tok.decode(ids) == TEXT, path.name
    enc = tok("def f(x):\n", return_tensors="pt")
    with torch.no_grad():
        out = model.generate(**enc, max_new_tokens=5, do_sample=False, pad_token_id=tok.pad_token_id)
    assert out.shape[1] > enc["input_ids"].shape[1]
    assert "## Measurements" in (path / "README.md").read_text()
    return tok


def test_tiny_run_outputs_load_and_roundtrip(tiny_pair):
    toks = {r: _check_dir(tiny_pair / r) for r in ROLES}
    # the tokenizers must be genuinely different
    assert toks["target"].get_vocab() != toks["drafter"].get_vocab()
    assert len(toks["target"]) != len(toks["drafter"])
    assert len(toks["drafter-bytes"]) <= 260
    assert any(t.startswith("Ġ") for t in toks["target"].get_vocab())
    assert any(t.startswith("▁") for t in toks["drafter"].get_vocab())
    assert all(f"<0x{b:02X}>" in toks["drafter"].get_vocab() for b in range(256))
    # the different tokenizations of the same text
    assert toks["target"].tokenize(TEXT) != toks["drafter"].tokenize(TEXT)


def test_tiny_run_log_and_corpus(tiny_pair):
    log = json.loads((tiny_pair / "train_log.json").read_text())
    for role in ROLES:
        assert log[role]["training"]["steps"] > 0
        assert log[role]["training"]["tokens_seen"] > 0
        assert log[role]["heldout"]["fp16"]["nats_per_token"] > 0
    for name, rep in log["tokenizers"].items():
        assert rep["roundtrip_exact"] == rep["roundtrip_docs"], name
    assert set(log["measurements"]["target"]["verify_k_plus_1_ms"]) == {str(k) for k in range(1, 9)}
    corpus = json.loads((tiny_pair / "corpus.json").read_text())
    assert corpus["heldout"] and corpus["train"]
    assert not set(corpus["heldout"]) & set(corpus["train"])


@pytest.mark.skipif(not (SHIPPED / "target" / "model.safetensors").exists(),
                    reason="assets/tiny-code not trained/committed yet (run scripts/train_pair.py)")
def test_shipped_pair_loads_offline():
    toks = {r: _check_dir(SHIPPED / r) for r in ROLES}
    assert toks["target"].get_vocab() != toks["drafter"].get_vocab()
    size = sum(f.stat().st_size for f in (ROOT / "assets").rglob("*") if f.is_file())
    assert size < 40e6, f"assets/ is {size / 1e6:.1f} MB"
