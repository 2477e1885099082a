"""SLRS: string-level rejection sampling (spec §4; Timor et al. 2025, Algorithm 3), with a path budget.

Rejection sampling on the *target token*. For each of up to ``lookahead`` target positions the
drafter writes a string from its state after ``x ⊕ t_<i`` until the string is no longer a proper
prefix of a target token; the proposal is ``t_i = f(s)``, the longest target token it starts with.
Its proposal probability ``ψ_i(t_i)`` sums the drafter's probability over every token path whose
string yields ``t_i`` (:mod:`hsd.psi`).

The exact ψ of some tokens needs exponentially many drafter paths (runs of spaces over a drafter with
multi-byte tokens). Such a token is *heavy*: it is proposed as ``⊥``, which the target always rejects,
and its ψ' is 0. Which tokens are heavy is fixed before a position is drafted (``docs/slrs.md`` proves
this keeps SLRS exactly lossless): with a full-support drafter, by the path counts of the two
vocabularies (:mod:`hsd.paths`); with a truncated one (greedy, top-k, top-p), by whether the exact
enumeration from this position's drafter state fits in ``slrs_max_paths``. Proposals outside the
target's ``CANDIDATES`` most probable tokens are ``⊥`` too, so a residual needs at most that many ψ.
Verification is :func:`hsd.verify.sequential_rejection`. Nothing raises; the cost is recorded.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
import torch

from ..loading import Pair
from ..paths import PathCounts, path_counts
from ..psi import Enumerator, Proposer
from ..sampling import OneHot, Sampling, pick_one
from ..session import DrafterContext, Session
from ..trace import Round, Span
from ..trie import BOTTOM, drafter_trie, target_trie
from ..verify import sequential_rejection


MAX_PATHS = 4096  # default ``slrs_max_paths``: drafter paths one ψ may expand; a token needing more is heavy
MAX_FORWARDS = 1024  # default ``slrs_max_forwards``: drafting forwards per round (fewer positions, never more)
CANDIDATES = 16  # ψ' is 0 outside the target's most probable tokens at the position: at most this many ψ per residual
RESIDUAL_DRAWS = 64  # lazy draws from p before the residual is computed on the candidates directly
BATCH = 256  # drafter paths per batched forward
MEMO_FLOATS = 2**26  # drafter rows kept for reuse by later ψ at the same position (256 MB of float32)


def full_support(sampling: Sampling) -> bool:
    """Whether every drafter path has positive probability (then the path counts are the exact cost)."""
    return not sampling.greedy and sampling.top_k == 0 and sampling.top_p == 1.0


class _Rows:
    """Drafter distributions ``q(· | state, path)`` for one position's drafter state, memoised by path.

    Drafting goes through the drafter's runner one token at a time; ψ asks for all open paths of one
    depth at once, run as batched forwards on a snapshot of the drafter's cache for the state.
    """

    def __init__(self, d: DrafterContext, sampling: Sampling):
        self.d, self.sampling = d, sampling
        self.memo: dict[tuple, torch.Tensor] = {}
        self.snap = None
        self.forwards = 0  # batched forwards spent on ψ

    def draft(self, path: tuple) -> torch.Tensor:
        runner = self.d.runner
        if not path:
            logits = self.d.next_logits()
            self.snap = runner.snapshot()
        else:
            logits = runner.forward([path[-1]], keep=1)[-1]
        q = self.sampling.probs(logits.unsqueeze(0))[0]
        self.memo[path] = q
        return q

    def __call__(self, paths: list[tuple]) -> list[torch.Tensor]:
        fresh: dict[tuple, torch.Tensor] = {}
        by_depth: dict[int, list[tuple]] = {}
        for p in dict.fromkeys(paths):
            if p not in self.memo:
                by_depth.setdefault(len(p), []).append(p)
        for group in by_depth.values():
            for i in range(0, len(group), BATCH):
                logits = self.d.runner.forward_paths(self.snap, group[i:i + BATCH])
                self.forwards += 1
                fresh.update(zip(group[i:i + BATCH], self.sampling.probs(logits)))
        width = self.d.model.n_logits
        for p, row in fresh.items():  # keep them while the memo is small; always recomputable
            if (len(self.memo) + 1) * width > MEMO_FLOATS:
                break
            self.memo[p] = row
        return [self.memo[p] if p in self.memo else fresh[p] for p in paths]


@dataclass
class _Slot:
    """One target position of the round: its fresh draft, proposal, and ψ' (ψ on light tokens, else 0)."""

    lag: bytes
    enum: Enumerator
    rows: _Rows
    counts: PathCounts | None  # the static heavy rule (full-support drafter); None: the enumeration decides
    blocked: bool = False  # the drafter's context is full: the proposal is ⊥ with probability 1
    path: list[int] = field(default_factory=list)
    probs: list[float] = field(default_factory=list)
    raw: int = BOTTOM  # f(s), the drafted target token
    heavy: set[int] = field(default_factory=set)  # tokens found heavy at this position
    seconds: float = 0.0  # time in ψ

    def statically_heavy(self, t: int) -> bool:
        return self.counts is not None and self.counts[t] > self.enum.max_paths

    @property
    def proposal(self) -> int:
        """``f'(s)``: the drafted token, or ``⊥`` when there is none or it is known heavy at drafting time."""
        return BOTTOM if self.blocked or self.statically_heavy(self.raw) else self.raw

    def psi(self, t: int) -> float:
        """ψ'(t): ψ(t) for a light token, 0 for a heavy one."""
        if self.blocked:
            return 0.0
        if self.statically_heavy(t):
            self.heavy.add(t)
            return 0.0
        start = time.perf_counter()
        try:
            value = self.enum.psi(t)
        finally:
            self.seconds += time.perf_counter() - start
        if value is None:
            self.heavy.add(t)
            return 0.0
        return value

    def psi_under(self, t: int, ok) -> bool:
        """Whether an upper bound of ψ'(t) has ``ok`` (:meth:`Enumerator.under`); ``False`` where ψ'(t) is known
        at once (blocked, statically heavy) or the bound never did."""
        if self.blocked or self.statically_heavy(t):
            return False
        start = time.perf_counter()
        try:
            return self.enum.under(t, ok)
        finally:
            self.seconds += time.perf_counter() - start


