"""Sampling is lossless: the first two emitted tokens follow the target's exact distribution (spec §6).

Peaked bigram models make the exact distribution a product of two table rows. Each test runs a few
thousand seeded generations, so it is deterministic; each also shows that a known-lossy variant of
the algorithm fails the same bound, so the bound has teeth. SLRS runs at its default path budget and
at a tiny one that makes many drafted tokens heavy (proposed as ⊥, docs/slrs.md).
"""

import math
from collections import Counter
from functools import lru_cache

import pytest
import torch

import hsd
import hsd.verify
import realtok
from builders import RowsLM, correlated_rows, peaked_rows
from hsd.algorithms import slrs
from hsd.sampling import Sampling
from pairs import bigram, byte_pair

N = 2500
N_SLRS = 3000
BOUND = 0.06  # total-variation bound on the first two tokens; sampling noise here is about 0.02-0.03
PROMPT = "def f"
SETTINGS = [dict(temperature=1.0, top_k=0, top_p=1.0), dict(temperature=0.8, top_k=3, top_p=0.9)]


def exact_two_token_distribution(pair, settings) -> dict:
    sampling = Sampling(settings["temperature"], settings["top_k"], settings["top_p"])
    table = pair.target.model.table.detach()
    prompt_ids = pair.target.tokenizer(PROMPT)["input_ids"]
    eos = set(pair.target.vocab.eos_ids)
    first = sampling.probs(table[prompt_ids[-1]].unsqueeze(0))[0]
    out = {}
    for t1 in first.nonzero().squeeze(-1).tolist():
        if t1 in eos:
            out[(t1,)] = float(first[t1])
            continue
        second = sampling.probs(table[t1].unsqueeze(0))[0]
        for t2 in second.nonzero().squeeze(-1).tolist():
            out[(t1, t2)] = float(first[t1] * second[t2])
    return out


def empirical(pair, algorithm, settings, n=N) -> dict:
    counts = Counter(tuple(hsd.generate(pair, PROMPT, algorithm=algorithm, max_new_tokens=2, lookahead=3, seed=seed,
                                        **settings).token_ids) for seed in range(n))
    return {k: v / n for k, v in counts.items()}


def tv(a: dict, b: dict) -> float:
    return 0.5 * sum(abs(a.get(k, 0.0) - b.get(k, 0.0)) for k in set(a) | set(b))


def first_token(dist: dict) -> dict:
    out = Counter()
    for k, v in dist.items():
        out[k[0]] += v
    return out


# ("tli", "shared"): on a shared vocabulary the drafter's context after a round is the target's emitted ids
# (close_round in hsd/algorithms/common.py), a function of the whole history rather than of the text alone
CASES = [("sd", "shared"), ("slem", "bpe<-sp"), ("tli", "bpe<-sp"), ("slem", "sp<-bpe"), ("tli", "sp<-bpe"),
         ("tli", "shared")]


def _pair(kind):
    if kind == "bpe<-bytes":
        return byte_pair("bigram")
    return bigram("shared", pad=16) if kind == "shared" else bigram(kind)


@pytest.mark.parametrize("algorithm,kind", CASES)
@pytest.mark.parametrize("settings", SETTINGS, ids=["t1", "topk-topp"])
def test_first_two_tokens_match_target_distribution(algorithm, kind, settings):
    pair = _pair(kind)
    exact = exact_two_token_distribution(pair, settings)
    got = empirical(pair, algorithm, settings)
    print(f"TV first={tv(first_token(got), first_token(exact)):.4f} joint={tv(got, exact):.4f}")
    assert tv(first_token(got), first_token(exact)) < BOUND
    assert tv(got, exact) < BOUND


@pytest.mark.parametrize("algorithm", ["slem", "tli"])
@pytest.mark.parametrize("drafter_temperature", [0.0, pytest.param(0.5, marks=pytest.mark.slow)])
def test_a_drafter_sampling_at_its_own_temperature_stays_lossless(algorithm, drafter_temperature):
    """The drafter's temperature is a free choice (a greedy drafter maximises SLEM's exact-match acceptance,
    ``scripts/pair/pair_goals.py --lookahead auto`` picks it); the output must still follow the target's T=1."""
    pair = _pair("bpe<-sp")
    settings = dict(SETTINGS[0], drafter_temperature=drafter_temperature)
    exact = exact_two_token_distribution(pair, SETTINGS[0])
    got = empirical(pair, algorithm, settings)
    assert tv(first_token(got), first_token(exact)) < BOUND
    assert tv(got, exact) < BOUND


@pytest.mark.parametrize("algorithm,kind", [("sd", "shared"), ("tli", "bpe<-sp"),
                                            pytest.param("slem", "bpe<-sp", marks=pytest.mark.slow)])
