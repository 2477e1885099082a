"""SLRS (spec §4): ψ is exact, the path counts bound its cost, budgets never stop a run.

ψ and the path counts are checked against a brute-force enumeration of every drafter token sequence
on a hand-built pair of tiny vocabularies. Losslessness end to end is in the common suites:
``test_greedy_identity.py`` and ``test_distribution.py`` (with known-lossy variants);
``test_slrs_prompts.py`` runs the embedded pair on varied prompts at default settings.
"""

import math
from collections import Counter
from functools import lru_cache

import pytest
import torch

import hsd
from builders import byte_tokenizer, bytelevel_tokenizer, tiny_llama
from hsd.algorithms import slrs
from hsd.paths import PathCounts, path_counts
from hsd import psi as psi_module
from hsd.psi import Enumerator, Proposer
from hsd.runner import Snapshot
from hsd.sampling import Rng, Sampling
from hsd.session import DrafterContext
from hsd.trie import BOTTOM, DrafterTrie, TargetTrie, target_trie
from hsd.verify import residual_by_rejection
from hsd.vocab import Vocab
from pairs import bigram

# --- ψ on a hand-built drafter -------------------------------------------------------------------

TARGET = [None, "a", "b", "c", "ab", "ba", "abc", "bab", "ca", "abca", "ab"]  # id 10 repeats "ab"
DRAFTER = [None, None, "a", "b", "c", "ab", "bc", "abc", "ca", "bca", "a"]  # id 0 EOS, id 1 another special


def _vocab(tokens) -> Vocab:
    toks = [None if t is None else t.encode() for t in tokens]
    return Vocab(toks, frozenset(i for i, t in enumerate(toks) if t is None), (0,), None, None, "plain")


def _brute_force(target: Vocab, drafter: Vocab, table: torch.Tensor, context: int, lag: bytes) -> dict:
    """P(proposal) by following every drafter sequence, with f and 'open' written from their definitions."""
    def f(u):
        hits = [i for i, b in enumerate(target.tokens) if b and u.startswith(b)]
        return min(hits, key=lambda i: (-len(target.tokens[i]), i)) if hits else BOTTOM

    def is_open(w):
        if len(w) < len(lag):
            return lag.startswith(w)
        u = w[len(lag):]
        return w.startswith(lag) and any(b and len(b) > len(u) and b.startswith(u) for b in target.tokens)

    out: Counter = Counter()

    def walk(last, w, prob):
        for v, qv in enumerate(table[last].tolist()):
            b = drafter.tokens[v]
            if not b:  # a special token ends the string
                ok = len(w) >= len(lag) and w.startswith(lag)
                u = w[len(lag):]
                out[(f(u) if u else 0 if v in drafter.eos_ids else BOTTOM) if ok else BOTTOM] += prob * qv
            elif is_open(w + b):
                walk(v, w + b, prob * qv)
            else:
                out[f((w + b)[len(lag):]) if (w + b).startswith(lag) else BOTTOM] += prob * qv

    walk(context, b"", 1.0)
    return out


@pytest.mark.parametrize("lag", [b"", b"a", b"ab"])
@pytest.mark.parametrize("direct", [psi_module.DIRECT, 0, 10**9, None],
                         ids=["as-shipped", "entries", "prefix-sums", "left-out"])
def test_psi_equals_brute_force_enumeration_and_sums_to_one(lag, direct, monkeypatch):
    """Every way of summing the stopping mass (entries directly, the row's total less what the ranges leave out,
    prefix sums) gives the brute force's ψ."""
    if direct is None:  # every split that covers each entry at most once: its total less the entries left out
        monkeypatch.setattr(psi_module, "DIRECT", 1)
        monkeypatch.setattr(psi_module, "_few_entries", lambda ranges, order: None)
        left_out = []
        original = psi_module._left_out
        monkeypatch.setattr(psi_module, "_left_out", lambda *a: left_out.append(original(*a)) or left_out[-1])
    else:
        monkeypatch.setattr(psi_module, "DIRECT", direct)
    target, drafter = _vocab(TARGET), _vocab(DRAFTER)
    gen = torch.Generator().manual_seed(0)
    table = torch.softmax(1.5 * torch.randn(len(DRAFTER), len(DRAFTER), generator=gen), -1)
    for context in (2, 3):
        calls = []

        def rows(paths):
            calls.append(len(paths))
            return torch.stack([table[p[-1] if p else context] for p in paths])

        enum = Enumerator(Proposer(TargetTrie(target, len(target)), DrafterTrie(drafter, len(drafter)), lag), rows,
                          max_paths=10_000)
        psi = {t: enum.psi(t) for t in [BOTTOM, *range(len(TARGET))]}
        expected = _brute_force(target, drafter, table, context, lag)
        for t, value in psi.items():
            assert value == pytest.approx(expected.get(t, 0.0), abs=1e-12), t
        assert psi[10] == 0.0  # a duplicate spelling is never proposed: "ab" is id 4
        assert sum(psi.values()) == pytest.approx(float(sum(expected.values())), abs=1e-12)
        assert sum(psi.values()) == pytest.approx(1.0, abs=1e-6)  # float32 rows sum to 1 up to rounding
        assert max(calls) > 1  # paths of one depth were asked for together
        if direct is None:
            assert any(ids is not None for ids in left_out)  # the left-out sums were taken


