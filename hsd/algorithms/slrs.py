"""SLRS: string-level rejection sampling (spec §4; Timor et al. 2025, Algorithm 3).

Rejection sampling on the *target token*. For each of up to ``lookahead`` target positions the
drafter writes a string from its state after ``x ⊕ t_<i`` until the string is no longer a proper
prefix of a target token; the proposal is ``t_i = f(s)``, the longest target token it starts with.
Its proposal probability ``ψ_i(t_i)`` sums the drafter's probability over every token path whose
string yields ``t_i`` (:mod:`hsd.psi`). One target forward verifies all positions with
``min(1, p/ψ)``; a rejection emits a draw from ``max(0, p - ψ)`` obtained by rejection from ``p``.

Cost is visible per round in ``Round.extra`` (``psi_paths``, ``psi_forwards``, ``psi_seconds``...) and
bounded by explicit limits that raise :class:`~hsd.errors.ResourceLimitError`; ψ is never approximated.
See ``docs/slrs.md`` for the proof sketch and the measured cost.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch
from transformers import DynamicCache
from transformers.cache_utils import DynamicLayer

from ..errors import ResourceLimitError
from ..psi import Enumerator, Proposer
from ..runner import RewindableWindowLayer
from ..sampling import pick
from ..session import DrafterContext, Session
from ..trace import Position, Round, Span
from ..trie import BOTTOM, drafter_trie, target_trie

NEEDS_DRAFTER = True

MAX_PATHS = 4096  # default: drafter paths one ψ may expand (``slrs_max_paths``)
MAX_FORWARDS = 1024  # default: drafter forwards one round may spend, drafting and ψ (``slrs_max_forwards``)
BATCH = 256  # drafter paths per batched forward
MEMO_FLOATS = 2**26  # drafter rows kept for reuse by later ψ at the same position (256 MB of float32)
MAX_RESIDUAL_DRAWS = 100_000  # draws from p for one residual sample; the expected number is 1 / P(reject)


class _Budget:
    def __init__(self, limit: int):
        self.limit, self.used = limit, 0

    def spend(self) -> None:
        self.used += 1
        if self.used > self.limit:
            raise ResourceLimitError(
                f"SLRS would need more than {self.limit} drafter forwards in one round. Use algorithm='slem' or "
                "'tli', a drafter with shorter tokens (a byte-level drafter), a smaller lookahead, or raise "
                "slrs_max_forwards.")


def _snapshot(runner, n: int):
    """The drafter's KV cache for its first ``n`` tokens, as per-layer ``(keys, values, window)`` with
    ``window`` the sliding window (``None`` for full attention); ``None`` if the cache holds other layer
    types: then batched forwards recompute the prefix instead."""
    layers = runner.cache.layers
    kinds = (DynamicLayer, RewindableWindowLayer)
    if len(runner) != n or not all(type(l) in kinds and l.get_seq_length() == n for l in layers):
        return None
    # Neither layer type writes these tensors in place.
    return [(l.keys, l.values, getattr(l, "sliding_window", None)) for l in layers]


class _Rows:
    """Drafter distributions ``q(· | state, path)`` for one position's drafter state, memoised by path.

    Drafting goes through the drafter's own runner, one token at a time; ψ asks for all open paths of
    one depth at once, which run as one batched forward over the shared prefix's KV cache.
    """

    def __init__(self, d: DrafterContext, sampling, budget: _Budget):
        self.d, self.sampling, self.budget = d, sampling, budget
        self.prefix = list(d.ids)
        self.memo: dict[tuple, torch.Tensor] = {}
        self.kv = None
        self.forwards = 0  # batched forwards spent on ψ

    def draft(self, path: tuple) -> torch.Tensor:
        self.budget.spend()
        runner = self.d.runner
        if not path:
            logits = self.d.next_logits()
            self.kv = _snapshot(runner, len(self.prefix))
        else:
            logits = runner.forward([path[-1]], keep=1)[-1]
        q = self.sampling.probs(logits.unsqueeze(0))[0]
        self.memo[path] = q
        return q

    def __call__(self, paths: list[tuple]) -> torch.Tensor:
        fresh: dict[tuple, torch.Tensor] = {}
        by_depth: dict[int, list[tuple]] = {}
        for p in dict.fromkeys(paths):
            if p not in self.memo:
                by_depth.setdefault(len(p), []).append(p)
        for group in by_depth.values():
            for i in range(0, len(group), BATCH):
                fresh.update(zip(group[i:i + BATCH], self._forward(group[i:i + BATCH])))
        width = self.d.model.n_logits
        for p, row in fresh.items():  # keep them while the memo is small; always recomputable
            if (len(self.memo) + 1) * width > MEMO_FLOATS:
                break
            self.memo[p] = row
        return torch.stack([self.memo[p] if p in self.memo else fresh[p] for p in paths])

    @torch.inference_mode()
    def _forward(self, paths: list[tuple]) -> torch.Tensor:
        self.budget.spend()
        start = time.perf_counter()
        runner, model = self.d.runner, self.d.model
        if self.kv is not None:
            b = len(paths)
            # A third element makes transformers' own sliding-window layer (this forward never crops).
            cache = DynamicCache(ddp_cache_data=[(k.expand(b, -1, -1, -1), v.expand(b, -1, -1, -1))
                                                 + (() if w is None else (torch.tensor(w),))
                                                 for k, v, w in self.kv])
            ids = torch.tensor(paths, dtype=torch.long, device=runner.device)
            out = model.model(input_ids=ids, use_cache=True, logits_to_keep=1, **{runner._kwarg: cache})
        else:
            ids = torch.tensor([self.prefix + list(p) for p in paths], dtype=torch.long, device=runner.device)
            out = model.model(input_ids=ids, use_cache=False, logits_to_keep=1)
        q = self.sampling.probs(out.logits[:, -1, :model.n_logits])
        if runner.device.type == "cuda":
            torch.cuda.synchronize()
        self.forwards += 1
        runner.forwards += 1  # the drafter's forwards, counted where generate() and the trace read them
        runner.seconds += time.perf_counter() - start
        return q


@dataclass
class _Slot:
    """One target position of the round: its fresh draft, proposal and ψ."""

    lag: bytes
    enum: Enumerator
    rows: _Rows
    blocked: bool = False  # the drafter's context is full: the proposal is ⊥ with probability 1
    path: list[int] = field(default_factory=list)
    probs: list[float] = field(default_factory=list)
    proposal: int = BOTTOM
    seconds: float = 0.0  # time in ψ

    def psi(self, t: int) -> float:
        if self.blocked:
            return 0.0
        start = time.perf_counter()
        try:
            return self.enum.psi(t)
        finally:
            self.seconds += time.perf_counter() - start


def _draft(s: Session, lag: bytes, budget: _Budget) -> _Slot:
    """Spec §4 step 1: sample drafter tokens until the string stops being open; propose ``f(s)``."""
    d = s.drafter
    f = Proposer(target_trie(s.vocab, s.pair.target.n_logits), drafter_trie(d.model.vocab, d.model.n_logits), lag)
    rows = _Rows(d, s.settings.drafter_sampling, budget)
    slot = _Slot(lag, Enumerator(f, rows, s.settings.slrs_max_paths or MAX_PATHS), rows)
    limit = d.model.context_length
    if limit is not None and len(d.ids) + f.max_depth + 1 >= limit:
        slot.blocked = True
        return slot
    state, outcome, path = f.start, None, ()
    while outcome is None:
        q = rows.draft(path)
        v = int(pick(q.unsqueeze(0), s.settings.drafter_sampling, s.rng)[0])
        path += (v,)
        slot.probs.append(float(q[v]))
        state, outcome = f.feed(state, v)
    slot.path, slot.proposal = list(path), outcome
    return slot


def _residual(s: Session, p: torch.Tensor, slot: _Slot, rnd: Round) -> int:
    """Spec §4 step 3: a draw from ``max(0, p - ψ)`` normalised, without ψ over the whole vocabulary:
    draw ``u ~ p``, keep it with probability ``1 - min(1, ψ(u)/p(u))``."""
    if s.settings.sampling.greedy:
        return int(p.argmax())
    for _ in range(MAX_RESIDUAL_DRAWS):
        rnd.extra["residual_draws"] += 1
        u = int(s.rng.sample(p.unsqueeze(0))[0])
        keep = 1.0 - min(1.0, slot.psi(u) / float(p[u]))
        if float(s.rng.uniform(1, p.device)[0]) < keep:
            return u
    raise ResourceLimitError(f"SLRS drew {MAX_RESIDUAL_DRAWS} candidates from p without keeping one (p and ψ "
                             "agree almost everywhere). Use algorithm='slem' or 'tli'.")


def step(s: Session) -> Round:
    rnd = Round(len(s.rounds))
    rnd.extra.update(residual_draws=0)
    d = s.drafter
    k = min(s.settings.lookahead, s.settings.max_new_tokens - s.n_generated)
    budget = _Budget(s.settings.slrs_max_forwards or MAX_FORWARDS)
    before = d.runner.forwards
    rnd.t_other = s.clock.split()
    # 1 and 4. Up to k proposals, each drafted afresh from the drafter state after x ⊕ t_<i.
    slots: list[_Slot] = []
    text = bytes(s.generated)
    eos = target_trie(s.vocab, s.pair.target.n_logits).eos
    for i in range(k):
        if i:
            events, dropped = d.sync(text, slots[-1].path)
            rnd.events += events
            rnd.drafter_dropped += dropped
        slots.append(_draft(s, text[d.synced:], budget))
        t = slots[-1].proposal
        if t == BOTTOM or t == eos:
            break
        text += s.vocab.tokens[t]
    rnd.t_draft = s.clock.split()
    # 3. One target forward; accept t_i with min(1, p/ψ); at the first rejection, the residual.
    proposal = [slot.proposal for slot in slots if slot.proposal != BOTTOM]
    p = s.target_probs(proposal)
    n, token, label = 0, None, "bonus"
    for j, slot in enumerate(slots):
        t = slot.proposal
        if t == BOTTOM:
            rnd.events.append("slrs:no-proposal" + (" (drafter context full)" if slot.blocked else ""))
        else:
            psi, p_t = slot.psi(t), float(p[j, t])
            accept = min(1.0, p_t / psi) if psi > 0 else 0.0
            passed = float(s.rng.uniform(1, p.device)[0]) < accept
            rnd.positions.append(Position(t, p_t, psi, accept, "accepted" if passed else "rejected"))
            if passed:
                n += 1
                continue
        token, label = _residual(s, p[j], slot, rnd), "corrected"
        break
    else:
        token = int(pick(p[len(slots):len(slots) + 1], s.settings.sampling, s.rng)[0])
    for j in range(len(rnd.positions), len(proposal)):
        rnd.positions.append(Position(proposal[j], float(p[j, proposal[j]]), None, 0.0, "unverified"))
    s.commit(rnd, proposal[:n], token, label)
    rnd.target_forwards = 1
    psi_seconds = sum(slot.seconds for slot in slots)
    rnd.t_verify = s.clock.split() - psi_seconds
    rnd.t_draft += psi_seconds  # ψ is drafter work, done lazily: only for positions that are verified
    _record(rnd, s, slots, psi_seconds)
    rnd.drafter_forwards = d.runner.forwards - before
    events, dropped = d.sync(bytes(s.generated), [])
    rnd.events += events
    rnd.drafter_dropped += dropped
    rnd.t_convert = s.clock.split()
    return rnd


def _record(rnd: Round, s: Session, slots: list[_Slot], psi_seconds: float) -> None:
    """The trace. ``draft`` = lag + the proposed tokens' bytes + the last position's look-ahead bytes;
    each position's drafter tokens are placed where they spell it (look-ahead tokens of earlier
    positions, discarded by the algorithm, are in ``extra["slrs_positions"]``)."""
    t_toks, d_toks = s.vocab.tokens, s.drafter.model.vocab.tokens
    psi = [pos.q for pos in rnd.positions]
    rnd.lag = len(slots[0].lag)
    draft = bytearray(slots[0].lag)
    detail = []
    for i, slot in enumerate(slots):
        seg = b"".join(d_toks[v] or b"" for v in slot.path)
        start = len(draft) - len(slot.lag)
        tb = (t_toks[slot.proposal] or b"") if slot.proposal != BOTTOM else b""
        if slot.proposal != BOTTOM:
            rnd.proposed.append(Span(slot.proposal, len(draft), len(draft) + len(tb), psi[i] if i < len(psi) else None))
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
                       "proposal": slot.proposal, "psi_paths": slot.enum.paths, "psi_forwards": slot.rows.forwards,
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
        slrs_positions=detail,
    )


# --------------------------------------------------------------------------------- the contract (registry)

from .contract import Algorithm  # noqa: E402

ALGORITHM = Algorithm(
    "slrs", step, proposal_symbol="ψ", draft_symbol="q",
    ideal_drafted=lambda rnd: rnd.drafter_forwards,  # ψ needs extra drafter forwards by design
    summed_extra=("psi_paths", "psi_forwards", "psi_evaluations", "psi_seconds", "residual_draws"),
    options=("slrs_max_paths", "slrs_max_forwards"), advised=False,
    about="**SLRS** — string-level rejection sampling ([paper](https://arxiv.org/abs/2502.05202), Alg. 3): "
          "rejection sampling on the target token, where the proposal probability ψ(t) sums every drafter path "
          "that spells t. Accepts the most when sampling, but computing ψ costs many drafter forwards; this app "
          "shows that cost.")
