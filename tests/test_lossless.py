"""hsd.lossless: the live losslessness check. Its draws are the engine's own (the same tokens as plain
``generate`` calls with the same seeds), its exact distribution is the target's, the honest algorithms stay
within the noise floor and the lossy test switch does not."""

from collections import Counter

import numpy as np
import plotly.graph_objects as go
import pytest

import hsd
from hsd import lossless
from hsd.errors import InvalidSettingError
from hsd.sampling import Sampling
from pairs import bigram, heterogeneous, shared_padded

PROMPT = "def f"
N = 600  # draws per histogram: the floor is about 0.06 on these peaked bigram targets, the lossy TV 0.18 to 1
CASES = [("sd", "shared"), ("slem", "bpe<-sp"), ("tli", "bpe<-sp"), ("slrs", "shared")]


def _bigram(kind):
    return bigram("shared", pad=16) if kind == "shared" else bigram(kind)


@pytest.mark.parametrize("algorithm,kind", CASES)
def test_honest_algorithm_stays_within_the_floor_and_the_lossy_switch_exceeds_it(algorithm, kind):
    pair = _bigram(kind)
    honest = lossless.check_next_token(pair, algorithm, PROMPT, N, temperature=1.0, seed=0)
    lossy = lossless.check_next_token(pair, algorithm, PROMPT, N, temperature=1.0, seed=0, lossy=True)
    print(f"{algorithm}: TV AR {honest.tv_ar:.3f}, honest {honest.tv_algo:.3f}, lossy {lossy.tv_algo:.3f}, "
          f"floor {honest.floor:.3f}")
    assert honest.ar_within and honest.algo_within and honest.passed
    assert not lossy.passed and lossy.tv_algo > 2 * lossy.floor
    assert lossy.ar_within and lossy.tv_ar == honest.tv_ar  # the switch touches only the algorithm
    assert "no sign" in lossless.describe(honest) and "does not follow" in lossless.describe(lossy)


def test_exact_distribution_is_the_target_next_token_distribution():
    pair = _bigram("shared")
    settings = dict(temperature=0.8, top_k=3, top_p=0.9)
    check = lossless.check_next_token(pair, "sd", PROMPT, 50, **settings)
    last = pair.target.tokenizer(PROMPT)["input_ids"][-1]
    exact = Sampling(**settings).probs(pair.target.model.table[last].unsqueeze(0))[0].double()
    exact = exact / exact.sum()
    assert check.p == pytest.approx([float(exact[t]) for t in check.ids], abs=1e-6)
    assert set(exact.nonzero().squeeze(-1).tolist()) <= set(check.ids)
    assert sum(check.ar) + check.ar_rest == 50 and sum(check.algo) + check.algo_rest == 50


@pytest.mark.parametrize("algorithm,kind", [("sd", "shared"), ("slem", "bpe<-sp"), ("tli", "sp<-bpe"),
                                            ("slrs", "bpe<-sp")])
def test_draws_are_the_engine_own_first_tokens(algorithm, kind):
    """The check reruns a prefilled session's first round with forwards from a memo: each draw must be the
    token ``generate`` emits with the same seed (AR: even seeds, the algorithm: odd ones), on real
    transformer models whose caches are cropped and refilled."""
    pair = shared_padded() if kind == "shared" else heterogeneous(kind)
    n, seed = 24, 5
    check = lossless.check_next_token(pair, algorithm, "def fib(n):", n, temperature=1.0, seed=seed, lookahead=3)

    def first(alg, s):
        return hsd.generate(pair, "def fib(n):", algorithm=alg, max_new_tokens=1, temperature=1.0, seed=s,
                            lookahead=3).token_ids[0]

    assert Counter({t: c for t, c in zip(check.ids, check.algo) if c}) == \
           Counter(first(algorithm, seed + 2 * i + 1) for i in range(n))
    assert Counter({t: c for t, c in zip(check.ids, check.ar) if c}) == \
           Counter(first("ar", seed + 2 * i) for i in range(n))
    assert check.extra["memo_hits"] > 0


def test_noise_floor_and_total_variation():
    p = np.array([0.5, 0.25, 0.25, 0.0])
    assert lossless.total_variation({0: 5, 1: 5}, p, 10) == pytest.approx(0.25)
    assert lossless.total_variation({3: 2}, p, 2) == pytest.approx(1.0)
    floors = [lossless.noise_floor(p, n) for n in (100, 1000, 10000)]
    assert floors[0] > floors[1] > floors[2] > 0  # shrinks like 1/sqrt(n)
    assert floors[0] / floors[2] == pytest.approx(10, rel=0.35)
    assert lossless.noise_floor(np.array([0.0, 1.0]), 50) == 0.0  # greedy: an exact sampler never misses
    rng = np.random.default_rng(9)  # about 1% of exact samplers exceed the 99% floor
    draws = rng.multinomial(1000, p, size=2000)
    over = np.mean([0.5 * np.abs(c / 1000 - p).sum() > floors[1] for c in draws])
    assert 0.002 < over < 0.03


def test_greedy_is_exact_and_the_lossy_greedy_drafter_is_caught():
    pair = _bigram("bpe<-sp")
    check = lossless.check_next_token(pair, "tli", PROMPT, 20, temperature=0.0)
    assert check.floor == 0.0 and check.tv_ar == 0.0 and check.tv_algo == 0.0 and check.passed
    lossy = lossless.check_next_token(pair, "tli", PROMPT, 20, temperature=0.0, lossy=True)
    assert lossy.tv_algo == 1.0 and not lossy.passed


def test_progress_then_result_and_the_figure():
    items = list(lossless.iter_check(_bigram("shared"), "sd", PROMPT, 200, temperature=1.0, every_s=0.0))
    *progress, check = items
    assert progress and all(isinstance(s, str) and "draws" in s for s in progress)
    assert progress[-1].startswith("200/200")
    assert isinstance(check, lossless.CheckResult) and check.draws_per_s > 0 and check.seconds > 0
    fig = lossless.lossless_figure(check)
    assert isinstance(fig, go.Figure) and [t.type for t in fig.data] == ["bar", "bar", "scatter"]
    assert sum(fig.data[0].y) == pytest.approx(1.0) and sum(fig.data[1].y) == pytest.approx(1.0)
    assert sum(fig.data[2].y) == pytest.approx(1.0, abs=1e-6)
    title = fig.layout.title.text
    assert f"{check.tv_ar:.3f}" in title and f"{check.tv_algo:.3f}" in title and f"{check.floor:.3f}" in title
    sentence = lossless.describe(check)
    assert sentence.count(".") <= 4 and sentence.endswith(".") and "\n" not in sentence


def test_bad_requests_say_what_to_do():
    pair = _bigram("shared")
    with pytest.raises(InvalidSettingError, match="n must be"):
        lossless.check_next_token(pair, "sd", PROMPT, 0)
    with pytest.raises(InvalidSettingError, match="other than 'ar'"):
        lossless.check_next_token(pair, "ar", PROMPT, 10)
    with pytest.raises(hsd.IncompatiblePairError):
        lossless.check_next_token(_bigram("bpe<-sp"), "sd", PROMPT, 10)
    with pytest.raises(InvalidSettingError, match="temperature"):
        lossless.check_next_token(pair, "sd", PROMPT, 10, temperature=-1)
    assert lossless.default_n("slrs") < lossless.default_n("slem")