def _left_out_per_entry(ranges, order, size):
    """What the ranges leave out, entry by entry: each entry's cover summed from every range."""
    cover = [0] * len(order)
    for lo, hi, sign in ranges:
        for i in range(lo, hi):
            cover[i] += sign
    if any(c < 0 or c > 1 for c in cover) or (size - sum(cover)) * psi_module.DIRECT > size:
        return None
    return sorted([int(order[i]) for i, c in enumerate(cover) if c == 0] + sorted(set(range(size)) - set(order)))


def test_left_out_worked_out_on_the_range_ends_is_the_per_entry_cover():
    """Nested subtrees (+1) less branches (-1), overlaps, empty ranges and ids outside the order: the ids the ranges
    leave out, or None where an entry is covered twice or -1 times, or too much is left out."""
    drafter = DrafterTrie(_vocab(DRAFTER), len(DRAFTER) + 3)  # 3 padding ids beyond the vocabulary
    size = len(DRAFTER) + 3
    order = drafter.order.tolist()
    assert drafter.outside(size).tolist() == sorted(set(range(size)) - set(order)) == [0, 1, 11, 12, 13]
    gen = torch.Generator().manual_seed(0)
    n, outcomes = len(order), Counter()
    for direct in (1, 2, 16):
        for _ in range(400):
            ranges = []
            for _ in range(int(torch.randint(1, 5, (1,), generator=gen))):
                lo, hi = sorted(torch.randint(0, n + 1, (2,), generator=gen).tolist())
                ranges.append((lo, hi, 1 if torch.rand(1, generator=gen) < 0.6 else -1))
            psi_module.DIRECT, saved = direct, psi_module.DIRECT
            try:
                got, want = psi_module._left_out(ranges, drafter, size), _left_out_per_entry(ranges, order, size)
            finally:
                psi_module.DIRECT = saved
            assert (None if got is None else sorted(got.tolist())) == want, ranges
            outcomes[want is None] += 1
    assert outcomes[True] and outcomes[False]  # both answers were reached


def test_along_maps_each_proper_prefix_to_the_next_byte():
    trie = TargetTrie(_vocab(TARGET), len(TARGET))
    node = trie.node[9]  # "abca"
    along = trie.along(node)
    assert sorted(along.values()) == sorted(b"abca") and len(along) == 4
    state = 0
    for byte in b"abca":
        assert along[state] == byte
        state = trie.children[state][byte]
    assert state == node and trie.along(0) == {}


def test_drafting_process_is_the_one_psi_sums_over():
    """Following Proposer.feed (what drafting does) through every sequence gives the same probabilities."""
    target, drafter = _vocab(TARGET), _vocab(DRAFTER)
    table = torch.softmax(torch.randn(len(DRAFTER), len(DRAFTER), generator=torch.Generator().manual_seed(1)), -1)
    f = Proposer(TargetTrie(target, len(target)), DrafterTrie(drafter, len(drafter)), b"a")
    out: Counter = Counter()

    def walk(last, state, prob):
        for v, qv in enumerate(table[last].tolist()):
            nxt, proposal = f.feed(state, v)
            if proposal is None:
                walk(v, nxt, prob * qv)
            else:
                out[proposal] += prob * qv

    walk(3, f.start, 1.0)
    expected = _brute_force(target, drafter, table, 3, b"a")
    assert set(out) == set(expected)
    assert all(out[t] == pytest.approx(expected[t], abs=1e-12) for t in out)


