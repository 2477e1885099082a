"""Shared noise (hsd/noise.py, docs/coupling.md): SLEM drafting and verifying from one noise field stays lossless.

Three kinds of evidence: (1) pathwise: with ``noise="shared"`` SLEM's output is token for token AR's output with the
same seed, on every kind of pair, at several temperatures and lookaheads; (2) the field's draw is an exact sample:
the empirical distribution of many draws matches ``p``, and the first two tokens SLEM emits follow the target's
exact distribution, while known-lossy variants (a draw that reads noise an earlier draw read) fail the same
bounds; (3) the point of it: a drafter that is the target is accepted almost always, where independent noise
accepts ``Σ p²``.
"""

from collections import Counter

import numpy as np
import pytest
import torch

import hsd
import hsd.session
from hsd.errors import InvalidSettingError
from hsd.noise import Trie, sample, trie
from hsd.sampling import Sampling
from pairs import PROMPTS, bigram, byte_pair, heterogeneous, shared_padded
from test_distribution import BOUND, empirical, exact_two_token_distribution, tv

PAIRS = {
    "bpe<-sp": lambda: heterogeneous("bpe<-sp"),
    "sp<-bpe": lambda: heterogeneous("sp<-bpe"),
    "bigram bpe<-sp": lambda: bigram("bpe<-sp"),
    "shared padded": shared_padded,
    "bpe<-bytes": lambda: byte_pair("llama"),
}
SETTINGS = [dict(temperature=1.0), dict(temperature=0.7), dict(temperature=0.8, top_k=5, top_p=0.9)]


@pytest.mark.parametrize("pair_name", list(PAIRS))
def test_shared_noise_slem_emits_exactly_the_ar_tokens(pair_name):
    pair = PAIRS[pair_name]()
    accepted = 0
    for i, prompt in enumerate(PROMPTS[:12]):
        settings = SETTINGS[i % len(SETTINGS)]
        for seed in (i, 100 + i):
            ref = hsd.generate(pair, prompt, algorithm="ar", max_new_tokens=16, seed=seed, noise="shared", **settings)
            got = hsd.generate(pair, prompt, algorithm="slem", max_new_tokens=16, seed=seed, noise="shared",
                               lookahead=(1, 3, 6)[seed % 3], **settings)
            assert got.token_ids == ref.token_ids, (pair_name, prompt, seed, settings)
            accepted += sum(r.n_accepted for r in got.rounds)
    assert accepted > 0  # the identity was tested on accepted proposals, not only on corrections


def test_shared_noise_identity_on_the_embedded_pair_with_a_dynamic_lookahead():
    pair = hsd.load_pair(preset="tiny-code", device="cpu")
    for seed, prompt in enumerate(["def fibonacci(n):", "class Stack:\n    def __init__(self):", "import os\n"]):
        ref = hsd.generate(pair, prompt, algorithm="ar", max_new_tokens=40, temperature=0.7, seed=seed, noise="shared")
        got = hsd.generate(pair, prompt, algorithm="slem", max_new_tokens=40, temperature=0.7, seed=seed,
                           noise="shared", lookahead=12, draft_threshold=0.5)
        assert got.token_ids == ref.token_ids
        assert got.settings["noise"] == "shared"


