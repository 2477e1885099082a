"""Per-forward costs measured directly on the models, and the ideal ("limit") time of a trace.

The limit of a speculative round is the time of its model forwards alone: ``d`` drafter single-token steps
plus one target forward over the ``m + 1`` positions it verifies (the last emitted token and ``m``
proposals). Everything else an engine does per round (sampling, re-tokenization, bookkeeping, Python) is
overhead. So, for a generation whose rounds drafted ``d_r`` drafter tokens and verified ``m_r`` proposals:

    ideal time = sum over rounds r of ( d_r * c_draft + c_verify(m_r + 1) )
    efficiency = ideal time / measured time              (1.0 = no overhead at all)

with ``c_draft`` the median time of a drafter forward of one token and ``c_verify(n)`` the median time of
a target forward of ``n`` tokens, both with a KV cache already holding ``context`` tokens. AR is the case
``d = m = 0``: one ``c_verify(1)`` per token. Rounds after the first are compared with TPOT, whose
numerator (total − TTFT) is exactly the time of those rounds.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field

import torch

from .loading import Model, Pair
from .runner import Runner


@dataclass
class Costs:
    """Median seconds per forward: ``draft`` (one drafter token), ``verify[n]`` (``n`` target tokens)."""

    draft: float | None
    verify: dict[int, float] = field(default_factory=dict)
    context: int = 0

    def verify_cost(self, n: int) -> float:
        """``c_verify(n)``; beyond the largest measured ``n``, extrapolated linearly from the last two."""
        if n in self.verify:
            return self.verify[n]
        top = max(self.verify)
        if n < top:  # not measured: the next measured size above
            return self.verify[min(k for k in self.verify if k > n)]
        slope = self.verify[top] - self.verify.get(top - 1, self.verify[top])
        return self.verify[top] + max(slope, 0.0) * (n - top)

    def ideal_round(self, drafted: int, proposed: int) -> float:
        return drafted * (self.draft or 0.0) + self.verify_cost(proposed + 1)

    def to_dict(self) -> dict:
        return {"context": self.context, "draft_ms": None if self.draft is None else self.draft * 1e3,
                **{f"verify_{n}_ms": v * 1e3 for n, v in sorted(self.verify.items())}}


def _timed(runner: Runner, ids: list[int], base: int, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        runner.forward(ids, keep=len(ids))  # Runner syncs CUDA before it returns
        times.append(time.perf_counter() - start)
        runner.crop(base)
    return statistics.median(times)


def _filled(model: Model, context: int, seed_ids: list[int]) -> Runner:
    runner = Runner(model)
    ids = (seed_ids or [0]) * (context // max(1, len(seed_ids)) + 1)
    runner.forward(ids[:max(1, context)], keep=1)
    return runner


@torch.inference_mode()
def measure_costs(pair: Pair, context: int, max_verify: int, repeats: int = 15,
                  target_ids: list[int] | None = None, drafter_ids: list[int] | None = None) -> Costs:
    """Median forward times with ``context`` tokens already cached (one warm-up forward each first)."""
    t_ids = target_ids or list(range(1, 33))
    runner = _filled(pair.target, context, t_ids)
    base = len(runner)
    verify = {}
    for n in range(1, max_verify + 1):
        ids = (t_ids * (n // len(t_ids) + 1))[:n]
        _timed(runner, ids, base, 1)
        verify[n] = _timed(runner, ids, base, repeats)
    draft = None
    if pair.drafter is not None:
        d_ids = drafter_ids or list(range(3, 35))
        drunner = _filled(pair.drafter, context, d_ids)
        dbase = len(drunner)
        _timed(drunner, d_ids[:1], dbase, 1)
        draft = _timed(drunner, d_ids[:1], dbase, repeats * 2)
    return Costs(draft, verify, context)


def ideal_decode_seconds(rounds: list[tuple[int, int, int]], costs: Costs) -> float:
    """Ideal time of every round after the first: what TPOT's numerator measures."""
    return sum(costs.ideal_round(d, m) for d, m, _ in rounds[1:])


def round_counts(result, algorithm: str) -> list[tuple[int, int, int]]:
    """(drafted, proposed, emitted) per round of an hsd :class:`~hsd.trace.Result`.

    Drafted counts drafter forwards an ideal engine needs: one per drafted token, except SLRS, whose ψ
    evaluation needs extra drafter forwards by design (the trace's own count is used there).
    """
    if algorithm == "slrs":
        return [(r.drafter_forwards, r.n_proposed, len(r.emitted)) for r in result.rounds]
    return [(len(r.drafted), r.n_proposed, len(r.emitted)) for r in result.rounds]
