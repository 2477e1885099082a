"""The SLRS proposal ``f`` and its exact probability ``ψ`` (spec §4 steps 1–2).

The drafter writes a string one token at a time. :class:`Proposer` is ``f`` as an automaton over
that string: the string must first spell the ``lag`` bytes (emitted text the drafter's context does
not hold yet), then it grows while it is a proper prefix of some target token; when it stops, the
proposal is the longest target token that is a prefix of it (``⊥`` if none). A drafter special
token stops the string at once: the proposal is ``f`` of what was written, the target's EOS if
nothing was and the token is an EOS, else ``⊥``.

:class:`Enumerator` computes ``ψ(t) = P_q(f(s) = t)`` by walking every drafter path that can still
end with ``f = t``, depth by depth, summing ``q`` along the ones that do. It asks for the drafter
distributions of all open paths of one depth in a single call (the caller batches them) and
counts them. Nothing is ever approximated: a computation that would expand more than ``max_paths``
paths stops and answers ``None`` (the token is *heavy*; SLRS then proposes ``⊥`` instead of it, see
``docs/slrs.md``), after asking for at most ``max_paths`` drafter distributions.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from .trie import BOTTOM, DrafterTrie, TargetTrie

# States: -(i+1) while the string is the first i bytes of ``lag``; a target-trie node id (>= 0) after.


class Proposer:
    def __init__(self, target: TargetTrie, drafter: DrafterTrie, lag: bytes = b""):
        self.target, self.drafter, self.lag = target, drafter, lag
        self.start = -1 if lag else 0
        self.max_depth = len(lag) + target.max_depth  # every drafter token adds at least one byte

    def step(self, state: int, byte: int) -> int | None:
        """The state after one more byte; ``None`` when the string is no longer open."""
        if state < 0:
            i = -state - 1
            if byte != self.lag[i]:
                return None
            return 0 if i + 1 == len(self.lag) else state - 1
        return self.target.children[state].get(byte)

    def is_open(self, state: int) -> bool:
        return state < 0 or bool(self.target.children[state])

    def outcome(self, state: int) -> int:
        """``f`` of a string that stops after reaching ``state``."""
        return BOTTOM if state < 0 else self.target.best[state]

    def special_outcome(self, state: int, is_eos: bool) -> int:
        if state == 0:
            return self.target.eos if is_eos else BOTTOM
        return self.outcome(state)

    def feed(self, state: int, token: int) -> tuple[int, int | None]:
        """Append a drafter token: ``(state, None)`` while open, else ``(_, proposal)``."""
        data = self.drafter.bytes[token]
        if not data:
            return state, self.special_outcome(state, token in self.drafter.eos)
        for byte in data:
            nxt = self.step(state, byte)
            if nxt is None:
                return state, self.outcome(state)
            state = nxt
        return (state, None) if self.is_open(state) else (state, self.outcome(state))


@dataclass
class _Split:
    """What the drafter's next token, from one state, does for ``ψ(t)``."""

    ranges: list[tuple[int, int, int]] = field(default_factory=list)  # (lo, hi, ±1) over DrafterTrie.order
    tokens: list[int] = field(default_factory=list)  # tokens that stop the string with f = t
    eos: bool = False  # a drafter EOS here stops with f = t
    other_stops: bool = False  # another special token here stops with f = t
    child_ids: list[int] = field(default_factory=list)  # tokens that keep the string open, t still reachable
    child_states: list[int] = field(default_factory=list)
    plan: _Plan | None = None  # how the stopping mass is summed, made when first needed


@dataclass
class _Plan:
    """The stopping mass of a split as one signed gather per row, plus the row's total or its prefix sums: the
    ranges' entries (when few), the stopping tokens, the special tokens that stop with ``f = t``, and the entries
    ranges covering nearly all the row leave out (subtracted from the total)."""

    ids: np.ndarray  # int64
    signs: np.ndarray  # float64, +1 or -1 per id
    total: bool = False  # add the row's total (the ranges cover all but ``ids`` with sign -1)
    prefix: bool = False  # add the ranges by differences of the row's prefix sum


DIRECT = 16  # ranges of at most 1/DIRECT of the drafter's vocabulary are summed entry by entry, not by prefix sums;
# so is what ranges covering all but 1/DIRECT of it leave out, subtracted from the row's total
SLACK = 1.01  # an open path's mass bounds what its continuations add to ψ where each row sums to 1; float32 rows
# sum to 1 within far less than this factor over any number of depths a walk takes
CUMULATIVE_FLOATS = 2**22  # float64 entries of the prefix sums one Enumerator keeps (32 MB)


