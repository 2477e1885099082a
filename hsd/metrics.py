"""Summary metrics, named as production engines name them (spec §5), computed once for every consumer.

A generation is summarised from one :class:`Counts` per verification round, which hsd's trace
(:func:`round_counts`) and the Transformers peer (:mod:`hsd.peer`) both produce, as vLLM's spec-decode
metrics are built from per-step counts. :func:`summarize` turns them into :class:`Metrics`, read by the
CLI, the benchmark, the advice, the app and the pictures.

TTFT, TPOT and tokens/s follow the paper's harness: TPOT = (total − TTFT) / (tokens − 1) and
tokens/s = 1 / TPOT. τ (``mean_accepted_length``) = emitted tokens per verification round, bonus
included. Two acceptance rates, because users read one for the other:

- ``draft_acceptance_rate`` = accepted / proposed target tokens (vLLM's ``draft_acceptance_rate``). Its
  denominator counts every proposal, including those after a round's first rejection, which the target never
  judged; it measures how much of the drafting work survives, and falls as the lookahead grows.
- ``verified_acceptance_rate`` = accepted / verified positions, where a round verifies its accepted proposals
  and, if it rejected one, that one (``verified``). It is the chance that a position the target judged was
  accepted: the per-position conditional acceptance, comparable with Σ min(p, q) (spec §1).

``acceptance_rate``, the old name of the first, is still read (``metrics.acceptance_rate``,
``metrics["acceptance_rate"]``, a JSON file that has it) but no longer written. ``per_position_acceptance[i]`` =
rounds whose proposal ``i`` (0-based) was accepted ÷ rounds that proposed at least ``i + 1`` tokens
(vLLM's ``num_accepted_tokens_per_pos / num_drafts``): acceptance at ``i`` includes reaching it.
``outside_forwards`` = the share of round time not spent inside model forwards (hsd's own overhead).

The speedup model (:func:`expected_tokens`, :func:`predicted_speedup`) is the measured chain that
``hsd advise`` fits: conditional acceptance per position, ``τ(m) = 1 + Σ_j Π_{i≤j} α_i``, and measured
time per round.
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass, field, fields
from typing import NamedTuple

from .trace import Round


class Counts(NamedTuple):
    """One verification round in numbers: drafter forwards an ideal engine needs, target tokens proposed and
    accepted, tokens emitted, and when its tokens were ready (seconds since the call started)."""

    drafted: int
    proposed: int
    accepted: int
    emitted: int
    t_end: float | None = None


def _drafted(rnd: Round) -> int:
    return len(rnd.drafted)


def round_counts(rounds: list[Round], ideal_drafted=_drafted) -> list[Counts]:
    """The counts of hsd's trace; ``drafted`` is the algorithm's ideal drafter forwards per round
    (:attr:`Algorithm.ideal_drafted <hsd.algorithms.contract.Algorithm>`: one per drafted token unless the
    algorithm says otherwise)."""
    return [Counts(ideal_drafted(r), r.n_proposed, r.n_accepted, len(r.emitted), r.t_end) for r in rounds]


def verified(c: Counts) -> int:
    """Positions the target judged in a round: its accepted proposals and, if it rejected one, that one."""
    return c.accepted + (c.accepted < c.proposed)


def per_position_acceptance(counts: list[Counts]) -> list[float]:
    """Per draft position ``i``: rounds that accepted proposal ``i`` ÷ rounds that proposed it."""
    depth = max((c.proposed for c in counts), default=0)
    out = []
    for i in range(depth):
        reached = [c for c in counts if c.proposed > i]
        out.append(sum(c.accepted > i for c in reached) / len(reached))
    return out


def conditional_acceptance(counts: list[Counts], depth: int, min_rounds: int = 1) -> list[float]:
    """``α_i`` = P(proposal ``i`` accepted | proposed and every earlier one accepted); a position reached by
    fewer than ``min_rounds`` rounds reuses the previous position's value."""
    out: list[float] = []
    for i in range(depth):
        reached = [c for c in counts if c.proposed > i and c.accepted >= i]
        if len(reached) >= min_rounds and reached:
            out.append(sum(c.accepted > i for c in reached) / len(reached))
        else:
            out.append(out[-1] if out else 0.0)
    return out