def test_a_dynamic_lookahead_stays_lossless(algorithm, kind):
    """``draft_threshold``: how far a round drafts depends on the drafter's own probabilities of what it drew;
    the output must still follow the target's distribution (a draft length chosen by the drafter alone)."""
    pair = _pair(kind)
    exact = exact_two_token_distribution(pair, SETTINGS[0])
    got = empirical(pair, algorithm, dict(SETTINGS[0], draft_threshold=0.5))
    assert tv(first_token(got), first_token(exact)) < BOUND
    assert tv(got, exact) < BOUND


def _slrs_settings(settings, budget):
    return dict(settings, slrs_max_paths=budget) if budget else settings


# SLRS on the multi-byte drafter that matches the target best ("shared": its BPE, a many-path case), at the
# default budget (tokens over 4096 paths are heavy) and at 4 paths (many heavy: ⊥ often), with the static
# rule (full support) and the enumeration's rule (top-k/top-p); the other drafters in the slow run.
SLRS_CASES = [
    ("shared", 0, 0), ("shared", 4, 1),
    pytest.param("shared", 0, 1, marks=pytest.mark.slow), pytest.param("shared", 4, 0, marks=pytest.mark.slow),
    pytest.param("bpe<-sp", 0, 0, marks=pytest.mark.slow), pytest.param("sp<-bpe", 4, 1, marks=pytest.mark.slow),
    pytest.param("bpe<-bytes", 0, 0, marks=pytest.mark.slow), pytest.param("bpe<-sp", 4, 1, marks=pytest.mark.slow),
]


@pytest.mark.parametrize("kind,budget,settings_index", SLRS_CASES)
def test_slrs_first_two_tokens_match_target_distribution(kind, budget, settings_index):
    pair = _pair(kind)
    settings = SETTINGS[settings_index]
    exact = exact_two_token_distribution(pair, settings)
    got = empirical(pair, "slrs", _slrs_settings(settings, budget), n=N_SLRS)
    print(f"TV first={tv(first_token(got), first_token(exact)):.4f} joint={tv(got, exact):.4f}")
    assert tv(first_token(got), first_token(exact)) < BOUND
    assert tv(got, exact) < BOUND


def _lossy_residual(p, q):
    return p  # resample from p instead of the residual max(0, p - q): biased toward the drafter's picks


def _lossy_exact_match(p, proposal, sampling, rng, q_t=None, record=None, own_at=None):
    """Accept any proposal the target finds plausible instead of only those it samples itself."""
    verdict = _real_exact_match(p, proposal, sampling, rng, q_t, record, own_at)
    n = 0
    while n < len(proposal) and float(p[n, proposal[n]]) > 0.05:
        n += 1
    if n > verdict.n_accepted:
        token = int(torch.multinomial(p[n], 1, generator=rng.generator(p.device)))
        return hsd.verify.Verdict(n, token, "bonus", verdict.positions)
    return verdict


_real_exact_match = hsd.verify.exact_match


@pytest.mark.parametrize("algorithm,kind,patch", [
    ("sd", "shared", ("residual_weights", _lossy_residual)),
    ("tli", "bpe<-sp", ("residual_weights", _lossy_residual)),
    ("slem", "bpe<-sp", ("exact_match", _lossy_exact_match)),
])
def test_known_lossy_variant_fails_the_same_bound(algorithm, kind, patch, monkeypatch):
    pair = _pair(kind)
    monkeypatch.setattr(hsd.verify, *patch)
    exact = exact_two_token_distribution(pair, SETTINGS[0])
    got = empirical(pair, algorithm, SETTINGS[0])
    print(f"lossy TV joint={tv(got, exact):.4f}")
    assert tv(got, exact) > BOUND


def _lossy_residual_by_rejection(p, q_of, support, sampling, rng, max_draws, q_under=None):
    return int(rng.sample(p.unsqueeze(0))[0]), 1  # resample from p instead of max(0, p - ψ')


def _heavy_not_bottom(self, t):
    """A heavy token proposed as itself, with the realised path's probability as its ψ (the one path known
    without enumerating): what proposing a heavy token without its exact ψ would do."""
    if t == self.raw and self.statically_heavy(t):
        return math.prod(self.probs)
    return _real_psi(self, t)


_real_psi = slrs._Slot.psi


def _realised_path_only(self, t):
    """ψ(t) of the one drafter path that was sampled instead of the sum over every path yielding t."""
    return math.prod(self.probs) if t == self.raw else _real_psi(self, t)


LOSSY_SLRS = {
    "psi-of-realised-path": [(slrs._Slot, "psi", _realised_path_only)],
    "residual-from-p": [(hsd.verify, "residual_by_rejection", _lossy_residual_by_rejection)],
    "heavy-proposed-with-realised-path-psi": [(slrs._Slot, "proposal", property(lambda self: self.raw)),
                                              (slrs._Slot, "psi", _heavy_not_bottom)],
}


@pytest.mark.parametrize("variant", [pytest.param(v, marks=pytest.mark.slow) if v == "psi-of-realised-path" else v
                                     for v in LOSSY_SLRS])
