"""Per-forward costs measured directly on the models, and the ideal ("limit") time of a trace.

The limit of a speculative round is the time of its model forwards alone: ``d`` drafter single-token steps
plus one target forward over the ``m + 1`` positions it verifies (the last emitted token and ``m``
proposals). Everything else an engine does per round (sampling, re-tokenization, bookkeeping, Python) is
overhead. So, for a generation whose rounds drafted ``d_r`` drafter tokens and verified ``m_r`` proposals:

    ideal time = sum over rounds r of ( d_r * c_draft + c_verify(m_r + 1) )
    efficiency = ideal time / measured time              (1.0 = no overhead at all)

with ``c_draft`` the time of a drafter forward of one token and ``c_verify(n)`` the time of a target forward
of ``n`` tokens, both with a KV cache already holding ``context`` tokens: the median of single timed
forwards, measured once per benchmark repeat, then the median over repeats. AR is the case ``d = m = 0``:
one ``c_verify(1)`` per token. Wall-clock efficiency compares rounds after the first with TPOT, whose
numerator (total − TTFT) is exactly the time of those rounds.

On a shared CPU a run is preempted by other processes while a single short forward mostly is not, so
wall-clock efficiency there also measures machine load. The same costs are therefore also taken in CPU
time of the calling thread (``time.thread_time``; meaningful with one torch thread on a CPU device), and
the CPU-time efficiency compares a whole call (prefill included) with its ideal in CPU time.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field

import torch

from . import threads
from .loading import Model, Pair
from .lean import drafter_runner
from .runner import Runner


@dataclass
class Costs:
    """Seconds per forward: ``draft`` (one drafter token), ``verify[n]`` (``n`` target tokens), and
    ``prefill`` (both models' prompt forwards, at the mean prompt length)."""

    draft: float | None
    verify: dict[int, float] = field(default_factory=dict)
    context: int = 0
    prefill: float = 0.0

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

    def to_dict(self, unit: str = "") -> dict:
        return {"context": self.context, f"draft{unit}_ms": None if self.draft is None else self.draft * 1e3,
                **{f"verify_{n}{unit}_ms": v * 1e3 for n, v in sorted(self.verify.items())},
                f"prefill{unit}_ms": self.prefill * 1e3}

    @staticmethod
    def median(samples: list["Costs"]) -> "Costs":
        draft = [c.draft for c in samples if c.draft is not None]
        verify = {n: statistics.median(c.verify[n] for c in samples) for n in samples[0].verify}
        return Costs(statistics.median(draft) if draft else None, verify, samples[0].context,
                     statistics.median(c.prefill for c in samples))


def _timed(runner: Runner, ids: list[int], base: int, repeats: int) -> tuple[float, float]:
    """Median (wall, thread CPU) seconds of single forwards of ``ids`` after ``base`` cached tokens."""
    wall, cpu = [], []
    for _ in range(repeats):
        start, start_cpu = time.perf_counter(), time.thread_time()
        runner.forward(ids, keep=len(ids))  # Runner syncs CUDA before it returns
        wall.append(time.perf_counter() - start)
        cpu.append(time.thread_time() - start_cpu)
        runner.crop(base)
    return statistics.median(wall), statistics.median(cpu)


def _filled(model: Model, context: int, seed_ids: list[int], make=Runner) -> Runner:
    runner = make(model)
    ids = (seed_ids or [0]) * (context // max(1, len(seed_ids)) + 1)
    runner.forward(ids[:max(1, context)], keep=1)
    return runner


def _prefill(model: Model, n: int, seed_ids: list[int], repeats: int, make=Runner) -> tuple[float, float]:
    runner = make(model)
    ids = ((seed_ids or [0]) * (n // max(1, len(seed_ids)) + 1))[:max(1, n)]
    return _timed(runner, ids, 0, repeats)


@torch.inference_mode()
def measure_costs(pair: Pair, context: int, max_verify: int, repeats: int = 15,
                  target_ids: list[int] | None = None, prompt_len: int | None = None) -> tuple[Costs, Costs]:
    """(wall-clock, thread-CPU) costs: medians of single forwards with ``context`` tokens cached (on the intra-op
    threads a generation on ``pair`` runs with: :func:`hsd.threads.for_pair`)."""
    threads.apply(threads.for_pair(pair))
    t_ids = target_ids or list(range(1, 33))
    runner = _filled(pair.target, context, t_ids)
    base = len(runner)
    wall, cpu = Costs(None, {}, context), Costs(None, {}, context)
    for n in range(1, max_verify + 1):
        ids = (t_ids * (n // len(t_ids) + 1))[:n]
        _timed(runner, ids, base, 1)
        wall.verify[n], cpu.verify[n] = _timed(runner, ids, base, repeats)
    p = max(1, (prompt_len or len(t_ids)) - 1)
    wall.prefill, cpu.prefill = _prefill(pair.target, p, t_ids, 3)
    if pair.drafter is not None:
        d_ids = list(range(3, 35))
        drunner = _filled(pair.drafter, context, d_ids, drafter_runner)  # the runner the drafter drafts with
        dbase = len(drunner)
        _timed(drunner, d_ids[:1], dbase, 1)
        wall.draft, cpu.draft = _timed(drunner, d_ids[:1], dbase, repeats * 2)
        dw, dc = _prefill(pair.drafter, p, d_ids, 3, drafter_runner)
        wall.prefill, cpu.prefill = wall.prefill + dw, cpu.prefill + dc
    return wall, cpu


def ideal_decode_seconds(rounds, costs: Costs) -> float:
    """Ideal time of every round after the first: what TPOT's numerator measures. ``rounds`` are
    :class:`~hsd.metrics.Counts` (or tuples that start with drafted, proposed)."""
    return sum(costs.ideal_round(c[0], c[1]) for c in rounds[1:])


def ideal_call_seconds(rounds, costs: Costs) -> float:
    """Ideal time of a whole call: both prefills, then every round."""
    return costs.prefill + sum(costs.ideal_round(c[0], c[1]) for c in rounds)