def expected_tokens(alphas: list[float], m: int) -> float:
    """τ(m) = 1 + Σ_j Π_{i≤j} α_i, with α beyond the calibrated depth equal to the last one."""
    tau, survive = 1.0, 1.0
    for j in range(m):
        survive *= alphas[min(j, len(alphas) - 1)] if alphas else 0.0
        tau += survive
    return tau


@dataclass
class Metrics:
    """The summary of one generation. Also readable by key (``metrics["tokens_per_s"]``), as JSON has it."""

    new_tokens: int = 0
    rounds: int = 0
    total_s: float | None = None
    prefill_s: float | None = None
    ttft_s: float | None = None
    tpot_s: float | None = None
    tokens_per_s: float | None = None
    mean_accepted_length: float | None = None
    draft_acceptance_rate: float | None = None  # accepted / proposed (vLLM's name)
    verified_acceptance_rate: float | None = None  # accepted / verified: per judged position
    proposed: int = 0
    accepted: int = 0
    verified: int = 0
    per_position_acceptance: list[float] = field(default_factory=list)
    acceptance_histogram: list[int] = field(default_factory=list)
    target_forwards: int | None = None
    drafter_forwards: int | None = None
    time_split_s: dict[str, float] = field(default_factory=dict)
    outside_forwards: float | None = None
    retokenization_events: int = 0
    extra: dict[str, float] = field(default_factory=dict)  # an algorithm's summed counters (SLRS's ψ cost)

    @property
    def acceptance_rate(self) -> float | None:
        """The old name of :attr:`draft_acceptance_rate` (accepted / proposed), kept for readers of it."""
        return self.draft_acceptance_rate

    @classmethod
    def of(cls, value) -> "Metrics":
        """``value`` itself, or the metrics a dict of the same keys holds (a JSON file, a hand-built trace)."""
        if isinstance(value, cls):
            return value
        if "acceptance_rate" in value and "draft_acceptance_rate" not in value:  # written before the rename
            value = {**value, "draft_acceptance_rate": value["acceptance_rate"]}
            del value["acceptance_rate"]
        names = {f.name for f in fields(cls)} - {"extra"}
        return cls(**{k: v for k, v in value.items() if k in names},
                   extra={k: v for k, v in value.items() if k not in names})

    def to_dict(self) -> dict:
        d = asdict(self)
        extra = d.pop("extra")
        return {**d, **extra}

    def __getitem__(self, key: str):
        if key in self.extra:
            return self.extra[key]
        if key in {f.name for f in fields(self)} - {"extra"} or key == "acceptance_rate":
            return getattr(self, key)
        raise KeyError(key)

    def get(self, key: str, default=None):
        try:
            return self[key]
        except KeyError:
            return default

    def __contains__(self, key: str) -> bool:
        return self.get(key, self) is not self

    def keys(self):
        return self.to_dict().keys()

    def __iter__(self):
        return iter(self.keys())


def summarize(counts: list[Counts], *, total_s: float | None = None, prefill_s: float | None = None,
              target_forwards: int | None = None, drafter_forwards: int | None = None,
              time_split_s: dict[str, float] | None = None, forward_seconds: float | None = None,
              retokenization_events: int = 0, extra: dict | None = None) -> Metrics:
    """:class:`Metrics` from per-round counts and what the caller measured around them."""
    n = sum(c.emitted for c in counts)
    total = total_s if total_s is not None else (counts[-1].t_end if counts else prefill_s)
    ttft = counts[0].t_end if counts else None
    tpot = (total - ttft) / (n - 1) if n > 1 and ttft is not None else None
    proposed = sum(c.proposed for c in counts)
    accepted = sum(c.accepted for c in counts)
    judged = sum(verified(c) for c in counts)
    depth = max((c.proposed for c in counts), default=0)
    histogram = [0] * (depth + 1)
    for c in counts:
        histogram[min(c.accepted, depth)] += 1
    round_seconds = sum((time_split_s or {}).values())
    return Metrics(
        new_tokens=n, rounds=len(counts), total_s=total, prefill_s=prefill_s, ttft_s=ttft, tpot_s=tpot,
        tokens_per_s=(1.0 / tpot) if tpot else (n / total if total else None),
        mean_accepted_length=n / len(counts) if counts else None,
        draft_acceptance_rate=accepted / proposed if proposed else None,
        verified_acceptance_rate=accepted / judged if judged else None, proposed=proposed, accepted=accepted,
        verified=judged,
        per_position_acceptance=per_position_acceptance(counts), acceptance_histogram=histogram,
        target_forwards=target_forwards, drafter_forwards=drafter_forwards, time_split_s=time_split_s or {},
        outside_forwards=(1 - forward_seconds / round_seconds) if round_seconds and forward_seconds is not None
        else None,
        retokenization_events=retokenization_events, extra=extra or {})


