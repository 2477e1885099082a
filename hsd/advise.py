"""``python -m hsd advise``: predict tokens/s and speedup for each algorithm and lookahead before running.

A short calibration runs AR, and each algorithm once per prompt at lookaheads 2, 5 and 12 (or at each
lookahead asked for, as the app does), then fits this
model (the standard speculative-decoding cost model with measured, not assumed, inputs). A lookahead ``k`` is
predicted from the calibration at the smallest calibrated lookahead ≥ ``k``: where rounds start depends on
the lookahead (a long draft skips easy stretches of text in one round, so more of its rounds start at hard
positions), and acceptance measured at a very different lookahead under-predicts.

* **Acceptance.** ``α_i`` = P(draft position i accepted | position i reached), pooled over calibration
  rounds (positions with fewer than 10 rounds reuse the previous position's value;
  :func:`hsd.metrics.conditional_acceptance`). With ``m`` proposals
  per round the expected tokens per round are ``τ(m) = 1 + Σ_{j=1..m} Π_{i≤j} α_i`` (the 1 is the bonus or
  correction token). SLEM proposes target tokens, ``r`` per drafter token on average (measured), so a
  lookahead of ``k`` drafter tokens gives ``m = round(r·k)`` proposals; for SD and TLI ``r = 1``.
* **Time per round.** ``T(k) = k·(c_draft + o_draft) + c_verify(m + 1) + o_round``: the measured forward
  costs (:mod:`hsd.costs`) plus the engine's measured overheads, per drafted token (sampling the drafter,
  ``t_draft`` minus the drafter forwards) and per round (conversion, verification sampling, bookkeeping).
* **Prediction.** tokens/s = ``τ / T(k)``; AR's is ``1 / (c_verify(1) + o_ar)``; speedup = their ratio.

The recommendation is the (algorithm, lookahead) with the highest predicted tokens/s, or AR when no
drafter setting is predicted to beat it.
"""

from __future__ import annotations

import statistics
import time

from .algorithms import ALGORITHMS, availability
from .costs import Costs, measure_costs
from .generate import encode_prompt, generate
from .loading import Pair
from .machine import machine_info, machine_line
from .metrics import conditional_acceptance, expected_tokens, round_counts

LOOKAHEADS = range(1, 13)
CALIBRATION_LOOKAHEADS = (2, 5, 12)
MIN_ROUNDS = 10


def _calibrate(pair: Pair, prompts, algorithm: str, temperature: float, max_new_tokens: int, seed: int,
               costs: Costs, lookahead: int = 1) -> dict:
    rounds = []
    for i, prompt in enumerate(prompts):
        res = generate(pair, prompt, algorithm=algorithm, max_new_tokens=max_new_tokens, temperature=temperature,
                       lookahead=lookahead, seed=seed + i)
        rounds += res.rounds[1:]  # the first round carries the prefill's warm-up effects
    if not ALGORITHMS[algorithm].needs_drafter:  # the baseline: only the overhead per round
        o_ar = statistics.mean(r.seconds for r in rounds) - costs.verify_cost(1)
        return {"rounds": len(rounds), "o_round_ms": max(o_ar, 0.0) * 1e3}
    drafted = sum(len(r.drafted) for r in rounds)
    proposed = sum(r.n_proposed for r in rounds)
    o_draft = (sum(r.t_draft for r in rounds) - sum(r.drafter_forwards for r in rounds) * costs.draft) / max(drafted, 1)
    o_round = statistics.mean(r.seconds - r.t_draft - costs.verify_cost(r.n_proposed + 1) for r in rounds)
    emitted = sum(len(r.emitted) for r in rounds)
    alphas = conditional_acceptance(round_counts(rounds, ALGORITHMS[algorithm].ideal_drafted), 2 * lookahead,
                                    MIN_ROUNDS)
    return {"rounds": len(rounds), "alpha": [round(a, 4) for a in alphas],
            "target_per_draft": proposed / drafted if drafted else 1.0, "tau": emitted / len(rounds),
            "o_draft_ms": max(o_draft, 0.0) * 1e3, "o_round_ms": max(o_round, 0.0) * 1e3}


def predict(cal: dict, costs: Costs, k: int) -> tuple[float, float]:
    """(τ, seconds per round) at lookahead ``k`` from a calibration."""
    m = max(1, round(cal["target_per_draft"] * k))
    tau = expected_tokens(cal["alpha"], m)
    seconds = (k * (costs.draft + cal["o_draft_ms"] / 1e3) + costs.verify_cost(m + 1) + cal["o_round_ms"] / 1e3)
    return tau, seconds


def advise(pair: Pair, prompts: list[str], *, temperature: float = 0.0, algorithms: list[str] | None = None,
           max_new_tokens: int = 128, seed: int = 0, lookaheads=None, log=print) -> dict:
    """Calibrate, predict every (algorithm, lookahead) and recommend one; returns the advice as data.

    Without ``lookaheads``, lookaheads 1..12 are predicted from calibrations at 2, 5 and 12 (each prediction
    records the lookahead it was calibrated at); with them, each one is calibrated and only those are
    predicted. Progress lines go to ``log``; :func:`advise_steps` yields them instead."""
    for item in advise_steps(pair, prompts, temperature=temperature, algorithms=algorithms,
                             max_new_tokens=max_new_tokens, seed=seed, lookaheads=lookaheads):
        if isinstance(item, str):
            log(item)
    return item