def _draft(s: Session, lag: bytes) -> _Slot:
    """Spec §4 step 1: sample drafter tokens until the string stops being open; ``raw = f(s)``."""
    d, settings = s.drafter, s.settings
    target_logits, drafter_logits = s.pair.target.n_logits, d.model.n_logits
    f = Proposer(target_trie(s.vocab, target_logits), drafter_trie(d.model.vocab, drafter_logits), lag)
    rows = _Rows(d, settings.drafter_sampling)
    counts = (path_counts(s.vocab, target_logits, d.model.vocab, drafter_logits, lag)
              if full_support(settings.drafter_sampling) else None)
    slot = _Slot(lag, Enumerator(f, rows, settings.slrs_max_paths or MAX_PATHS), rows, counts)
    limit = d.model.context_length
    if limit is not None and len(d.ids) + f.max_depth + 1 >= limit:
        slot.blocked = True
        return slot
    state, outcome, path = f.start, None, ()
    while outcome is None:
        q = rows.draft(path)
        v = pick_one(q, settings.drafter_sampling, s.rng)
        path += (v,)
        slot.probs.append(float(q[v]))
        state, outcome = f.feed(state, v)
    slot.path, slot.raw = list(path), outcome
    return slot


POOL_BLOCK = 1024  # entries per block when the candidates are looked for among the blocks with the largest maxima