def _peaked(n: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.softmax(torch.randn(n, generator=g) * 4, -1)


def test_a_draw_from_the_field_is_an_exact_sample():
    """Draws at distinct seeds over the embedded target's vocabulary (its tokens share long prefixes: the walk
    decides many bytes and stops) match ``p`` as closely as multinomial draws do."""
    vocab = hsd.load_pair(preset="tiny-code", device="cpu").target.vocab
    p = _peaked(len(vocab.tokens), 0)
    n = 6000
    counts = np.bincount([sample(p, vocab, seed, 7, 0) for seed in range(n)], minlength=len(p))
    got = 0.5 * float(np.abs(counts / n - p.double().numpy()).sum())
    reference = np.random.default_rng(0).multinomial(n, p.double().numpy() / float(p.double().sum())) / n
    noise = 0.5 * float(np.abs(reference - p.double().numpy()).sum())
    assert got < noise * 1.5 + 0.01, (got, noise)


# the field's draws of the embedded pair's two vocabularies at seeds 0..23 (offset 5·seed, seed % 3 empties)
PINNED_DRAWS = {
    "target": [1343, 1539, 2636, 972, 2392, 2932, 3721, 1867, 1506, 1875, 3229, 1895, 1094, 799, 1340, 434, 1613,
               1437, 825, 3423, 1386, 3481, 4015, 621],
    "drafter": [1007, 391, 1009, 955, 112, 665, 316, 1000, 754, 55, 993, 473, 359, 1011, 159, 44, 782, 682, 123, 325,
                241, 655, 44, 754],
}


def test_the_field_is_the_same_in_every_version():
    """A seed names one text: the field's values are part of the API (an example, a shared trace, a classroom's
    seed must give the same tokens after an upgrade). Pinned on the field as it landed; any faster walk must
    reproduce them."""
    pair = hsd.load_pair(preset="tiny-code", device="cpu")
    for role in ("target", "drafter"):
        m = getattr(pair, role)
        p = torch.softmax(torch.log(_peaked(len(m.vocab.tokens), 1)[:m.n_logits]) * 0.3, -1)
        assert [sample(p, m.vocab, seed, 5 * seed, seed % 3) for seed in range(24)] == PINNED_DRAWS[role], role


def test_tokens_with_the_same_bytes_and_tokens_without_bytes_are_drawn_exactly():
    tokens = [b"a", b"ab", b"ab", None, b"abc", b"b", None, b"a"]
    t = Trie.of(tokens, eos_ids=(3,))
    p = torch.tensor([0.05, 0.2, 0.1, 0.15, 0.2, 0.1, 0.1, 0.1], dtype=torch.float64)
    n = 20000
    counts = np.bincount([t.draw(p.numpy(), seed, 0, 0) for seed in range(n)], minlength=len(tokens)) / n
    assert np.abs(counts - p.numpy()).max() < 0.012, counts


def test_every_token_of_a_vocabulary_can_be_drawn():
    vocab = hsd.load_pair(preset="tiny-code", device="cpu").drafter.vocab
    t = trie(vocab)
    for i in range(0, len(vocab.tokens), 7):
        one_hot = np.zeros(len(vocab.tokens))
        one_hot[i] = 1.0
        assert t.draw(one_hot, 5, 3, 1) == i


CASES = [("slem", "bpe<-sp"), ("slem", "sp<-bpe"), ("ar", "bpe<-sp")]


@pytest.mark.parametrize("algorithm,kind", CASES)
def test_first_two_tokens_match_target_distribution_with_shared_noise(algorithm, kind, monkeypatch):
    settings = dict(temperature=1.0, top_k=0, top_p=1.0)
    pair = bigram(kind)
    exact = exact_two_token_distribution(pair, settings)
    got = empirical(pair, algorithm, {**settings, "noise": "shared"})
    print(f"TV joint={tv(got, exact):.4f}")
    assert tv(got, exact) < BOUND


def test_reading_noise_twice_is_lossy_and_fails_the_same_bound(monkeypatch):
    """The proof needs every target draw to read fresh noise. A draw keyed by the round's start instead of the
    token's own byte offset reads, for the second token, what the first read: the joint distribution is off."""
    original = hsd.session.Session.sample_at
    monkeypatch.setattr(hsd.session.Session, "sample_at",
                        lambda self, p, offset, empties: original(self, p, 0, empties))
    settings = dict(temperature=1.0, top_k=0, top_p=1.0)
    pair = bigram("bpe<-sp")
    exact = exact_two_token_distribution(pair, settings)
    got = empirical(pair, "slem", {**settings, "noise": "shared"})
    assert tv(got, exact) > BOUND


def test_a_drafter_that_is_the_target_is_almost_always_accepted():
    """With independent noise an exact match needs two draws to coincide (``Σ p²`` per position); with shared
    noise the same model draws the same token from the same noise."""
    target = bigram("shared").target
    pair = hsd.Pair(target, target)
    taus = {}
    for noise in ("independent", "shared"):
        rounds = [r for seed in range(20) for r in hsd.generate(
            pair, "def f", algorithm="slem", max_new_tokens=24, temperature=1.0, lookahead=4, seed=seed,
            noise=noise).rounds]
        taus[noise] = sum(len(r.emitted) for r in rounds) / len(rounds)
    assert taus["shared"] > 4.0 > 2.0 > taus["independent"], taus


def test_shared_noise_is_refused_where_rejection_sampling_verifies():
    pair = bigram("bpe<-sp")
    for algorithm in ("tli", "slrs"):
        with pytest.raises(InvalidSettingError, match="noise='shared' works with ar and slem only"):
            hsd.generate(pair, "x", algorithm=algorithm, temperature=1.0, noise="shared")
    with pytest.raises(InvalidSettingError, match="noise must be one of independent, shared"):
        hsd.generate(pair, "x", algorithm="slem", noise="coupled")


def test_greedy_ignores_the_noise():
    pair = bigram("bpe<-sp")
    for algorithm in ("ar", "slem"):
        a = hsd.generate(pair, "def f", algorithm=algorithm, max_new_tokens=12, seed=1)
        b = hsd.generate(pair, "def f", algorithm=algorithm, max_new_tokens=12, seed=1, noise="shared")
        assert a.token_ids == b.token_ids


@pytest.mark.slow  # a training or benchmark script end to end: python -m pytest -m slow
def test_the_benchmark_prints_every_setting_side_by_side(tmp_path, capsys):
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
    import shared_noise

    out = tmp_path / "s.json"
    assert shared_noise.main(["--prompts", "1", "--seeds", "1", "--lookahead", "2", "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "AR (independent noise)" in printed and printed.count("acceptance by position") == len(shared_noise.SETTINGS)
    import json
    rows = json.loads(out.read_text())["rows"]
    assert [r["noise"] for r in rows] == [n for n, _ in shared_noise.SETTINGS]
    assert all(r["tau"] >= 1.0 and r["per_position"][0] is not None for r in rows)


def test_the_round_view_and_the_picture_say_a_shared_noise_match_was_likelier_than_p():
    from hsd import picture, viz

    pair = bigram("bpe<-sp")
    res = hsd.generate(pair, "def f", algorithm="slem", max_new_tokens=12, temperature=1.0, seed=3, lookahead=3,
                       noise="shared", record_distributions=True)
    rnd = next(r for r in res.rounds if r.positions)
    shared = viz.round_html(rnd, algorithm="slem", shared_noise=True)
    assert "P(accept) = p if drawn apart" in shared and "Shared noise: the drafter drew" in shared
    assert "Shared noise" not in viz.round_html(rnd, algorithm="slem")
    assert "shared its noise with the drafter" in picture.rejection_explanation(res, 0)
    plain = hsd.generate(pair, "def f", algorithm="slem", max_new_tokens=12, temperature=1.0, seed=3, lookahead=3,
                         record_distributions=True)
    assert "shared its noise" not in picture.rejection_explanation(plain, 0)