@pytest.mark.parametrize("lag", [b"", b"a", b"ab"])
def test_path_counts_equal_the_paths_psi_expands_at_full_support(lag):
    """The counts from the vocabularies alone are exactly what the enumeration expands when every drafter
    token has positive probability, and an upper bound when some have none (top-k)."""
    target, drafter = _vocab(TARGET), _vocab(DRAFTER)
    tt, dt = TargetTrie(target, len(target)), DrafterTrie(drafter, len(drafter))
    counts = PathCounts(tt, dt, lag)
    table = torch.softmax(torch.randn(len(DRAFTER), len(DRAFTER), generator=torch.Generator().manual_seed(2)), -1)
    truncated = torch.where(table >= table.topk(2, -1).values[:, -1:], table, torch.zeros_like(table))
    for rows_of, exact in ((table, True), (truncated, False)):
        enum = Enumerator(Proposer(tt, dt, lag), lambda paths: torch.stack([rows_of[p[-1] if p else 3] for p in paths]),
                          max_paths=10**6)
        for t in [*range(len(TARGET)), 0]:
            enum.psi(t)
            assert (enum.cost[t] == counts[t]) if exact else (enum.cost[t] <= counts[t]), (t, enum.cost[t], counts[t])
    assert counts[10] == 0  # a duplicate spelling is never proposed


@pytest.mark.parametrize("as_list", [False, True])
def test_psi_is_the_same_with_prefix_sums_kept_across_tokens(as_list):
    """One enumerator keeps each path's prefix sum for every ψ at the position; each value is what a fresh
    enumerator computes for that token alone, bit for bit, whether rows come as a tensor or a list."""
    target, drafter = _vocab(TARGET), _vocab(DRAFTER)
    tt, dt = TargetTrie(target, len(target)), DrafterTrie(drafter, len(drafter))
    table = torch.softmax(torch.randn(len(DRAFTER), len(DRAFTER), generator=torch.Generator().manual_seed(4)), -1)

    def rows(paths):
        out = [table[p[-1] if p else 3] for p in paths]
        return out if as_list else torch.stack(out)

    shared = Enumerator(Proposer(tt, dt, b"a"), rows, max_paths=10**6)
    tokens = [*range(len(TARGET)), BOTTOM]
    values = [shared.psi(t) for t in tokens]
    assert shared.cumulative and () in shared.cumulative  # kept, and reused by the later ψ
    assert values == [Enumerator(Proposer(tt, dt, b"a"), rows, max_paths=10**6).psi(t) for t in tokens]
    assert sum(values) == pytest.approx(1.0, abs=1e-6)  # a distribution over proposals (float32 rows)


def test_over_budget_psi_is_heavy_after_at_most_the_budget():
    target, drafter = _vocab(TARGET), _vocab(DRAFTER)
    tt, dt = TargetTrie(target, len(target)), DrafterTrie(drafter, len(drafter))
    counts = PathCounts(tt, dt, b"")
    table = torch.softmax(torch.randn(len(DRAFTER), len(DRAFTER), generator=torch.Generator().manual_seed(3)), -1)
    asked = []

    def rows(paths):
        asked.extend(paths)
        return torch.stack([table[p[-1] if p else 3] for p in paths])

    for budget in (1, 2, 3, 5):
        for t in range(1, len(TARGET)):
            asked.clear()
            value = Enumerator(Proposer(tt, dt), rows, max_paths=budget).psi(t)
            assert (value is None) == (counts[t] > budget), (t, budget)
            assert len(set(asked)) <= budget


@lru_cache(maxsize=None)
def tiny_code(preset: str) -> hsd.Pair:
    return hsd.load_pair(preset=preset)


def test_path_counts_of_the_embedded_pair():
    """The SentencePiece-style drafter of tiny-code has tokens far over the default budget (whitespace
    runs); the byte-level drafter spells every target token one way."""
    sp, by = (path_counts(p.target.vocab, p.target.n_logits, p.drafter.vocab, p.drafter.n_logits)
              for p in (tiny_code("tiny-code"), tiny_code("tiny-code-bytes")))
    assert max(sp.paths.values()) > 10**12 and max(by.paths.values()) <= 3 * 45
    space_run = tiny_code("tiny-code").target.vocab.bytes_to_id.get(b" " * 16)
    if space_run is not None:
        assert sp[space_run] > slrs.MAX_PATHS