def advise_steps(pair: Pair, prompts: list[str], *, temperature: float = 0.0, algorithms: list[str] | None = None,
                 max_new_tokens: int = 128, seed: int = 0, lookaheads=None):
    """:func:`advise` as a generator: progress lines (with a time estimate once AR is calibrated), then the
    advice."""
    why = availability(pair)
    candidates = algorithms or [a for a, spec in ALGORITHMS.items() if spec.needs_drafter and spec.advised]
    usable = [a for a in candidates if why[a] is None]
    skipped = {a: why[a] for a in candidates if why[a] is not None}
    calibrated = tuple(sorted(set(lookaheads))) if lookaheads else CALIBRATION_LOOKAHEADS
    reported = calibrated if lookaheads else LOOKAHEADS
    ids = [encode_prompt(pair.target, p, None)[0] for p in prompts]
    context = int(statistics.mean(len(i) for i in ids) + max_new_tokens / 2)
    runs = len(usable) * (len(calibrated) + 1)
    yield (f"measuring the forward costs of both models; then AR and {runs} calibration run(s) ({len(usable)} "
           f"algorithm(s) at {len(calibrated)} lookahead(s), plus warm-ups) of {len(prompts)} prompt(s) × "
           f"{max_new_tokens} tokens")
    costs = measure_costs(pair, context, 2 * max(calibrated) + 2, 15, ids[0])[0]
    start = time.perf_counter()
    generate(pair, prompts[0], algorithm="ar", max_new_tokens=16)  # warm-up
    ar = _calibrate(pair, prompts, "ar", temperature, max_new_tokens, seed, costs)
    ar_seconds = time.perf_counter() - start
    yield (f"calibrated AR; now {len(usable)} algorithm(s) ({', '.join(usable)}) at lookahead "
           f"{', '.join(map(str, calibrated))}: {runs} runs of {len(prompts)} prompt(s), about "
           f"{runs * ar_seconds:.0f} s at AR's pace")
    ar_tps = 1.0 / (costs.verify_cost(1) + ar["o_round_ms"] / 1e3)
    calibration, predictions = {"ar": ar}, []
    for i, a in enumerate(usable):
        generate(pair, prompts[0], algorithm=a, max_new_tokens=16, temperature=temperature)  # warm-up
        calibration[a] = cals = {}
        for kc in calibrated:
            yield f"calibrating {a} ({i + 1}/{len(usable)}) at lookahead {kc}"
            cals[kc] = _calibrate(pair, prompts, a, temperature, max_new_tokens, seed, costs, kc)
        for k in reported:
            at = min(kc for kc in calibrated if kc >= k)
            tau, seconds = predict(cals[at], costs, k)
            predictions.append({"algorithm": a, "lookahead": k, "calibrated_at": at, "tau": tau,
                                "round_ms": seconds * 1e3, "tokens_per_s": tau / seconds,
                                "speedup": tau / seconds / ar_tps})
        yield f"  calibrated {a}: tau at lookahead " + ", ".join(f"{kc}: {c['tau']:.2f}" for kc, c in cals.items())
    best = max(predictions, key=lambda p: p["tokens_per_s"], default=None)
    beats = best is not None and best["speedup"] > 1.0
    if beats:
        text = (f"Use {best['algorithm']} with lookahead {best['lookahead']}: predicted {best['tokens_per_s']:.1f} "
                f"tokens/s, {best['speedup']:.2f}x AR ({ar_tps:.1f} tokens/s).")
    elif best is not None:
        text = (f"No drafter setting is predicted to beat AR here: the best, {best['algorithm']} with lookahead "
                f"{best['lookahead']}, is predicted at {best['speedup']:.2f}x AR. Use algorithm='ar'.")
    else:
        text = "No drafting algorithm applies to this pair: use algorithm='ar'."
    yield {"temperature": temperature, "costs": costs.to_dict(), "ar_tokens_per_s": ar_tps,
           "calibration": calibration, "skipped": skipped, "predictions": predictions,
           "recommendation": {"algorithm": best["algorithm"] if beats else "ar",
                              "lookahead": best["lookahead"] if beats else None,
                              "tokens_per_s": best["tokens_per_s"] if beats else ar_tps,
                              "speedup": best["speedup"] if beats else 1.0, "beats_ar": beats, "text": text},
           "machine": machine_info(pair)}


def format_advice(advice: dict) -> str:
    lines = [f"machine: {machine_line(advice['machine'])}",
             f"temperature {advice['temperature']:g}; AR predicted {advice['ar_tokens_per_s']:.1f} tokens/s; "
             f"drafter step {advice['costs']['draft_ms']:.3f} ms, target forward of 1 / 6 / 13 tokens "
             + " / ".join(f"{advice['costs'].get(f'verify_{n}_ms', float('nan')):.3f}" for n in (1, 6, 13)) + " ms"]
    for a, why in advice["skipped"].items():
        lines.append(f"{a}: not applicable ({why})")
    algorithms = list(dict.fromkeys(p["algorithm"] for p in advice["predictions"]))
    lines.append("predicted speedup over AR by lookahead (calibrated at: the lookahead whose measured acceptance "
                 "the row uses):")
    lines.append("k     " + "".join(f"{a:>8s}" for a in algorithms) + "   calibrated at")
    for k in dict.fromkeys(p["lookahead"] for p in advice["predictions"]):
        row = {p["algorithm"]: p for p in advice["predictions"] if p["lookahead"] == k}
        at = {p.get("calibrated_at", k) for p in row.values()}
        lines.append(f"{k:<6d}" + "".join(f"{row[a]['speedup']:8.2f}" if a in row else f"{'-':>8s}"
                                          for a in algorithms)
                     + "   " + ("this k" if at == {k} else ", ".join(f"k={x}" for x in sorted(at))))
    lines.append(advice["recommendation"]["text"])
    return "\n".join(lines)
