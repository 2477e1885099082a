"""The lean drafter forward (hsd/lean.py) computes transformers' logits, through every runner operation.

Each supported architecture is a tiny random model built here (Llama with and without grouped-query attention,
Llama-3 RoPE scaling, Mistral with a sliding window every layer, Qwen2 with biased projections and sliding layers
from the second on), plus the embedded pair's drafters. A script of forwards, crops past the window, snapshots,
batched paths and a snapshot that the runner has since overwritten is run on a :class:`LeanRunner` and on
transformers' :class:`Runner` side by side; every logit row must agree to float32 rounding.
"""

import copy
import json
from pathlib import Path

import pytest
import torch
import transformers as tf

import hsd
from builders import bytelevel_tokenizer, tiny_llama, tiny_windowed
from hsd.lean import LeanRunner, drafter_runner, lean_unsupported
from hsd.loading import Model
from hsd.runner import Runner
from hsd.session import DrafterContext

TOL = 2e-4  # float32: different summation orders, logits of size ~10


@pytest.fixture(scope="module")
def tok():
    return bytelevel_tokenizer()


def _llama(tok, **extra):
    torch.manual_seed(3)
    config = tf.LlamaConfig(vocab_size=len(tok), hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                            max_position_embeddings=512, tie_word_embeddings=False, **extra)
    return tf.LlamaForCausalLM(config).eval()


MODELS = {
    "llama": lambda tok: tiny_llama(tok, 0, layers=2),
    "llama-gqa": lambda tok: _llama(tok, num_attention_heads=4, num_key_value_heads=1),
    "llama3-rope": lambda tok: _llama(tok, num_attention_heads=2, num_key_value_heads=2, rope_parameters=dict(
        rope_type="llama3", rope_theta=10000.0, factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0,
        original_max_position_embeddings=64)),
    "mistral": lambda tok: tiny_windowed("mistral", tok, 1, window=8),
    "qwen2": lambda tok: tiny_windowed("qwen2", tok, 2, window=8, layers=3),
}


def _script(a: Runner, b: Runner, vocab: int) -> int:
    """Drive both runners the same way; return how many logit rows were compared."""
    gen = torch.Generator().manual_seed(0)
    ids = lambda n: torch.randint(3, vocab, (n,), generator=gen).tolist()
    rows = 0

    def same(x, y):
        nonlocal rows
        assert x.shape == y.shape
        assert torch.allclose(x, y, atol=TOL, rtol=0), (x - y).abs().max()
        rows += x.shape[0]

    same(a.forward(p := ids(20), keep=3), b.forward(p, keep=3))  # prefill
    for _ in range(6):  # one token at a time, past the window
        same(a.forward(t := ids(1)), b.forward(t))
    a.crop(17), b.crop(17)  # back inside the prefill
    same(a.forward(t := ids(4), keep=4), b.forward(t, keep=4))
    snap_a, snap_b = a.snapshot(), b.snapshot()
    paths = [tuple(ids(3)) for _ in range(4)]
    same(a.forward_paths(snap_a, paths), b.forward_paths(snap_b, paths))
    same(a.forward(t := ids(2), keep=2), b.forward(t, keep=2))  # runs on past the snapshot...
    same(a.forward_paths(snap_a, paths[:2]), b.forward_paths(snap_b, paths[:2]))  # ...which still holds
    a.crop(5), b.crop(5)
    same(a.forward(t := ids(9), keep=9), b.forward(t, keep=9))  # the snapshot's positions are overwritten
    same(a.forward_paths(snap_a, paths), b.forward_paths(snap_b, paths))
    a.sync_to(a.ids[:10] + [1]), b.sync_to(b.ids[:10] + [1])
    assert a.ids == b.ids and len(a) == 10
    same(a.forward(t := ids(300), keep=2), b.forward(t, keep=2))  # the buffers grow past 256 positions
    return rows


@pytest.mark.parametrize("prefix", ["read-once", "copied"])
@pytest.mark.parametrize("kind", MODELS)
def test_lean_runner_computes_the_logits_transformers_computes(tok, kind, prefix, monkeypatch):
    """Batched paths read the cached prefix once for all paths, or from a copy per path: the same logits."""
    monkeypatch.setattr(hsd.lean, "SHARED_PREFIX", 0 if prefix == "read-once" else 10**9)
    net = MODELS[kind](tok)
    before = copy.deepcopy(net.state_dict())
    model = Model.wrap(net, tok)
    assert lean_unsupported(model) is None
    assert _script(LeanRunner(model), Runner(model), model.n_logits) > 0
    assert all(torch.equal(before[k], v) for k, v in net.state_dict().items())  # read, never changed


@pytest.mark.parametrize("role", ["drafter", "drafter-bytes"])
def test_lean_runner_matches_transformers_on_the_embedded_drafters(role):
    model = hsd.load_pair(preset="tiny-code" if role == "drafter" else "tiny-code-bytes").drafter
    assert lean_unsupported(model) is None
    assert _script(LeanRunner(model), Runner(model), model.n_logits) > 0


def test_other_architectures_dtypes_and_the_switch_keep_transformers_forward(tok, monkeypatch):
    gemma = Model.wrap(tiny_windowed("gemma2", tok, 0), tok)
    assert "Gemma2ForCausalLM" in lean_unsupported(gemma)
    assert type(drafter_runner(gemma)) is Runner
    half = Model.wrap(tiny_llama(tok, 0).to(torch.bfloat16), tok)
    assert "bfloat16" in lean_unsupported(half)
    dynamic = tiny_llama(tok, 0)
    dynamic.config.rope_parameters = dict(rope_type="dynamic", rope_theta=10000.0, factor=2.0)
    assert "dynamic" in lean_unsupported(Model.wrap(dynamic, tok))
    llama = Model.wrap(tiny_llama(tok, 0), tok)
    assert type(drafter_runner(llama)) is LeanRunner
    monkeypatch.setenv("HSD_LEAN_DRAFTER", "0")
    assert type(drafter_runner(llama)) is Runner


def test_the_drafter_drafts_on_the_lean_runner_and_greedy_output_is_the_targets():
    pair = hsd.load_pair(preset="tiny-code")
    assert type(DrafterContext(pair.drafter, [1, 2, 3]).runner) is LeanRunner
    prompt = "def fibonacci(n):\n"
    ar = hsd.generate(pair, prompt, algorithm="ar", max_new_tokens=40, temperature=0.0)
    for algorithm in ("slem", "tli"):
        out = hsd.generate(pair, prompt, algorithm=algorithm, max_new_tokens=40, temperature=0.0)
        assert out.text == ar.text, algorithm


@pytest.mark.slow  # a training or benchmark script end to end: python -m pytest -m slow
def test_lean_drafter_benchmark_runs_every_setting_and_greedy_outputs_agree(tmp_path):
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts" / "pair"))
    import drafter_pair
    import lean_drafter

    out = lean_drafter.main(["--prompts", "1", "--max-new-tokens", "10", "--json", str(tmp_path / "lean.json")])
    assert len(out["settings"]) == len(drafter_pair.SETTINGS)
    assert set(out["forward_ms"]) == {"drafter", "drafter-bytes", "drafter-sampling"}
    for row in out["settings"]:
        assert row["tps"]["ar"] > 0 and row["tps"]["lean"] > 0
        if row["temperature"] == 0:  # both are the target's greedy text
            assert row["same_output"] == 1, row
    assert json.loads((tmp_path / "lean.json").read_text())["settings"] == out["settings"]