def test_slrs_known_lossy_variants_fail_the_same_bound(variant, monkeypatch):
    """With 4 paths per ψ most drafted tokens are heavy; proposing them anyway with a guessed ψ is lossy."""
    pair = _pair("shared")
    for target, name, value in LOSSY_SLRS[variant]:
        monkeypatch.setattr(target, name, value)
    got = empirical(pair, "slrs", _slrs_settings(SETTINGS[0], 4), n=1000)
    exact = exact_two_token_distribution(pair, SETTINGS[0])
    print(f"lossy TV joint={tv(got, exact):.4f}")
    assert tv(got, exact) > BOUND


def test_tli_q_used_in_ratio_is_the_probability_sampled():
    """Spec §3: the q' of the acceptance ratio must be the distribution the drafter sampled from."""
    pair = bigram("bpe<-sp")
    res = hsd.generate(pair, PROMPT, algorithm="tli", max_new_tokens=40, temperature=1.0, seed=3)
    checked = 0
    for rnd in res.rounds:
        for drafted, position in zip(rnd.drafted, rnd.positions):
            assert position.q == pytest.approx(drafted.prob, rel=1e-5)
            checked += 1
    assert checked > 10


# ------------------------------------------------------------------------------ at a real vocabulary's size
# The same check over Qwen2's 151,936 entries (target) and DeepSeek-Coder's 32,259 (drafter): what verification
# builds per position (TLI's q' carried into target ids, the residual over the whole target vocabulary) at the
# sizes users run. The first emitted token only (one drafted token, then one verified position), so that a
# thousand seeded runs take seconds although torch's sampler draws one number per vocabulary entry.

REAL_N = 1000
REAL_SETTINGS = dict(temperature=1.0, top_k=0, top_p=1.0)
_real = pytest.mark.skipif(not {"qwen2", "deepseek-coder"} <= set(realtok.available()),
                           reason=f"real vocabulary files missing: run `{realtok.FETCH_COMMAND}`")


@lru_cache(maxsize=None)
def _real_pair(kind: str) -> hsd.Pair:
    """Peaked row models over real vocabularies: ``shared`` (Qwen2 <- Qwen2, SD) or ``hetero`` (Qwen2 <-
    DeepSeek-Coder), the drafter putting its mass on the target's likely tokens, the less likely first (so that
    drafts are often accepted, and a biased correction shows)."""
    tok = realtok.load_tokenizer("qwen2")
    d_tok = tok if kind == "shared" else realtok.load_tokenizer("deepseek-coder")
    pair = hsd.Pair(hsd.Model.wrap(RowsLM(None, len(tok), tok.eos_token_id), tok, "qwen2-rows"),
                    hsd.Model.wrap(RowsLM(None, len(d_tok), d_tok.eos_token_id), d_tok, f"{kind}-rows"))
    both = sorted(set(pair.vocab.drafter_to_target.tolist()) - {-1})  # target ids the drafter can spell
    pair.target.model.row = peaked_rows(pair.target.vocab, seed=11, among=both)
    pair.drafter.model.row = correlated_rows(pair.target.model.row, pair.target.vocab, pair.drafter.vocab, seed=12,
                                             reverse=True)
    return pair


def _real_first_token(pair, algorithm: str, n: int = REAL_N) -> tuple[dict, dict]:
    """(the empirical distribution of the first emitted token over ``n`` seeds, the target's exact one)."""
    last = pair.target.tokenizer(PROMPT)["input_ids"][-1]
    p = Sampling(**REAL_SETTINGS).probs(pair.target.model.row(last).unsqueeze(0))[0]
    exact = {(t,): float(p[t]) for t in p.nonzero().squeeze(-1).tolist()}
    counts = Counter(tuple(hsd.generate(pair, PROMPT, algorithm=algorithm, max_new_tokens=1, lookahead=1, seed=seed,
                                        **REAL_SETTINGS).token_ids) for seed in range(n))
    return {k: v / n for k, v in counts.items()}, exact


@_real
@pytest.mark.parametrize("algorithm,kind", [("tli", "hetero"), pytest.param("slrs", "hetero", marks=pytest.mark.slow),
                                            pytest.param("sd", "shared", marks=pytest.mark.slow),
                                            pytest.param("slem", "hetero", marks=pytest.mark.slow)])
def test_first_token_matches_target_distribution_at_real_vocabulary_size(algorithm, kind):
    got, exact = _real_first_token(_real_pair(kind), algorithm)
    print(f"TV first={tv(got, exact):.4f}")
    assert tv(got, exact) < BOUND


@_real
def test_known_lossy_variant_fails_the_same_bound_at_real_vocabulary_size(monkeypatch):
    monkeypatch.setattr(hsd.verify, "residual_weights", _lossy_residual)
    got, exact = _real_first_token(_real_pair("hetero"), "tli")
    print(f"lossy TV first={tv(got, exact):.4f}")
    assert tv(got, exact) > BOUND
