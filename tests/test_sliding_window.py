"""Targets and drafters whose KV cache is not plain full attention.

Sliding-window layers (Mistral, Qwen2 with ``use_sliding_window``, Gemma-2, Gemma-3), chunked
attention (Llama-4) and a recurrent layer (LFM2's short convolution) must crop back any number of
positions once the window is full, with the logits the model computes without a cache. Every model
is a tiny random one built here, with a window of 16 tokens and prompts of 25 or more.
"""

import copy
from collections import Counter
from functools import lru_cache

import pytest
import torch
from transformers.cache_utils import DynamicCache

import hsd
from builders import WINDOWED, bytelevel_tokenizer, sentencepiece_tokenizer, tiny_llama, tiny_windowed
from hsd.runner import RewindableWindowLayer, Runner, Snapshot
from hsd.sampling import Sampling
from hsd.session import DrafterContext

WINDOW = 16
PROMPTS = ["import os\n\nclass A:\n    def f(self):\n        pass\n",
           "def heappush(heap, item):\n    heap.append(item)\n    _siftdown(heap, 0, len(heap) - 1)\n"]
ALGORITHMS = ["slem", "tli", "slrs", "sd"]
N = 300  # seeded generations per distribution test
BOUND = 0.15  # total variation on the first two tokens; at N = 300 sampling noise is 0.065 on average
# and 0.13 at its 99.9th percentile (simulated from the exact distributions of these cases)


def _noisy_copy(model, seed: int, noise: float = 0.05):
    """A drafter sharing the target's tokenizer and architecture whose greedy choices mostly agree."""
    drafter = copy.deepcopy(model)
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for tensor in drafter.parameters():
            tensor.mul_(1 + noise * torch.randn(tensor.shape, generator=gen))
    return drafter


@lru_cache(maxsize=None)
def _target(kind: str):
    return tiny_windowed(kind, bytelevel_tokenizer(), 0, window=WINDOW)


@lru_cache(maxsize=None)
def _pairs(kind: str) -> dict[str, hsd.Pair]:
    """``kind`` as target: with a SentencePiece Llama drafter, and with a noisy copy of itself (for SD,
    so SD runs a windowed drafter too)."""
    bpe, sp = bytelevel_tokenizer(), sentencepiece_tokenizer()
    target = _target(kind)
    return {"other": hsd.Pair.from_models(target, bpe, tiny_llama(sp, 1), sp),
            "shared": hsd.Pair.from_models(target, bpe, _noisy_copy(target, 1), bpe)}


def _full_logits(model, ids: list[int], keep: int) -> torch.Tensor:
    """The model's logits without any cache: one forward over the whole sequence."""
    with torch.inference_mode():
        return model(input_ids=torch.tensor([ids])).logits[0, -keep:]


@pytest.mark.parametrize("kind", WINDOWED)
def test_runner_logits_match_full_forward_after_deep_crops(kind):
    """Forwards of 1-5 tokens, each followed by a crop of 0-12 positions (past the round's own tokens,
    as the drafter's re-tokenization does): every forward's logits equal a cache-free forward."""
    model = _target(kind)
    gen = torch.Generator().manual_seed(0)
    ids = bytelevel_tokenizer()(PROMPTS[0] + PROMPTS[1])["input_ids"]
    assert len(ids) > 3 * WINDOW
    runner = Runner(hsd.Model.wrap(model, bytelevel_tokenizer()))
    runner.forward(ids[:2 * WINDOW], keep=1)
    for _ in range(12):
        n = int(torch.randint(1, 6, (1,), generator=gen))
        new = torch.randint(0, 600, (n,), generator=gen).tolist()
        got = runner.forward(new, keep=n)
        torch.testing.assert_close(got, _full_logits(model, runner.ids, n), atol=1e-5, rtol=1e-5)
        runner.crop(max(WINDOW, len(runner) - int(torch.randint(0, 13, (1,), generator=gen))))