def test_compatibility_report_states_slrs_cost_before_anything_runs():
    from hsd.report import compatibility_report, format_report

    sp, by = slrs.pair_cost(tiny_code("tiny-code")), slrs.pair_cost(tiny_code("tiny-code-bytes"))
    assert 0 < sp["heavy_share"] < 0.5 and sp["paths_max"] > sp["paths_p99"] > sp["paths_median"]
    assert "byte-level drafter" in sp["recommendation"]
    assert by["heavy_share"] == 0 and by["paths_max"] <= 3 * 45 and "exact on all" in by["recommendation"]
    text = format_report(compatibility_report(tiny_code("tiny-code")))
    assert "slrs cost" in text and f"heavy at slrs_max_paths=4096: {sp['heavy_share']:.1%}" in text


def test_batched_drafter_forwards_match_sequential():
    """The ψ batch (a snapshot of the prefix's KV cache expanded to the batch) gives the drafter's own
    distributions, and so does the fallback that recomputes whole sequences."""
    tok = byte_tokenizer()
    pair = hsd.Pair.from_models(tiny_llama(bytelevel_tokenizer(), 0), bytelevel_tokenizer(), tiny_llama(tok, 5), tok)
    d = DrafterContext(pair.drafter, tok("def fib(n):")["input_ids"])
    d.prefill()
    sampling = Sampling(1.0)
    rows = slrs._Rows(d, sampling)
    root = rows.draft(())
    rows.draft((70,))  # the runner moves on; the snapshot still holds the state
    paths = [(70, 71), (72, 73), (74, 75)]
    batched = rows(paths)
    model = pair.drafter.model
    for path, row in zip(paths, batched):
        logits = model(torch.tensor([d.ids + list(path)])).logits[0, -1]
        assert torch.allclose(row, sampling.probs(logits.unsqueeze(0))[0], atol=1e-5)
    assert torch.allclose(root, sampling.probs(model(torch.tensor([d.ids])).logits[0, -1:])[0], atol=1e-5)
    rows.snap = Snapshot(rows.snap.ids, None)  # caches that cannot be shared: recompute whole sequences
    rows.memo.clear()
    assert torch.allclose(torch.stack(rows(paths)), torch.stack(batched), atol=1e-5)
    assert rows.forwards == 2


# --- trace and budgets ---------------------------------------------------------------------------------

PROMPT = "def f"


def test_trace_records_psi_bottom_and_their_cost():
    pair = bigram("shared", pad=16)
    rounds = [r for seed in range(4) for r in hsd.generate(pair, PROMPT, algorithm="slrs", max_new_tokens=30,
                                                           temperature=1.0, seed=seed, slrs_max_paths=6).rounds]
    reasons = Counter(p.bottom for r in rounds for p in r.positions)
    assert reasons["heavy"] > 0 and reasons[""] > 0
    for r in rounds:
        verified = [p for p in r.positions if p.outcome != "unverified"]
        assert all(p.q is not None and 0 < p.q <= 1 for p in verified if not p.bottom)
        assert all(p.q == 0 and p.outcome == "rejected" for p in verified if p.bottom)
        assert [s.prob for s in r.proposed] == [p.q for p in r.positions] == r.extra["psi"]  # None: unverified
        assert [s.id for s in r.proposed] == [p.token for p in r.positions]
        assert r.extra["psi_heavy"] == sum(p.bottom == "heavy" for p in r.positions)
        assert r.extra["psi_paths"] == sum(p.paths for p in r.positions)
        assert r.extra["psi_forwards"] <= r.drafter_forwards
        assert r.extra["psi_max_paths"] <= 6
        accepted_bytes = b"".join(e.text for e in r.emitted if e.label == "accepted")
        assert r.draft[r.lag:] == accepted_bytes + r.rejected
        for spans, vocab in ((r.drafted, pair.drafter.vocab), (r.proposed, pair.target.vocab)):
            assert all(r.draft[s.start:s.end] == (vocab.tokens[s.id] or b"") for s in spans if s.id >= 0)


def test_metrics_sum_psi_costs():
    # a SentencePiece-style drafter: a ψ there needs batched forwards of paths the draft did not take
    res = hsd.generate(bigram("bpe<-sp"), PROMPT, algorithm="slrs", max_new_tokens=30, temperature=1.0, seed=0)
    assert [e.token for r in res.rounds for e in r.emitted] == res.token_ids
    m = res.metrics
    assert m["psi_paths"] == sum(r.extra["psi_paths"] for r in res.rounds) > 0
    assert m["psi_forwards"] == sum(r.extra["psi_forwards"] for r in res.rounds) > 0 and m["psi_seconds"] > 0
    assert m["drafter_forwards"] == sum(r.drafter_forwards for r in res.rounds) + 1  # + prefill