def summarize_trace(rounds: list[Round], algorithm, prefill_seconds: float, prefill_forwards: dict) -> Metrics:
    """The metrics of an hsd generation from its trace; ``algorithm`` is its
    :class:`~hsd.algorithms.contract.Algorithm` (which counters to sum, how many drafter forwards are ideal)."""
    summed = algorithm.summed_extra
    return summarize(
        round_counts(rounds, algorithm.ideal_drafted), prefill_s=prefill_seconds,
        total_s=rounds[-1].t_end if rounds else prefill_seconds,
        target_forwards=prefill_forwards.get("target", 0) + sum(r.target_forwards for r in rounds),
        drafter_forwards=prefill_forwards.get("drafter", 0) + sum(r.drafter_forwards for r in rounds),
        time_split_s={k: sum(getattr(r, f"t_{k}") for r in rounds) for k in ("draft", "convert", "verify", "other")},
        forward_seconds=sum(r.forward_seconds for r in rounds),
        retokenization_events=sum(len(r.events) for r in rounds),
        extra={key: sum(r.extra[key] for r in rounds) for key in summed if any(key in r.extra for r in rounds)})


def _mean_round_seconds(rounds: list[Round]) -> float | None:
    timed = rounds[1:] or rounds  # the first round carries the prefill's warm-up effects
    return sum(r.seconds for r in timed) / len(timed) if timed else None


def predicted_speedup(rounds: list[Round], ar_rounds: list[Round]) -> float | None:
    """The speedup over AR that ``hsd advise``'s model predicts from one run's trace: ``τ(m)`` from the run's
    conditional acceptance chain at its mean proposals per round ``m``, over its mean round time, against
    AR's mean round time. Prefill (TTFT) is left out, as in TPOT."""
    timed = rounds[1:] or rounds
    seconds, ar_seconds = _mean_round_seconds(rounds), _mean_round_seconds(ar_rounds)
    if not timed or not seconds or not ar_seconds:
        return None
    counts = round_counts(timed)
    m = round(sum(c.proposed for c in counts) / len(counts))
    tau = expected_tokens(conditional_acceptance(counts, max(m, 1)), m)
    return tau * ar_seconds / seconds


#: a repeated measurement whose interquartile range exceeds this share of its median is reported as noisy
NOISY_SPREAD = 0.2


class Spread(NamedTuple):
    """A repeated measurement: its median and its spread (interquartile range from 4 values on, else the
    range), over ``n`` values."""

    median: float
    low: float
    high: float
    n: int

    @property
    def relative(self) -> float:
        """The spread as a share of the median (infinite for a zero median)."""
        return (self.high - self.low) / abs(self.median) if self.median else float("inf")

    @property
    def noisy(self) -> bool:
        return self.n < 2 or self.relative > NOISY_SPREAD


def spread(values) -> Spread | None:
    """The median and spread of the measured values (``None`` and NaN ignored); ``None`` if there are none."""
    values = sorted(v for v in values if v is not None and v == v)
    if not values:
        return None
    if len(values) >= 4:
        low, _, high = statistics.quantiles(values, n=4, method="inclusive")
    else:
        low, high = values[0], values[-1]
    return Spread(statistics.median(values), low, high, len(values))