@pytest.mark.parametrize("kind", [k for k in WINDOWED if k != "lfm2"])
def test_runner_attends_exactly_like_the_models_own_cache(kind):
    """Without crops, the runner's logits are bitwise those of the model's own ``DynamicCache``
    (which drops what left the window), so greedy decoding matches the model's ``generate``."""
    model = _target(kind)
    ids = bytelevel_tokenizer()(PROMPTS[1])["input_ids"]
    runner = Runner(hsd.Model.wrap(model, bytelevel_tokenizer()))
    own = DynamicCache(config=model.config)
    assert any(layer.is_sliding for layer in own.layers)
    with torch.inference_mode():
        for chunk in [ids[:20], ids[20:23], ids[23:24], ids[24:30], ids[30:31]]:
            expected = model(input_ids=torch.tensor([chunk]), past_key_values=own, use_cache=True).logits[0]
            assert torch.equal(runner.forward(chunk, keep=len(chunk)), expected)


def test_a_window_one_token_short_is_caught():
    """The comparison above has teeth: attending to one past position too few changes the logits."""
    model = _target("mistral")
    ids = bytelevel_tokenizer()(PROMPTS[1])["input_ids"]
    runner = Runner(hsd.Model.wrap(model, bytelevel_tokenizer()))
    runner.forward(ids[:-1], keep=1)
    for layer in runner.cache.layers:
        assert isinstance(layer, RewindableWindowLayer)
        layer.sliding_window -= 1
    assert not torch.allclose(runner.forward(ids[-1:], keep=1), _full_logits(model, ids, 1), atol=1e-3)


@pytest.mark.parametrize("kind", WINDOWED)
def test_greedy_output_identical_to_autoregressive_and_generate(kind):
    """Every algorithm with this target emits the AR tokens, which are the model's own greedy ``generate``."""
    pairs = _pairs(kind)
    rejected = Counter()
    for i, prompt in enumerate(PROMPTS):
        ref = hsd.generate(pairs["other"], prompt, algorithm="ar", max_new_tokens=24)
        assert len(ref.prompt_ids) > WINDOW
        with torch.inference_mode():
            own = _target(kind).generate(torch.tensor([ref.prompt_ids]), max_new_tokens=24, do_sample=False)
        assert own[0, len(ref.prompt_ids):].tolist() == ref.token_ids
        for algorithm in ALGORITHMS:
            pair = pairs["shared" if algorithm == "sd" else "other"]
            res = hsd.generate(pair, prompt, algorithm=algorithm, max_new_tokens=24, lookahead=(3, 5)[i])
            assert (res.token_ids, res.stop_reason) == (ref.token_ids, ref.stop_reason), algorithm
            rejected[algorithm] += sum(p.outcome == "rejected" for r in res.rounds for p in r.positions)
    assert all(rejected[a] > 0 for a in ALGORITHMS), rejected  # the crops past the window happened


def _exact_two_tokens(model, prompt_ids: list[int], sampling: Sampling, eos: set[int]) -> dict:
    """The target's distribution of its first two tokens, from cache-free forwards."""
    first = sampling.probs(_full_logits(model, prompt_ids, 1))[0]
    support = first.nonzero().squeeze(-1).tolist()
    with torch.inference_mode():
        second = sampling.probs(model(input_ids=torch.tensor([prompt_ids + [t] for t in support])).logits[:, -1])
    out = {}
    for t1, row in zip(support, second):
        if t1 in eos:
            out[(t1,)] = float(first[t1])
            continue
        for t2 in row.nonzero().squeeze(-1).tolist():
            out[(t1, t2)] = float(first[t1] * row[t2])
    return out


def _tv(a: dict, b: dict) -> float:
    return 0.5 * sum(abs(a.get(k, 0.0) - b.get(k, 0.0)) for k in set(a) | set(b))


# One cache type each, and each algorithm once: sliding, interleaved sliding/global, chunked, recurrent
# (rebuilt by a prefill on every crop; its logits and greedy output are checked above in the default run).
DISTRIBUTION_CASES = [("mistral", "slem"), ("gemma3", "tli"), ("llama4", "slrs"),
                      pytest.param("lfm2", "sd", marks=pytest.mark.slow)]