def test_tiny_budgets_never_raise_and_bound_the_work():
    """Budgets change what is proposed, never whether a round emits: slrs_max_paths=1 makes nearly every
    token heavy; slrs_max_forwards below one draft's worst case leaves only target-only rounds."""
    pair = bigram("bpe<-sp")  # SentencePiece-style drafter at temperature 1: many paths per ψ
    for seed in range(10):
        res = hsd.generate(pair, PROMPT, algorithm="slrs", max_new_tokens=8, temperature=1.0, seed=seed,
                           slrs_max_paths=1)
        assert len(res.token_ids) == 8 or res.stop_reason == "eos"
        assert all(r.extra["psi_max_paths"] <= 1 for r in res.rounds)
    res = hsd.generate(pair, PROMPT, algorithm="slrs", max_new_tokens=8, lookahead=4, slrs_max_forwards=2)
    ar = hsd.generate(pair, PROMPT, algorithm="ar", max_new_tokens=8)
    assert res.token_ids == ar.token_ids
    assert all(not r.positions and r.drafter_forwards == 0 and "slrs:forward-limit" in r.events for r in res.rounds)
    depth = target_trie(pair.target.vocab, pair.target.n_logits).max_depth
    res = hsd.generate(pair, PROMPT, algorithm="slrs", max_new_tokens=8, lookahead=8, temperature=1.0,
                       slrs_max_forwards=depth + 3)
    assert max(len(r.positions) for r in res.rounds) >= 1
    with pytest.raises(hsd.InvalidSettingError, match="only to algorithm='slrs'"):
        hsd.generate(pair, PROMPT, algorithm="slem", slrs_max_paths=10)


def test_residual_is_exact_when_drawn_directly():
    """After ``max_draws`` lazy draws the residual is computed on the support: the same distribution."""
    p = torch.tensor([0.5, 0.3, 0.15, 0.05])
    q = {0: 0.6, 1: 0.1, 2: 0.0}
    expected = torch.clamp(p - torch.tensor([0.6, 0.1, 0.0, 0.0]), min=0)
    expected /= expected.sum()
    for max_draws in (0, 64):
        rng = Rng(0)
        counts = Counter(residual_by_rejection(p, q.get, [0, 1, 2], Sampling(1.0), rng, max_draws)[0]
                         for _ in range(4000))
        got = torch.tensor([counts[i] / 4000 for i in range(4)])
        assert (got - expected).abs().max() < 0.03, (max_draws, got)


@pytest.mark.parametrize("lag", [b"", b"a"])
def test_every_bound_a_walk_yields_is_above_psi_and_under_answers_by_them(lag):
    """``_walk`` yields upper bounds of ψ(t) depth by depth; ``under`` says yes exactly when one of them passes the
    test, and then ψ(t) passes it too."""
    target, drafter = _vocab(TARGET), _vocab(DRAFTER)
    table = torch.softmax(1.5 * torch.randn(len(DRAFTER), len(DRAFTER), generator=torch.Generator().manual_seed(3)), -1)

    def enumerator(asked):
        def rows(paths):
            asked.extend(paths)
            return torch.stack([table[p[-1] if p else 2] for p in paths])
        return Enumerator(Proposer(TargetTrie(target, len(target)), DrafterTrie(drafter, len(drafter)), lag), rows,
                          max_paths=10_000)

    deep = 0
    for t in [BOTTOM, *range(len(TARGET))]:
        walk, bounds = enumerator([])._walk(t), []
        try:
            while True:
                bounds.append(next(walk))
        except StopIteration as done:
            psi = done.value
        assert all(b >= psi for b in bounds), (t, psi, bounds)
        deep += len(bounds) > 1
        for limit in [*bounds, psi, psi / 2]:
            asked = []
            e = enumerator(asked)
            said = e.under(t, lambda x: x < limit * 1.0001)
            assert said == any(b < limit * 1.0001 for b in bounds)
            if said:
                assert psi < limit * 1.0001 and t not in e.memo  # stopped early: ψ(t) itself never summed
            else:
                assert e.memo[t] == psi and e.psi(t) == psi  # walked to the end: ψ(t) is known
        asked_all, asked_first = [], []
        enumerator(asked_all).psi(t)
        enumerator(asked_first).under(t, lambda x: True)
        assert len(asked_first) <= len(asked_all)  # a bound asks for no rows beyond the depths it walked
    assert deep  # some walk went deeper than one depth


