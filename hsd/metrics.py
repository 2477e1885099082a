"""Summary metrics of a trace, named as production engines name them (spec §5).

TTFT, TPOT and tokens/s follow the paper's harness: TPOT = (total − TTFT) / (tokens − 1) and
tokens/s = 1 / TPOT. τ (``mean_accepted_length``) = emitted tokens per verification round, bonus
included; ``acceptance_rate`` = accepted / proposed target tokens. ``per_position_acceptance[i]`` =
rounds whose proposal ``i`` (0-based) was accepted ÷ rounds that proposed at least ``i + 1`` tokens
(vLLM's ``num_accepted_tokens_per_pos / num_drafts``): acceptance at ``i`` includes reaching it.
"""

from __future__ import annotations

from .trace import Round

#: algorithm-specific per-round counters summed into the summary when present (SLRS's ψ cost)
SUMMED_EXTRA = ("psi_paths", "psi_forwards", "psi_evaluations", "psi_seconds", "residual_draws")


def summarize(rounds: list[Round], prefill_seconds: float, prefill_forwards: dict) -> dict:
    n = sum(len(r.emitted) for r in rounds)
    total = rounds[-1].t_end if rounds else prefill_seconds
    ttft = rounds[0].t_end if rounds else None
    tpot = (total - ttft) / (n - 1) if n > 1 else None
    proposed = sum(r.n_proposed for r in rounds)
    accepted = sum(r.n_accepted for r in rounds)
    depth = max((r.n_proposed for r in rounds), default=0)
    per_position = []
    for i in range(depth):
        reached = [r for r in rounds if r.n_proposed > i]
        per_position.append(sum(r.n_accepted > i for r in reached) / len(reached))
    histogram = [0] * (depth + 1)
    for r in rounds:
        histogram[r.n_accepted] += 1
    split = {k: sum(getattr(r, f"t_{k}") for r in rounds) for k in ("draft", "convert", "verify", "other")}
    round_seconds = sum(split.values())
    forward_seconds = sum(r.extra.get("forward_seconds", 0.0) for r in rounds)
    return {
        "new_tokens": n,
        "rounds": len(rounds),
        "total_s": total,
        "prefill_s": prefill_seconds,
        "ttft_s": ttft,
        "tpot_s": tpot,
        "tokens_per_s": (1.0 / tpot) if tpot else (n / total if total else None),
        "mean_accepted_length": n / len(rounds) if rounds else None,
        "acceptance_rate": accepted / proposed if proposed else None,
        "proposed": proposed,
        "accepted": accepted,
        "per_position_acceptance": per_position,
        "acceptance_histogram": histogram,
        "target_forwards": prefill_forwards.get("target", 0) + sum(r.target_forwards for r in rounds),
        "drafter_forwards": prefill_forwards.get("drafter", 0) + sum(r.drafter_forwards for r in rounds),
        "time_split_s": split,
        "overhead_share": (1 - forward_seconds / round_seconds) if round_seconds else None,
        "retokenization_events": sum(len(r.events) for r in rounds),
        **{key: sum(r.extra[key] for r in rounds) for key in SUMMED_EXTRA if any(key in r.extra for r in rounds)},
    }