@pytest.mark.parametrize("kind,algorithm", DISTRIBUTION_CASES)
def test_first_two_tokens_match_target_distribution(kind, algorithm):
    settings = dict(temperature=1.0, top_k=3, top_p=1.0)
    pair = _pairs(kind)["shared" if algorithm == "sd" else "other"]
    prompt_ids = bytelevel_tokenizer()(PROMPTS[0])["input_ids"]
    exact = _exact_two_tokens(_target(kind), prompt_ids, Sampling(1.0, 3, 1.0), set(pair.target.vocab.eos_ids))
    assert max(exact.values()) < 0.5  # spread enough for the bound to mean something
    counts = Counter(tuple(hsd.generate(pair, PROMPTS[0], algorithm=algorithm, max_new_tokens=2, lookahead=2,
                                        seed=seed, **settings).token_ids) for seed in range(N))
    got = {k: v / N for k, v in counts.items()}
    print(f"TV joint={_tv(got, exact):.4f}")
    assert _tv(got, exact) < BOUND


@lru_cache(maxsize=None)
def _windowed_drafter_pair() -> hsd.Pair:
    bpe, sp = bytelevel_tokenizer(), sentencepiece_tokenizer()
    return hsd.Pair.from_models(tiny_llama(bpe, 0, layers=2), bpe, tiny_windowed("gemma3", sp, 1, window=8), sp)


def test_greedy_identity_with_a_sliding_window_drafter():
    """The drafter's cache is cropped past earlier rounds after re-tokenization, with its window full."""
    pair = _windowed_drafter_pair()
    dropped = 0
    for prompt in PROMPTS:
        ref = hsd.generate(pair, prompt, algorithm="ar", max_new_tokens=24)
        for algorithm in ["slem", "tli", "slrs"]:
            res = hsd.generate(pair, prompt, algorithm=algorithm, max_new_tokens=24, lookahead=4)
            assert res.token_ids == ref.token_ids, algorithm
            dropped += sum(r.drafter_dropped for r in res.rounds)
    assert dropped > 0


def test_slrs_batched_drafter_rows_match_recomputation_with_a_sliding_window():
    """SLRS's ψ runs open paths as one batch over a snapshot of the drafter's windowed cache
    (``Runner.forward_paths``); the logits equal those of batched forwards that recompute the whole
    prefix without a cache."""
    drafter = _windowed_drafter_pair().drafter
    d = DrafterContext(drafter, drafter.tokenizer(PROMPTS[1])["input_ids"])
    d.prefill()
    d.next_logits()
    snap = d.runner.snapshot()
    assert snap.layers is not None and any(w is not None for _, _, w in snap.layers)
    paths = [(t,) for t in range(300, 340)] + [(t, t + 1) for t in range(300, 340)]
    cached = torch.cat([d.runner.forward_paths(snap, paths[:40]), d.runner.forward_paths(snap, paths[40:])])
    plain = Snapshot(snap.ids, None)
    recomputed = torch.cat([d.runner.forward_paths(plain, paths[:40]), d.runner.forward_paths(plain, paths[40:])])
    torch.testing.assert_close(cached, recomputed, atol=1e-6, rtol=1e-5)


def test_the_runner_rewinds_only_the_cache_layers_its_transformers_has():
    """transformers 5.17 (a GPU image's) has no DummyLayer: hsd still imports there, and rewinds what it builds."""
    import types

    from transformers import cache_utils

    from hsd.runner import _rewindable_types

    old = types.SimpleNamespace(DynamicLayer=cache_utils.DynamicLayer)
    assert set(_rewindable_types(old)) == {cache_utils.DynamicLayer, RewindableWindowLayer}
    assert {t.__name__ for t in _rewindable_types()} >= {"DynamicLayer", "DummyLayer", "DynamicIndexedLayer"}
