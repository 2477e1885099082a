"""The engine's work per round stays exact where it is cut: greedy rows held as their argmax (``OneHot``), TLI's q'
carried into target ids only where verification reads it, SLRS's candidates without a sort of the vocabulary,
numpy's argmax for torch's; and ``benchmarks/engine_cost.py`` runs end to end on real vocabularies."""

from __future__ import annotations

import importlib.util
import json
import random
from pathlib import Path

import pytest
import torch

import realtok
from hsd import verify
from hsd.algorithms import slrs
from hsd.algorithms.tli import InTarget
from hsd.sampling import OneHot, Rng, Rows, Sampling, argmax, probs_at, row
from hsd.vocab import PairVocab, Vocab

ROOT = Path(__file__).resolve().parent.parent


def test_fast_argmax_is_torchs_argmax_on_ties_nans_infinities_and_views():
    gen = torch.Generator().manual_seed(0)
    rnd = random.Random(0)
    for trial in range(600):
        n, size = rnd.randint(1, 6), rnd.choice([1, 2, 17, 1000, 40000])
        x = torch.randn(n, size, generator=gen)
        kind = trial % 6
        if kind == 1:
            x = torch.round(x * 2)  # many ties: the lowest id wins
        elif kind == 2:
            x[:, rnd.randrange(size)] = float("nan")
        elif kind == 3:
            x[:] = float("-inf")
        elif kind == 4:
            x[:, ::2] = float("inf")
        elif kind == 5:
            x = x[:, : max(1, size // 2)]  # a view with row strides
        for y in (x, x[0]):
            assert torch.equal(argmax(y), y.argmax(-1))


def _one_hot(p: OneHot) -> torch.Tensor:
    return torch.stack([row(p, i) for i in range(len(p))]) if len(p) else torch.zeros(0, p.size)


def _same_verdict(a, b):
    assert (a.n_accepted, a.token, a.label) == (b.n_accepted, b.token, b.label)
    assert [vars(x) for x in a.positions] == [vars(x) for x in b.positions]


@pytest.mark.parametrize("seed", range(40))
def test_greedy_rules_on_one_hot_rows_are_the_rules_on_dense_rows(seed):
    """At temperature 0 each rule reads ``p`` held as its argmax exactly as it reads the one-hot rows, and draws the
    same random numbers (a drafter sampling at its own temperature reads the same stream after)."""
    rnd = random.Random(seed)
    size, m = 50, rnd.randint(0, 5)
    greedy = Sampling(0.0)
    ids = tuple(rnd.randrange(size) for _ in range(m + 1))
    proposal = [a if rnd.random() < 0.6 else rnd.randrange(size) for a in ids[:m]]
    p = OneHot(ids, size, torch.device("cpu"))
    q_dense = torch.softmax(torch.randn(m, size, generator=torch.Generator().manual_seed(seed)), -1)
    for q in (OneHot(tuple(proposal), size, torch.device("cpu")), q_dense):
        rngs = Rng(seed), Rng(seed)
        q_rows = _one_hot(q) if isinstance(q, OneHot) else q
        _same_verdict(verify.rejection(p, q, proposal, greedy, rngs[0]),
                      verify.rejection(_one_hot(p), q_rows, proposal, greedy, rngs[1]))
        assert torch.equal(rngs[0].uniform(3, "cpu"), rngs[1].uniform(3, "cpu"))
    _same_verdict(verify.exact_match(p, proposal, greedy, Rng(seed)),
                  verify.exact_match(_one_hot(p), proposal, greedy, Rng(seed)))
    psi = {(i, t): rnd.choice([0.0, 0.3, 1.0]) for i in range(m + 1) for t in range(size)}
    slrs_proposal = [t if rnd.random() < 0.8 else -1 for t in proposal]
    runs = [verify.sequential_rejection(rows, slrs_proposal, lambda i, t: psi[i, t], lambda i: list(range(size)),
                                        greedy, Rng(seed), 8) for rows in (p, _one_hot(p))]
    _same_verdict(runs[0][0], runs[1][0])
    assert runs[0][1] == runs[1][1]


def _maps_with_duplicates():
    """A pair of vocabularies where several drafter ids spell one target token's bytes (three of them for ``b"a"``)."""
    target = Vocab([b"a", b"b", b"c", None], frozenset({3}), (3,), None, None, "plain")
    drafter = Vocab([b"a", b"x", b"a", b"b", b"a", b"c", None], frozenset({6}), (6,), None, None, "plain")
    return PairVocab.build(target, drafter).intersection_maps(7, 4, "cpu", "cpu")


def test_tli_q_in_target_ids_is_the_dense_scatter_bit_for_bit():
    maps = _maps_with_duplicates()
    assert maps.target_to_drafter[0] == (0, 2, 4)
    gen = torch.Generator().manual_seed(1)
    q = torch.softmax(torch.randn(5, 7, generator=gen) * 3, -1).masked_fill(~maps.allowed, 0.0)
    q = q / q.sum(-1, keepdim=True)
    dense = torch.zeros(5, 4).scatter_add_(1, maps.dst.expand(5, -1), q[:, maps.src])
    carried = InTarget.of(q, maps, 4, "cpu")
    tokens = [0, 1, 2, 3, 0]
    assert torch.equal(probs_at(carried, tokens), probs_at(dense, tokens))
    for i in range(5):
        assert torch.equal(carried.row(i), dense[i])
    as_drawn = InTarget.of(Rows.built(list(q), Sampling(1.0)), maps, 4, "cpu")  # a drafter's rows, kept as drawn
    assert torch.equal(probs_at(as_drawn, tokens), probs_at(dense, tokens))
    assert all(torch.equal(as_drawn.row(i), dense[i]) for i in range(5))
    one_hot = InTarget.of(OneHot((4, 3, 5, 6, 0), 7, torch.device("cpu")), maps, 4, "cpu")
    assert one_hot.ids == (0, 1, 2, 3, 0)


def _sorted_candidates(p: torch.Tensor) -> list[int]:
    values, ids = torch.sort(p, descending=True, stable=True)
    return [int(i) for v, i in zip(values[:slrs.CANDIDATES].tolist(), ids[:slrs.CANDIDATES].tolist()) if v > 0]


def test_slrs_candidates_are_a_stable_sorts_first():
    gen = torch.Generator().manual_seed(2)
    rnd = random.Random(2)
    for trial in range(500):
        size = rnd.choice([1, 5, 16, 17, 300, 65_537, 151_936])
        p = torch.softmax(torch.randn(size, generator=gen) * rnd.choice([0.1, 1.0, 5.0]), -1)
        kind = trial % 5
        if kind == 1:
            p = torch.round(p * 20) / 20  # ties, at and above the last candidate
        elif kind == 2:
            p[torch.randperm(size, generator=gen)[: size // 2]] = 0.0  # fewer than CANDIDATES with p > 0
        elif kind == 3:
            p = torch.full((size,), 1.0 / size)
        elif kind == 4:
            p = torch.round(torch.rand(size, generator=gen) * 3) / 10
        assert slrs._candidates(p) == _sorted_candidates(p)
    assert slrs._candidates(OneHot((7,), 300, torch.device("cpu"))) == [7]


def _benchmark():
    spec = importlib.util.spec_from_file_location("engine_cost", ROOT / "benchmarks" / "engine_cost.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.skipif(not {"qwen2", "deepseek-coder"} <= set(realtok.available()),
                    reason=f"real vocabulary files missing: run `{realtok.FETCH_COMMAND}`")
def test_engine_cost_benchmark_prints_every_algorithm_at_real_vocabulary_size(tmp_path, capsys):
    bench = _benchmark()
    out = tmp_path / "cost.json"
    assert bench.main(["--max-new-tokens", "2", "--prompts", "1", "--repeats", "1", "--json", str(out),
                       "--markdown"]) == 0
    data = json.loads(out.read_text())
    cases = {(c["algorithm"], c["temperature"]): c for c in data["cases"]}
    assert set(cases) == {(a, t) for a in bench.ALGORITHMS for t in (0.0, 1.0)}
    for case in cases.values():
        assert case["current"]["rounds"] >= 1 and case["parts"]["rounds"] >= 1
        assert case["current"]["engine"] > 0 and case["current"]["target forward"] > 0
        assert all(case["parts"][k] is not None for k in bench.ENGINE_PARTS)
        assert case["current"]["syncs"] is None  # a CPU: no device to synchronise with
        assert (case["current"]["drafter forward"] > 0) == (case["algorithm"] != "ar")
    assert cases[("slrs", 1.0)]["parts"]["psi"] > 0
    assert {c["entries"] for c in data["floor"].values()} == {151_936, 32_259}
    assert all(c["distribution"] > 0 and c["draw"] > 0 for c in data["floor"].values())
    printed = capsys.readouterr().out
    assert "151,936 entries" in printed and "32,259 entries" in printed
    assert printed.count("| ") > 10  # the Markdown table


@pytest.mark.skipif(not {"qwen2", "deepseek-coder"} <= set(realtok.available()),
                    reason=f"real vocabulary files missing: run `{realtok.FETCH_COMMAND}`")
def test_engine_cost_benchmark_runs_a_baseline_package_in_turn(capsys):
    """``--baseline``: another copy of hsd (here the same one) runs interleaved; its token ids are compared."""
    bench = _benchmark()
    assert bench.main(["--max-new-tokens", "2", "--prompts", "1", "--repeats", "2", "--algorithms", "slem",
                       "--temperatures", "0", "--baseline", str(ROOT / "hsd")]) == 0
    assert "token ids identical" in capsys.readouterr().out


@pytest.mark.parametrize("name,low,high", [("qwen2-7b-target", 7.0e9, 8.0e9), ("vicuna-68m-drafter", 60e6, 75e6),
                                           ("qwen2-0.5b-drafter", 0.45e9, 0.55e9)])
def test_engine_cost_gpu_specs_have_the_size_they_are_named_for(name, low, high):
    """The shapes of the GPU run (built on the meta device here: no memory, no weights)."""
    from transformers import AutoConfig, AutoModelForCausalLM

    spec = _benchmark().load_spec(name)
    entries = {"qwen2": 151_936, "llama-spm": 32_000}[spec["vocabulary"]]
    config = AutoConfig.for_model(spec["model_type"], vocab_size=entries, **spec["config"])
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    assert low < sum(p.numel() for p in model.parameters()) < high


def test_greedy_target_rows_are_searched_only_up_to_the_first_rejection():
    """``OneHot.of_logits`` gives the argmax of each row, and verification reads rows only as far as it gets: a
    round rejected at its first proposal searches one row; unverified positions carry no ``p``."""
    gen = torch.Generator().manual_seed(3)
    logits = torch.randn(6, 5000, generator=gen)
    best = logits.argmax(-1).tolist()
    greedy = Sampling(0.0)
    wrong = [(t + 1) % 5000 for t in best[:5]]
    p = OneHot.of_logits(logits)
    v = verify.exact_match(p, wrong, greedy, Rng(0))
    assert (v.n_accepted, v.token) == (0, best[0])
    assert p._ids[1:] == [None] * 5  # rows 1-5 were never searched
    assert [pos.p for pos in v.positions] == [0.0, None, None, None, None]
    assert [pos.accept_prob for pos in v.positions] == [0.0, None, None, None, None]
    p = OneHot.of_logits(logits)
    v = verify.rejection(p, OneHot(tuple(best[:2] + wrong[2:]), 5000, torch.device("cpu")), best[:2] + wrong[2:],
                         greedy, Rng(0))
    assert (v.n_accepted, v.token) == (2, best[2]) and p._ids[3:] == [None] * 3
    assert p.ids == tuple(best)  # read in full when asked


def test_tli_masks_the_blocked_ids_as_a_masked_fill_does():
    maps = _maps_with_duplicates()
    logits = torch.tensor([1.0, float("nan"), 3.0, float("inf"), -2.0, 0.5, 9.0])
    assert torch.equal(maps.fill(logits), logits.masked_fill(~maps.allowed, float("-inf")))


def test_tli_greedy_drafter_picks_the_masked_argmax_even_on_non_finite_logits():
    """Greedy TLI drafting adds a -inf penalty instead of filling the blocked ids; token and row are the fill's,
    including where a blocked id's logit is +inf or NaN (the sum is NaN there) and where every allowed id is -inf."""
    maps = _maps_with_duplicates()
    gen = torch.Generator().manual_seed(0)
    specials = [float("inf"), float("-inf"), float("nan"), 0.0, -0.0]
    cases = [torch.tensor([1.0, float("nan"), 3.0, float("inf"), -2.0, 0.5, 9.0]),
             torch.tensor([float("-inf")] + [9.0] + [float("-inf")] * 5),
             torch.tensor([0.0, float("inf"), -0.0, 0.0, 0.0, -0.0, 0.0])]
    for _ in range(300):
        row = torch.randn(7, generator=gen) * 3
        for j in torch.randint(0, 7, (int(torch.randint(0, 4, (1,), generator=gen)),), generator=gen).tolist():
            row[j] = specials[int(torch.randint(0, len(specials), (1,), generator=gen))]
        cases.append(row)
    for row in cases:
        filled = row.masked_fill(~maps.allowed, float("-inf"))
        token, read = maps.best(row)
        assert token == int(filled.argmax()), row
        finite = torch.isfinite(filled)
        assert torch.equal(read[finite], filled[finite]), row
        if not torch.isnan(row[~maps.allowed]).any() and not (row[~maps.allowed] == float("inf")).any():
            torch.testing.assert_close(read, filled, rtol=0, atol=0, equal_nan=True)


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("settings", [(1.0, 0, 1.0), (0.7, 20, 0.9)])
def test_sampled_rows_built_when_read_are_the_rules_on_dense_rows(seed, settings):
    """When sampling on a CPU the target's rows are :class:`Rows`, built only as verification reaches them; each row,
    each verdict, each emitted token and the random numbers drawn are those of the dense rows."""
    temperature, top_k, top_p = settings
    sampling = Sampling(temperature, top_k, top_p)
    gen = torch.Generator().manual_seed(seed)
    rnd = random.Random(seed)
    size, m = 300, rnd.randint(0, 5)
    logits = 3 * torch.randn(m + 1, size, generator=gen)
    dense = sampling.probs(logits)
    ahead = [int(r.argmax()) for r in dense]
    proposal = [a if rnd.random() < 0.7 else rnd.randrange(size) for a in ahead[:m]]
    q = torch.softmax(3 * torch.randn(m, size, generator=gen), -1)
    lazy = sampling.rows(logits)
    assert isinstance(lazy, Rows)
    for rule in (lambda p, r: verify.rejection(p, q, proposal, sampling, r),
                 lambda p, r: verify.exact_match(p, proposal, sampling, r)):
        rngs = Rng(seed), Rng(seed)
        lazy = sampling.rows(logits)
        a, b = rule(lazy, rngs[0]), rule(dense, rngs[1])
        _same_verdict(a, b)
        assert [pos.p for pos in a.positions[:a.n_accepted + 1]] == [pos.p for pos in b.positions[:a.n_accepted + 1]]
        assert torch.equal(rngs[0].uniform(3, "cpu"), rngs[1].uniform(3, "cpu"))  # the same stream after
        built = [i for i, r in enumerate(lazy._rows) if r is not None]
        assert built == list(range(len(built))) and len(built) <= a.n_accepted + 2  # up to the first rejection
        assert all(torch.equal(lazy.row(i), dense[i]) for i in range(m + 1))
    if m:  # the drafter's rows as DrafterContext.draft keeps them (Rows.built): the verdict of the dense q
        rngs = Rng(seed), Rng(seed)
        as_drawn = Rows.built(list(q), Sampling(1.0))
        _same_verdict(verify.rejection(sampling.rows(logits), as_drawn, proposal, sampling, rngs[0]),
                      verify.rejection(dense, q, proposal, sampling, rngs[1]))


def test_the_two_level_draw_gives_each_entry_its_share_of_the_uniform_numbers():
    """A row of 151,936 entries with 400 positive weights, scattered over blocks (some of them alone in theirs, one
    in the last, partial block): uniform numbers on an even grid land on each entry in proportion to its weight, and
    on no entry of weight 0."""
    from hsd.sampling import BLOCK, inverse_cdf
    gen = torch.Generator().manual_seed(3)
    size = 151_936
    assert size > BLOCK and size % BLOCK  # drawn in two levels, with a partial last block
    w = torch.zeros(size)
    ids = torch.randperm(size, generator=gen)[:398].tolist() + [0, size - 1]
    w[ids] = torch.rand(len(ids), generator=gen) ** 3 + 1e-4
    grid = 20_000
    u = ((torch.arange(grid, dtype=torch.float64) + 0.5) / grid).unsqueeze(-1)
    got = torch.bincount(inverse_cdf(w.expand(grid, size), u), minlength=size).double() / grid
    want = w.double() / w.double().sum()
    assert set(got.nonzero().squeeze(-1).tolist()) <= set(ids)
    assert float((got - want).abs().max()) <= 1.0 / grid + 1e-9  # each share is an interval of the grid


def test_the_two_level_draw_is_the_one_level_draw_up_to_float32_rounding_of_block_totals():
    from hsd.sampling import inverse_cdf
    gen = torch.Generator().manual_seed(4)
    for size in (1025, 4096, 32_259, 151_936, 256_000):
        logits = torch.randn(size, generator=gen) * 3
        p = torch.softmax(logits, -1).unsqueeze(0)
        u = torch.rand(2000, 1, dtype=torch.float64, generator=gen)
        two = inverse_cdf(p.expand(2000, size), u)
        cdf = torch.nn.functional.pad(p[0].double().cumsum(-1), (1, 0))
        x = u.squeeze(-1) * cdf[-1]
        one = torch.searchsorted(cdf[1:], x, right=True)  # the first entry whose float64 cumulative sum exceeds x
        # where they differ, x fell within 1e-7 of the mass of a boundary of the one-level draw: a boundary moved
        # by the rounding of a float32 total, not a different sampler
        moved = two != one
        near = torch.minimum((x - cdf[one]).abs(), (cdf[one + 1] - x).abs()) < 1e-7
        assert bool(near[moved].all()) and int(moved.sum()) < 40


def test_the_two_level_draw_never_draws_weight_zero_at_the_ends_of_the_unit_interval():
    from hsd.sampling import BLOCK, inverse_cdf
    size = 40 * BLOCK + 17
    w = torch.zeros(size)
    w[3 * BLOCK + 5] = 0.25  # blocks 0-2 and 4-39 weigh nothing, and so does the partial block
    w[4 * BLOCK - 1] = 0.75
    ends = torch.tensor([[0.0], [2.0 ** -53], [0.25], [1.0 - 2.0 ** -53], [1.0]], dtype=torch.float64)
    assert inverse_cdf(w.expand(5, size), ends).tolist() == [3 * BLOCK + 5, 3 * BLOCK + 5, 4 * BLOCK - 1,
                                                             4 * BLOCK - 1, 4 * BLOCK - 1]
    assert inverse_cdf(torch.zeros(1, size), ends[:1]).tolist() == [size - 1]  # nothing to draw: as one level
    assert inverse_cdf(w.unsqueeze(0), ends[2:3]).shape == (1,)


@pytest.mark.parametrize("size", [300, 151_936])
def test_one_rows_draw_is_the_draw_of_that_row_among_rows(size):
    """``Rng.draw`` (the drafting loop's and the residual's) gives the token and moves the generator as
    ``Rng.sample`` of the same row does, in one level and in two."""
    gen = torch.Generator().manual_seed(size)
    for trial in range(30):
        p = torch.softmax(3 * torch.randn(size, generator=gen), -1)
        a, b = Rng(trial), Rng(trial)
        assert a.draw(p) == int(b.sample(p.unsqueeze(0))[0])
        assert torch.equal(a.uniform(2, "cpu"), b.uniform(2, "cpu"))


def test_the_residual_drawn_unnormalised_is_the_normalised_residual():
    """``residual_weights``: ``max(0, p - q)`` as drawn, ``p`` where it vanishes; normalised, it is ``residual``."""
    gen = torch.Generator().manual_seed(5)
    p, q = (torch.softmax(2 * torch.randn(4000, generator=gen), -1) for _ in range(2))
    r = verify.residual_weights(p, q)
    torch.testing.assert_close(r / r.sum(), verify.residual(p, q))
    assert torch.equal(verify.residual_weights(p, p.clone()), p)