def _host_rows(q) -> list[torch.Tensor]:
    """``rows(paths)``'s answer as a list of rows on the host: a tensor moves in one transfer, a list of CPU rows
    stays as it is (no ``[n, V]`` copy)."""
    if isinstance(q, torch.Tensor):
        return list(q.to("cpu"))
    q = list(q)
    return q if not q or q[0].is_cpu else list(torch.stack(q).to("cpu"))


def _few_entries(ranges: list[tuple[int, int, int]], order: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """The signed ranges of ``order`` as (ids, signs), when they hold at most ``1/DIRECT`` of it; else ``None``."""
    sizes = [hi - lo for lo, hi, _ in ranges]
    if sum(sizes) * DIRECT > len(order):
        return None
    return (np.concatenate([order[lo:hi] for lo, hi, _ in ranges]),
            np.repeat(np.array([float(sign) for _, _, sign in ranges]), sizes))


def _left_out(ranges: list[tuple[int, int, int]], trie: DrafterTrie, size: int) -> np.ndarray | None:
    """The ids of a row of ``size`` entries that the signed ranges of the trie's order do not cover, when the ranges
    cover each entry of the order at most once and leave out at most ``1/DIRECT`` of the row (ids outside the order,
    the drafter's special and padding ids, included); else ``None``. Worked out on the ranges' ends, not per entry."""
    edges: dict[int, int] = {}
    for lo, hi, sign in ranges:
        if lo < hi:
            edges[lo] = edges.get(lo, 0) + sign
            edges[hi] = edges.get(hi, 0) - sign
    order = trie.order_ids
    gaps, covered, cover, prev = [], 0, 0, 0
    for pos in sorted(edges):  # ``cover`` is how often each entry of order[prev:pos] is covered
        if pos > prev:
            if cover == 0:
                gaps.append((prev, pos))
            elif cover == 1:
                covered += pos - prev
            else:
                return None
        cover += edges[pos]
        prev = pos
    gaps.append((prev, len(order)))
    if (size - covered) * DIRECT > size:
        return None
    return np.concatenate([order[lo:hi] for lo, hi in gaps] + [trie.outside(size)])


class Enumerator:
    """ψ for one drafter state. ``rows(paths)`` returns the drafter distributions after each path (a tuple of
    drafter ids), a ``[n, V]`` tensor or a list of ``[V]`` rows; it is called once per depth with every open path
    of that depth.

    The mass of the drafter tokens that stop the string with ``f = t`` is a signed sum over ranges of the trie's
    order. Where the ranges hold few tokens (a sixteenth of the vocabulary or fewer; most do) their entries are
    summed directly; where they cover all but a few entries once (a short target token, or ⊥, at the root), the
    row's total less those entries; otherwise it is a difference of the row's prefix sum in that order, a pass over
    the drafter's vocabulary in float64. Totals and prefix sums are kept by path: every ψ at a position starts from
    the same drafter state and they share paths (the empty one at least). Each row is read by one gather of every
    entry its split sums, with their signs."""

    def __init__(self, proposer: Proposer, rows, max_paths: int):
        self.f = proposer
        self.rows = rows
        self.max_paths = max_paths
        self.paths = 0  # open drafter paths expanded (one drafter distribution each), over all ψ so far
        self.largest = 0  # the most paths one ψ needed
        self.cost: dict[int, int] = {}  # paths expanded for each ψ(t) computed
        self.memo: dict[int, float] = {}
        self.cumulative: dict[tuple, torch.Tensor] = {}  # path -> prefix sum of its row in DrafterTrie.order
        self.totals: dict[tuple, float] = {}  # path -> its row's float64 total

    def psi(self, t: int) -> float | None:
        """``ψ(t)`` for a target id, the target's EOS, or ``BOTTOM``; ``None`` if it needs more than
        ``max_paths`` paths."""
        if t not in self.memo:
            self._run(t, lambda bound: False)  # no bound will do: the walk runs to the end and keeps ψ(t)
        return self.memo[t]

    def under(self, t: int, ok) -> bool:
        """Whether an upper bound ``U`` of ``ψ(t)`` has ``ok(U)``, for an ``ok`` that holds for every value below
        one it holds for: then ``ok(ψ(t))`` and ``ok(0)`` (a heavy token's ψ') hold too. The walk stops at the first
        depth whose bound will do, before asking for the next depth's rows; ``False`` when none did (``ψ(t)`` is
        then known, :meth:`psi` answers it at once) or ``ψ(t)`` was already known."""
        return t not in self.memo and self._run(t, ok)

    def _run(self, t: int, ok) -> bool:
        """:meth:`_walk` until a bound has ``ok`` (``True``) or to its end, keeping ``ψ(t)`` (``False``)."""
        walk = self._walk(t)
        try:
            while True:
                if ok(next(walk)):
                    return True
        except StopIteration as done:
            self.memo[t] = done.value
        return False

    def _relevant(self, t: int):
        """The states from which ``f = t`` is still possible: prefixes of ``b(t)`` and strings that extend
        it with no longer target token in between (``best == t``; ``best`` only grows along a string). Also each
        proper prefix of ``b(t)`` -> the next byte of ``b(t)``: from there that byte is the only way on."""
        target = self.f.target
        along: dict[int, int] = {}
        if t == target.eos and t != BOTTOM:
            ancestors = {0}
        elif t in target.node:
            ancestors = target.path_to(target.node[t])
            along = target.along(target.node[t])
        else:  # BOTTOM: strings with no target token as a prefix
            ancestors = set()
        best = target.best
        return (lambda s: s < 0 or s in ancestors or best[s] == t), along

    def _walk(self, t: int):
        """ψ(t) depth by depth (the generator's return value), yielding after each depth an upper bound of it:
        the mass found so far plus that of every path still open, times :data:`SLACK`."""
        target = self.f.target
        if t != BOTTOM and t not in target.node and t != target.eos:
            self.cost[t] = 0  # an id f never returns (a duplicate spelling, a special token)
            return 0.0
        relevant, along = self._relevant(t)
        splits: dict[int, _Split] = {}
        frontier = [((), self.f.start, 1.0)]
        total, expanded = 0.0, 0
        while frontier:
            if expanded + len(frontier) > self.max_paths:  # heavy: stop before asking for these rows
                self.cost[t] = expanded
                return None
            expanded += len(frontier)
            self.paths += len(frontier)
            self.largest = max(self.largest, expanded)
            q = _host_rows(self.rows([path for path, _, _ in frontier]))
            qn = [r.numpy() for r in q]  # numpy's gathers: a fifth of torch's per call, and each row has several
            groups: dict[int, list[int]] = {}
            for i, (_, s, _) in enumerate(frontier):
                groups.setdefault(s, []).append(i)
            nxt = []
            for s, idx in groups.items():
                if s not in splits:
                    splits[s] = self._split(s, t, relevant, along)
                split = splits[s]
                prob = np.array([frontier[i][2] for i in idx])
                mass = self._mass(split, [qn[i] for i in idx], [q[i] for i in idx], [frontier[i][0] for i in idx])
                total += float(prob @ mass)
                if split.child_ids:
                    children = np.asarray(split.child_ids)
                    for i in idx:
                        path, _, p = frontier[i]
                        nxt += [(path + (v,), s2, p * qv) for v, s2, qv in
                                zip(split.child_ids, split.child_states, qn[i][children].tolist()) if qv > 0]
            frontier = nxt
            if frontier:
                yield (total + sum(p for _, _, p in frontier)) * SLACK
        self.cost[t] = expanded
        return min(max(total, 0.0), 1.0)

    def _split(self, state: int, t: int, relevant, along: dict[int, int]) -> _Split:
        """Walk the drafter trie from ``state`` alongside the automaton (only where ``t`` stays reachable). Along a
        proper prefix of ``b(t)`` that does not stop with ``f = t``, only the next byte of ``b(t)`` is followed: any
        other byte leaves ``b(t)`` before reaching it, where ``f = t`` is no longer possible."""
        f, dt = self.f, self.f.drafter
        out = _Split(eos=f.special_outcome(state, True) == t, other_stops=f.special_outcome(state, False) == t)
        stack = [(0, state)]
        while stack:
            dnode, s = stack.pop()
            for v in dt.here[dnode]:  # drafter tokens that end exactly here
                if f.is_open(s):
                    out.child_ids.append(v)
                    out.child_states.append(s)
                elif f.outcome(s) == t:
                    out.tokens.append(v)
            stops_with_t = f.outcome(s) == t
            if stops_with_t:  # every longer drafter token leaves the open strings here, with f = t ...
                out.ranges.append((dt.lo[dnode] + len(dt.here[dnode]), dt.hi[dnode], 1))
            dkids = dt.children[dnode]
            if s < 0:
                byte = f.lag[-s - 1]
                common = [byte] if byte in dkids else []
            elif not stops_with_t and s in along:
                byte = along[s]
                common = [byte] if byte in dkids else []
            else:
                tkids = f.target.children[s]
                common = [b for b in tkids if b in dkids] if len(tkids) < len(dkids) else [b for b in dkids if b in tkids]
            for byte in common:
                dchild = dkids[byte]
                if stops_with_t:  # ... except those that stay inside the target trie
                    out.ranges.append((dt.lo[dchild], dt.hi[dchild], -1))
                s2 = f.step(s, byte)
                if relevant(s2):
                    stack.append((dchild, s2))
        return out

    def _prefix_sum(self, path: tuple, row: torch.Tensor) -> torch.Tensor:
        """The row after ``path`` in the trie's order, summed from its start in float64, with a 0 in front (so
        entry ``hi`` minus entry ``lo`` is the mass of ``order[lo:hi]``); kept for the next ψ that needs it."""
        cs = self.cumulative.get(path)
        if cs is None:
            cs = torch.nn.functional.pad(row.to(torch.float64)[self.f.drafter.order].cumsum(0), (1, 0))
            if (len(self.cumulative) + 1) * cs.shape[0] <= CUMULATIVE_FLOATS:
                self.cumulative[path] = cs
        return cs

    def _total(self, path: tuple, row: np.ndarray) -> float:
        """The row after ``path`` summed in float64; kept for the next ψ that needs it."""
        total = self.totals.get(path)
        if total is None:
            total = self.totals[path] = float(row.sum(dtype=np.float64))
        return total

    def _plan(self, split: _Split, size: int) -> _Plan:
        dt = self.f.drafter
        ids, signs, total, prefix = [], [], False, False
        if split.ranges:
            entries = _few_entries(split.ranges, dt.order_ids)
            outside = None if entries is not None else _left_out(split.ranges, dt, size)
            if entries is not None:  # a few entries (most splits): summed directly
                ids.append(entries[0])
                signs.append(entries[1])
            elif outside is not None:  # nearly every entry (a short target token, or ⊥): the row less the rest
                ids.append(outside)
                signs.append(np.full(len(outside), -1.0))
                total = True
            else:  # whole subtrees: differences of the row's prefix sum
                prefix = True
        stops = [np.asarray(split.tokens, dtype=np.int64)] if split.tokens else []
        if split.eos and len(dt.eos_ids):
            stops.append(dt.eos_ids.numpy())
        if split.other_stops and len(dt.other_stop_ids):
            stops.append(dt.other_stop_ids.numpy())
        ids += stops
        signs += [np.ones(len(s)) for s in stops]
        if not ids:
            return _Plan(np.zeros(0, dtype=np.int64), np.zeros(0), total, prefix)
        return _Plan(np.concatenate(ids), np.concatenate(signs), total, prefix)

    def _mass(self, split: _Split, arrays: list[np.ndarray], rows: list[torch.Tensor],
              paths: list[tuple]) -> np.ndarray:
        """Per row: the drafter mass of the next tokens that stop the string with ``f = t`` (float64 sums), one
        gather per row; ``arrays`` are ``rows`` as numpy arrays."""
        if split.plan is None:
            split.plan = self._plan(split, len(arrays[0]))
        plan = split.plan
        if len(plan.ids):
            mass = np.stack([a[plan.ids] for a in arrays]) @ plan.signs  # float32 entries, float64 products
        else:
            mass = np.zeros(len(arrays))
        if plan.total:
            mass += [self._total(path, a) for path, a in zip(paths, arrays)]
        if plan.prefix:
            lo, hi, sign = (torch.tensor(c) for c in zip(*split.ranges))
            cs = torch.stack([self._prefix_sum(path, row)[torch.cat((hi, lo))] for path, row in zip(paths, rows)])
            mass += ((cs[:, :len(hi)] - cs[:, len(hi):]) * sign).sum(1).numpy()
        return mass