def _pool(a: np.ndarray, k: int) -> np.ndarray:
    """Ids of ``a`` that hold its ``k`` first entries by (value descending, id ascending), and few others, when ``a``
    is long: the entries at least ``τ`` of the ``k`` blocks first by (maximum descending, index ascending), ``τ``
    the least of those maxima. An entry outside those blocks has ``k`` blocks before its own, each holding an entry
    that comes before it (larger, or equal with a lower id), so it is not among the ``k`` first; and the ``k``
    blocks hold ``k`` entries of at least ``τ``, so the ``k`` first are all at least ``τ``. Finding them is a pass
    over ``a`` for the block maxima and one over the chosen blocks; numpy's partition of the whole row takes 0.1 to
    0.9 ms over 152k entries, depending on the CPU."""
    n = len(a)
    if n <= 4 * k * POOL_BLOCK:
        return np.arange(n)
    starts = np.arange(0, n, POOL_BLOCK)
    maxima = np.maximum.reduceat(a, starts)
    first = np.lexsort((starts, -maxima))[:k]
    tau = maxima[first[-1]]
    full = n // POOL_BLOCK
    inside = first[first < full]
    hits = np.flatnonzero(a[:full * POOL_BLOCK].reshape(full, POOL_BLOCK)[inside] >= tau)
    ids = inside[hits // POOL_BLOCK] * POOL_BLOCK + hits % POOL_BLOCK
    if len(inside) < len(first):  # the last, partial block is one of them
        ids = np.concatenate((ids, full * POOL_BLOCK + np.flatnonzero(a[full * POOL_BLOCK:] >= tau)))
    return ids


def _candidates(p: torch.Tensor | OneHot) -> list[int]:
    """The target's ``CANDIDATES`` most probable tokens with ``p > 0``, most probable first (ties: lowest id first):
    ψ' is 0 elsewhere. The first of a stable descending sort of ``p``, found without sorting the vocabulary: every
    token above the ``CANDIDATES``-th largest value ``last``, then the lowest ids whose value is ``last``."""
    if isinstance(p, OneHot):
        return list(p.ids)  # the one token with p > 0
    k = min(CANDIDATES, p.shape[-1])
    if p.is_cpu and p.dtype == torch.float32:
        a = p.detach().numpy()
        pool = _pool(a, k)
        values = a[pool]
        if len(pool) > 4 * k:
            last = np.partition(values, len(values) - k)[len(values) - k]  # the k-th largest value
            pool = pool[values >= last]  # everything above it and every tie with it
        ranked = pool[np.lexsort((pool, -a[pool]))][:k]  # most probable first, the lowest id first in a tie
        return [int(i) for i in ranked if a[i] > 0]
    values, ids = (x.tolist() for x in torch.topk(p, k))
    last = values[-1]
    chosen = [(v, i) for v, i in zip(values, ids) if v > last]
    if last > 0:
        tied = sorted(i for v, i in zip(values, ids) if v == last)
        if int((p == last).sum()) > len(tied):  # more tokens have the value than topk returned: the lowest ids
            tied = (p == last).nonzero().squeeze(-1)[:k - len(chosen)].tolist()
        chosen += [(last, i) for i in tied]
    return [i for v, i in sorted(chosen, key=lambda vi: (-vi[0], vi[1]))]


def step(s: Session) -> Round:
    rnd = Round(len(s.rounds))
    d = s.drafter
    k = min(s.settings.lookahead, s.settings.max_new_tokens - s.n_generated)
    limit = s.settings.slrs_max_forwards or MAX_FORWARDS
    trie = target_trie(s.vocab, s.pair.target.n_logits)
    before = d.runner.forwards
    rnd.t_other = s.clock.split()
    # 1 and 4. Up to k proposals, each drafted afresh from the drafter state after x ⊕ t_<i. Whether to
    # draft position i is decided before it is drafted, from what positions < i cost (lossless).
    slots: list[_Slot] = []
    text = bytes(s.generated)
    for i in range(k):
        if i:
            events, dropped = d.sync(text, slots[-1].path)
            rnd.events += events
            rnd.drafter_dropped += dropped
        lag = text[d.synced:]
        if d.runner.forwards - before + len(lag) + trie.max_depth > limit:  # the most this draft can take
            rnd.events.append("slrs:forward-limit")
            break
        slots.append(_draft(s, lag))
        t = slots[-1].proposal
        if t == BOTTOM or t == trie.eos:
            break
        text += s.vocab.tokens[t]
    rnd.t_draft = s.clock.split()
    # 3. One target forward; accept t_i with min(1, p/ψ'); at the first rejection, the residual.
    proposal = [slot.proposal for slot in slots]
    p = s.target_rows([t for t in proposal if t != BOTTOM])
    candidates: dict[int, list[int]] = {}

    def support(j: int) -> list[int]:
        if j not in candidates:
            candidates[j] = _candidates(p[j])
        return candidates[j]

    def psi(j: int, t: int) -> float:
        return slots[j].psi(t) if t in support(j) else 0.0

    def psi_under(j: int, t: int, ok) -> bool:  # the residual's test, decided by a bound of ψ' where one will do
        return t in support(j) and slots[j].psi_under(t, ok)

    verdict, draws = sequential_rejection(p, proposal, psi, support, s.settings.sampling, s.rng, RESIDUAL_DRAWS,
                                         record=s.recorder, q_under=psi_under)
    rnd.positions = verdict.positions
    for j, (slot, pos) in enumerate(zip(slots, rnd.positions)):
        pos.token, pos.paths = slot.raw, slot.enum.paths
        pos.bottom = _why_bottom(slot, support(j) if pos.outcome != "unverified" else None)
    s.commit(rnd, proposal[:verdict.n_accepted], verdict.token, verdict.label)
    rnd.target_forwards = 1
    psi_seconds = sum(slot.seconds for slot in slots)
    rnd.t_verify = s.clock.split() - psi_seconds
    rnd.t_draft += psi_seconds  # ψ is drafter work, done lazily: only for positions that are verified
    _record(rnd, s, slots, psi_seconds, draws)
    rnd.drafter_forwards = d.runner.forwards - before
    events, dropped = d.sync(bytes(s.generated), [])
    rnd.events += events
    rnd.drafter_dropped += dropped
    rnd.t_convert = s.clock.split()
    return rnd


def _why_bottom(slot: _Slot, support: list[int] | None) -> str:
    """Why a position's proposal was ⊥ (``Position.bottom``), "" if it was not."""
    if slot.blocked:
        return "context full"
    if slot.raw == BOTTOM:
        return "no token"
    if slot.raw in slot.heavy or slot.statically_heavy(slot.raw):
        return "heavy"
    if support is not None and slot.raw not in support:
        return "unlikely"
    return ""


def _record(rnd: Round, s: Session, slots: list[_Slot], psi_seconds: float, draws: int) -> None:
    """The trace. ``draft`` = lag + the drafted target tokens' bytes + the last position's look-ahead bytes;
    each position's drafter tokens are placed where they spell it (look-ahead tokens of earlier
    positions, discarded by the algorithm, are in ``extra["slrs_positions"]``). A ``⊥`` position is a
    proposed span with its drafted token's id (or -1, empty, if it had none)."""
    t_toks, d_toks = s.vocab.tokens, s.drafter.model.vocab.tokens
    psi = [pos.q for pos in rnd.positions]
    rnd.lag = len(slots[0].lag) if slots else 0
    draft = bytearray(slots[0].lag if slots else b"")
    detail = []
    for i, slot in enumerate(slots):
        seg = b"".join(d_toks[v] or b"" for v in slot.path)
        start = len(draft) - len(slot.lag)
        tb = (t_toks[slot.raw] or b"") if slot.raw != BOTTOM else b""
        rnd.proposed.append(Span(slot.raw, len(draft), len(draft) + len(tb), psi[i]))
        draft += tb
        if i == len(slots) - 1 and seg.startswith(slot.lag):
            draft += seg[len(slot.lag) + len(tb):]
        end, pos = len(draft), start
        for v, qv in zip(slot.path, slot.probs):
            b = d_toks[v] or b""
            if 0 <= pos and pos + len(b) <= end and draft[pos:pos + len(b)] == b:
                rnd.drafted.append(Span(v, pos, pos + len(b), qv))
            pos += len(b)
        detail.append({"lag": slot.lag.hex(), "drafted": slot.path, "q": slot.probs, "draft": seg.hex(),
                       "proposal": slot.raw, "bottom": rnd.positions[i].bottom, "heavy": sorted(slot.heavy),
                       "psi_paths": slot.enum.paths, "psi_forwards": slot.rows.forwards,
                       "paths_per_psi": [[t, n] for t, n in slot.enum.cost.items()]})
    rnd.draft = bytes(draft)
    accepted = rnd.lag + sum(len(t_toks[e.token] or b"") for e in rnd.emitted if e.label == "accepted")
    rnd.rejected = rnd.draft[accepted:]
    rnd.extra.update(
        psi=psi,
        psi_paths=sum(slot.enum.paths for slot in slots),
        psi_max_paths=max((slot.enum.largest for slot in slots), default=0),
        psi_forwards=sum(slot.rows.forwards for slot in slots),
        psi_evaluations=sum(len(slot.enum.memo) for slot in slots),
        psi_seconds=psi_seconds,
        psi_bottom=sum(bool(pos.bottom) for pos in rnd.positions),
        psi_heavy=sum(pos.bottom == "heavy" for pos in rnd.positions),
        residual_draws=draws,
        slrs_positions=detail,
    )


# --------------------------------------------------------------------------------- the cost on a pair

def pair_cost(pair: Pair) -> dict:
    """SLRS's cost for the pair at full-support drafting (docs/slrs.md): drafter paths the exact ψ(t) of
    each target token needs, the share of target tokens that are heavy (proposed as ⊥) at the default
    ``slrs_max_paths``, and a recommendation."""
    counts = sorted(path_counts(pair.target.vocab, pair.target.n_logits, pair.drafter.vocab,
                                pair.drafter.n_logits).paths.values())
    n = len(counts)
    heavy = sum(c > MAX_PATHS for c in counts) / max(1, n)
    p99 = counts[min(n - 1, int(0.99 * n))] if counts else 0
    if not heavy:
        advice = (f"every target token's ψ fits in the default budget of {MAX_PATHS} paths: SLRS is exact on all "
                  "of them.")
    else:
        byte_drafter = pair.drafter.vocab.max_token_bytes <= 1
        advice = (f"{heavy:.1%} of the target's tokens are heavy at the default budget of {MAX_PATHS} paths: when the "
                  "drafter samples with full support they are proposed as ⊥ and never accepted. ")
        if p99 <= 4 * MAX_PATHS:
            advice += f"slrs_max_paths={p99} makes 99% of them light. "
        if not byte_drafter:
            advice += ("A byte-level drafter spells each token one way (paths linear in its length); a drafter top-k "
                       "or greedy drafting counts only paths with positive probability; ")
        advice += "TLI or SLEM need no ψ at all."
    return {"default_budget": MAX_PATHS, "heavy_share": heavy, "paths_max": counts[-1] if counts else 0,
            "paths_mean": sum(counts) / max(1, n), "paths_median": counts[n // 2] if counts else 0,
            "paths_p99": p99, "recommendation": advice}


def _cost_lines(cost: dict) -> list[str]:
    # no mean: a few tokens with astronomically many paths would own it (the median and the tail say more)
    return [f"slrs cost (drafter paths per exact ψ, full-support drafting): median {cost['paths_median']:,}, "
            f"99th percentile {cost['paths_p99']:,}, worst {cost['paths_max']:,}; "
            f"heavy at slrs_max_paths={cost['default_budget']}: {cost['heavy_share']:.1%} of target tokens",
            f"  {cost['recommendation']}"]


def _cost_note(cost: dict) -> str:
    return (f"ψ needs a median of {cost['paths_median']:,} drafter paths per target token (99%: at most "
            f"{cost['paths_p99']:,}); {cost['heavy_share']:.1%} of target tokens are over the budget of "
            f"{cost['default_budget']:,} and are proposed as ⊥ (never accepted)")


# --------------------------------------------------------------------------------- the contract (registry)

from .contract import Algorithm, PairCost  # noqa: E402

ALGORITHM = Algorithm(
    "slrs", step, proposal_symbol="ψ", draft_symbol="q", long_name="SLRS (string-level rejection sampling)",
    ideal_drafted=lambda rnd: rnd.drafter_forwards,  # ψ needs extra drafter forwards by design
    summed_extra=("psi_paths", "psi_forwards", "psi_evaluations", "psi_seconds", "psi_bottom", "psi_heavy",
                  "residual_draws"),
    options=("slrs_max_paths", "slrs_max_forwards"), advised=False,
    dynamic_lookahead=False,  # its lookahead counts target positions, each drafted afresh: no threshold applies
    round_seconds=0.012,  # ψ bookkeeping
    # a fresh string per target position, and ψ summed over drafter paths (the embedded byte-level drafter
    # measured 17-23 drafter forwards per emitted token at lookahead 5, docs/slrs.md)
    drafts_per_position=4,
    color="#ec4899",
    lossless_draws=600,  # 4-12 s at T = 1 on code prompts: ψ is drafter work every draw
    pair_cost=PairCost(pair_cost, _cost_lines, _cost_note, explanation=(
        "- **SLRS** sums the drafter's paths to every target token: its cost grows with how many drafter tokens a "
        "target token spans, so long target tokens over a short-token drafter are expensive.")),
    about="**SLRS** — string-level rejection sampling ([paper](https://arxiv.org/abs/2502.05202), Alg. 3): "
          "rejection sampling on the target token, where the proposal probability ψ(t) sums every drafter path "
          "that spells t. Accepts the most when sampling, but computing ψ costs many drafter forwards; this app "
          "shows that cost.")