def test_a_residual_decided_by_bounds_keeps_the_same_draws():
    """The residual's test on an upper bound of q(u) keeps what the test on q(u) keeps, draw for draw: the same
    tokens and the same random stream, whether the bound is tight, loose or useless."""
    gen = torch.Generator().manual_seed(0)
    p = torch.softmax(2 * torch.randn(50, generator=gen), 0)
    q_row = torch.softmax(2 * torch.randn(50, generator=gen), 0)
    support = torch.topk(p, 16).indices.tolist()
    for factor in (1.0, 1.5, 40.0, math.inf):
        def q_under(u, kept, factor=factor):
            return kept(float(q_row[u]) * factor)
        plain, bounded = Rng(7), Rng(7)
        for _ in range(300):
            a = residual_by_rejection(p, lambda u: float(q_row[u]), support, Sampling(1.0), plain, 64)
            b = residual_by_rejection(p, lambda u: float(q_row[u]), support, Sampling(1.0), bounded, 64, q_under)
            assert a == b
        assert plain.uniform(1, p.device).tolist() == bounded.uniform(1, p.device).tolist()


def test_slrs_with_psi_bounds_emits_what_it_emits_with_every_psi_summed(monkeypatch):
    """Whole generations: the residual's bounds change which ψ are summed (fewer), never a token."""
    pair = bigram("bpe<-sp")  # several drafter paths per target token: bounds stop walks early
    runs = {}
    for bounded in (True, False):
        if not bounded:
            monkeypatch.setattr(psi_module.Enumerator, "under", lambda self, t, ok: False)
        runs[bounded] = [hsd.generate(pair, PROMPT, algorithm="slrs", max_new_tokens=24, temperature=1.0, seed=seed,
                                      lookahead=3) for seed in range(6)]
    assert [r.token_ids for r in runs[True]] == [r.token_ids for r in runs[False]]
    paths = {b: sum(r.metrics["psi_paths"] for r in runs[b]) for b in runs}
    assert paths[True] < paths[False]


# --- real tokenizers (slow: run with -m slow) -------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("index", range(8))
def test_greedy_identity_on_real_tokenizer_pairs(index):
    """The real-tokenizer pairs of tests/realtok.py, with their random drafter and with the oracle drafter
    of tests/test_real_tokenizers.py (which drafts the target's own text, so most drafts are accepted)."""
    import realtok

    pair = realtok.PAIRS[index]
    if {pair.target, pair.drafter} - set(realtok.available()):
        pytest.skip(f"real vocabulary files missing: run `{realtok.FETCH_COMMAND}`")
    import test_real_tokenizers as rt

    oracle, lm = rt.oracle_pair(pair)
    mismatches, accepted, emitted = [], 0, 0
    for i, prompt in enumerate(rt.prompts_for(index)[:20]):
        ref = rt.ar_reference(pair, prompt)
        drafter_prompt, _ = rt.encode_prompt(oracle.drafter, prompt, None)
        lm.reference = oracle.drafter.vocab.text_of(drafter_prompt) + oracle.target.vocab.text_of(ref.token_ids)
        lm.ends_with_eos = ref.stop_reason == "eos"
        for p in (rt.loaded(pair), oracle):
            res = hsd.generate(p, prompt, algorithm="slrs", max_new_tokens=rt.MAX_NEW, lookahead=i % 8 + 1)
            if res.token_ids != ref.token_ids or res.stop_reason != ref.stop_reason:
                mismatches.append((p.drafter.name, prompt, ref.token_ids, res.token_ids))
        accepted += res.metrics["accepted"]
        emitted += len(res.token_ids)
    assert not mismatches, mismatches[:3]
    assert accepted / emitted > 0.4  # the oracle's drafts are mostly accepted


def test_round_view_shows_bottom_proposals_and_the_psi_cost():
    from hsd import viz

    pair = bigram("shared", pad=16)
    for seed in range(20):
        res = hsd.generate(pair, PROMPT, algorithm="slrs", max_new_tokens=12, temperature=1.0, seed=seed, slrs_max_paths=3)
        rnd = next((r for r in res.rounds if any(p.bottom == "heavy" for p in r.positions)), None)
        if rnd is not None:
            break
    html = viz.round_html(rnd, algorithm="slrs")
    assert "⊥: heavy" in html and "⊥ " in html and "ψ cost:" in html and "heavy." in html
