"""The real-tokenizer fixture (tests/realtok.py) is sound: the GGUF vocabularies convert to
tokenizers that reproduce llama.cpp's reference tokenizations, and the tiny models built on
them load offline like Hub model directories.

Skips when the vocabularies are not fetched (``python scripts/fetch_vocabs.py``).
By default only the vocabularies used in ``realtok.PAIRS`` are checked (first run builds and
caches them, later runs take seconds); set ``HSD_REALTOK_ALL=1`` to check every fetched one.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import realtok  # noqa: E402

if not realtok.available():
    pytest.skip(f"real tokenizer vocabularies not fetched; run `{realtok.FETCH_COMMAND}`",
                allow_module_level=True)

PAIR_NAMES = sorted({n for p in realtok.PAIRS for n in (p.target, p.drafter)})
if os.environ.get("HSD_REALTOK_ALL"):
    CHECKED = [n for n in realtok.available() if realtok.has_reference(n)]
else:
    CHECKED = [n for n in PAIR_NAMES if n in realtok.available()]


def test_pairs_use_fetched_vocabularies():
    missing = [n for n in PAIR_NAMES if n not in realtok.available()]
    assert not missing, f"PAIRS name vocabularies that were not fetched: {missing}"
    assert any(p.target == p.drafter for p in realtok.PAIRS), "no shared-tokenizer control pair"


@pytest.mark.parametrize("name", CHECKED)
def test_reference_agreement(name):
    agree, total = realtok.reference_agreement(name)
    assert total >= 40
    bad = realtok.reference_disagreements(name)[:3]
    assert agree / total >= realtok.USABLE_THRESHOLD, (
        f"{name}: {agree}/{total} agree; e.g. " + "; ".join(f"{t!r}: ref {r} got {o}" for t, r, o in bad))
    assert realtok.usable(name)


@pytest.mark.parametrize("name", PAIR_NAMES)
def test_tiny_model_forward_and_greedy_variety(name):
    import torch
    model, tok = realtok.load_tiny_model(name)
    assert model.config.vocab_size == len(tok)
    assert model.dtype == torch.float32
    ids = tok("def f(x):\n    return x", return_tensors="pt").input_ids
    with torch.no_grad():
        logits = model(ids).logits
    assert logits.shape == (1, ids.shape[1], len(tok))
    assert torch.isfinite(logits).all()
    new = []
    with torch.no_grad():  # plain greedy loop: 30 tokens, no stopping at eos
        for _ in range(30):
            nxt = model(ids, use_cache=False).logits[0, -1].argmax().view(1, 1)
            ids = torch.cat([ids, nxt], dim=1)
            new.append(int(nxt))
    assert len(set(new)) >= 10, f"{name}: greedy decoding is degenerate: {new}"
    gen = json.loads((realtok.tiny_model_dir(name) / "generation_config.json").read_text())
    assert gen.get("eos_token_id") == tok.eos_token_id


def test_padded_control():
    pair = next(p for p in realtok.PAIRS if p.target == p.drafter)
    padded = pair.drafter_dir() if pair.drafter_vocab_size else pair.target_dir()
    plain = pair.target_dir() if pair.drafter_vocab_size else pair.drafter_dir()
    meta = json.loads((padded / "realtok.json").read_text())
    assert meta["vocab_size"] != meta["len_tokenizer"]
    assert meta["vocab_size"] == realtok.padded_vocab_size(pair.target)
    assert json.loads((plain / "config.json").read_text())["vocab_size"] == meta["len_tokenizer"]
    # Same tokenizer on both sides.
    assert (padded / "tokenizer.json").read_bytes() == (plain / "tokenizer.json").read_bytes()


def test_models_load_offline_like_hub_dirs():
    """A fresh interpreter with HF_HUB_OFFLINE=1 loads model dirs with the Auto classes alone
    and runs a forward pass (so nothing reaches for the Hub). Checked on the first pair and
    the padded control (every dir is built the same way; all of them cost ~15 s)."""
    control = next(p for p in realtok.PAIRS if p.target == p.drafter)
    dirs = sorted({str(d) for p in (realtok.PAIRS[0], control) for d in (p.target_dir(), p.drafter_dir())})
    code = (
        "import sys, torch\n"
        "from transformers import AutoModelForCausalLM, AutoTokenizer\n"
        "for d in sys.argv[1:]:\n"
        "    tok = AutoTokenizer.from_pretrained(d)\n"
        "    m = AutoModelForCausalLM.from_pretrained(d)\n"
        "    ids = tok('Hello, world', return_tensors='pt').input_ids\n"
        "    with torch.no_grad():\n"
        "        lg = m(ids).logits\n"
        "    assert lg.shape[-1] == m.config.vocab_size >= len(tok), d\n"
        "    print('ok', d, m.config.vocab_size, len(tok))\n"
    )
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    res = subprocess.run([sys.executable, "-c", code, *dirs], env=env, capture_output=True,
                         text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    assert res.stdout.count("ok ") == len(dirs)


def test_adversarial_prompts():
    prompts = realtok.ADVERSARIAL_PROMPTS
    assert len(prompts) >= 30 and len(set(prompts)) == len(prompts)
    for name in PAIR_NAMES:
        tok = realtok.load_tokenizer(name)
        for p in prompts:
            ids = tok.encode(p, add_special_tokens=False)
            assert all(0 <= i < len(tok) for i in ids)
            assert isinstance(tok.decode(ids), str)
