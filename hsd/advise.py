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

**Dynamic lookahead.** Besides the fixed lookaheads, each algorithm that takes a ``draft_threshold``
(:attr:`hsd.algorithms.contract.Algorithm.dynamic_lookahead`: SD, SLEM, TLI) is calibrated at lookahead
:data:`DYNAMIC_LOOKAHEAD` (``dynamic_lookahead``) with each threshold ``θ`` in ``draft_thresholds`` (default
:data:`DRAFT_THRESHOLDS`, the measured best on the embedded pair: 0.5 greedy, often 0.7 sampling): a round's
draft ends after a token the drafter gives less than ``θ``. Its drafts vary in length from round to round,
so the α chain above does not describe it; it is predicted from its own calibration with the same cost model
and no extrapolation: ``τ`` = the measured tokens emitted per round, and
``T = d̄·(c_draft + o_draft) + mean_rounds c_verify(m + 1) + o_round``, with ``d̄`` the mean drafted tokens per
round, ``m`` each round's proposals, and ``o_draft``, ``o_round`` measured from its rounds as for a fixed
lookahead. Its rows carry ``draft_threshold = θ`` (``None`` for a fixed lookahead).

The recommendation is the setting (algorithm, lookahead, draft threshold or none) with the highest predicted
tokens/s, or AR when no drafter setting is predicted to beat it.
"""

from __future__ import annotations

import statistics
import time

from .algorithms import ALGORITHMS, availability
from .costs import Costs, measure_costs
from .errors import InvalidSettingError
from .generate import MAX_LOOKAHEAD, _check_int, encode_prompt, generate
from .loading import Pair
from .machine import machine_info, machine_line
from .metrics import conditional_acceptance, expected_tokens, round_counts, summarize
from .sampling import Sampling

LOOKAHEADS = range(1, 13)
CALIBRATION_LOOKAHEADS = (2, 5, 12)
MIN_ROUNDS = 10
#: the dynamic lookahead advise calibrates: drafts of up to this many tokens, ended by a draft threshold
DYNAMIC_LOOKAHEAD = 12
DRAFT_THRESHOLDS = (0.5, 0.7)


def check_draft_thresholds(values, name: str = "draft_thresholds", none: str = "pass () for none") -> tuple:
    """The draft thresholds to calibrate, sorted without repeats; each is a probability strictly between 0 and 1
    (0 would be a fixed lookahead, 1 a draft of one token)."""
    if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
        raise InvalidSettingError(f"{name} must be a list of numbers in (0, 1), got {values!r}; {none}.")
    values = list(values)
    for v in values:
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0.0 < v < 1.0:
            raise InvalidSettingError(f"{name} must be numbers strictly between 0 and 1 (a draft ends after a token "
                                      f"the drafter gives less), got {v!r}; {none}.")
    return tuple(sorted({float(v) for v in values}))


def setting_label(lookahead: int, draft_threshold: float | None) -> str:
    """A setting as the table names it: ``"5"``, or ``"12, stop < 0.5"`` for a dynamic lookahead."""
    return str(lookahead) if draft_threshold is None else f"{lookahead}, stop < {draft_threshold:g}"


def _calibrate(pair: Pair, prompts, algorithm: str, costs: Costs, settings: dict, lookahead: int = 1,
               draft_threshold: float = 0.0) -> dict:
    """One calibration: ``algorithm`` on each prompt at ``settings`` (:func:`hsd.generate`'s temperature,
    max_new_tokens, seed, drafter_temperature; prompt i uses seed + i), its rounds reduced to the model's inputs."""
    rounds = []
    for i, prompt in enumerate(prompts):
        res = generate(pair, prompt, algorithm=algorithm, lookahead=lookahead, draft_threshold=draft_threshold,
                       **{**settings, "seed": settings["seed"] + i})
        rounds += res.rounds[1:]  # the first round carries the prefill's warm-up effects
    if not ALGORITHMS[algorithm].needs_drafter:  # the baseline: only the overhead per round
        o_ar = statistics.mean(r.seconds for r in rounds) - costs.verify_cost(1)
        return {"rounds": len(rounds), "o_round_ms": max(o_ar, 0.0) * 1e3}
    counts = round_counts(rounds, ALGORITHMS[algorithm].ideal_drafted)
    pooled = summarize(counts)
    drafted = sum(len(r.drafted) for r in rounds)  # drafter tokens, the unit of the lookahead
    o_draft = (sum(r.t_draft for r in rounds) - sum(r.drafter_forwards for r in rounds) * costs.draft) / max(drafted, 1)
    verify = [costs.verify_cost(r.n_proposed + 1) for r in rounds]  # c_verify(m + 1) of each round
    o_round = statistics.mean(r.seconds - r.t_draft - v for r, v in zip(rounds, verify))
    alphas = conditional_acceptance(counts, 2 * lookahead, MIN_ROUNDS)
    return {"rounds": len(rounds), "alpha": [round(a, 4) for a in alphas],
            "target_per_draft": pooled.proposed / drafted if drafted else 1.0, "tau": pooled.mean_accepted_length,
            "drafted_per_round": drafted / len(rounds), "verify_ms": statistics.mean(verify) * 1e3,
            "o_draft_ms": max(o_draft, 0.0) * 1e3, "o_round_ms": max(o_round, 0.0) * 1e3}


def predict(cal: dict, costs: Costs, k: int) -> tuple[float, float]:
    """(τ, seconds per round) at lookahead ``k`` from a calibration."""
    m = max(1, round(cal["target_per_draft"] * k))
    tau = expected_tokens(cal["alpha"], m)
    seconds = (k * (costs.draft + cal["o_draft_ms"] / 1e3) + costs.verify_cost(m + 1) + cal["o_round_ms"] / 1e3)
    return tau, seconds


def predict_calibrated(cal: dict, costs: Costs) -> tuple[float, float]:
    """(τ, seconds per round) of the calibrated setting itself (a dynamic lookahead): its measured tokens per
    round, and the cost model fed with its mean drafted tokens and its mean target forward per round."""
    seconds = (cal["drafted_per_round"] * (costs.draft + cal["o_draft_ms"] / 1e3) + cal["verify_ms"] / 1e3
               + cal["o_round_ms"] / 1e3)
    return cal["tau"], seconds


def _setting_text(p: dict) -> str:
    text = f"{p['algorithm']} with lookahead {p['lookahead']}"
    t = p.get("draft_threshold")
    if t is not None:
        text += f", stopping a draft after a token the drafter gives below {t:g} (draft_threshold={t:g})"
    return text


def advise(pair: Pair, prompts: list[str], *, temperature: float = 0.0, algorithms: list[str] | None = None,
           max_new_tokens: int = 128, seed: int = 0, lookaheads=None, draft_thresholds=DRAFT_THRESHOLDS,
           dynamic_lookahead: int = DYNAMIC_LOOKAHEAD, drafter_temperature: float | None = None, log=print) -> dict:
    """Calibrate, predict every (algorithm, lookahead) and recommend one; returns the advice as data.

    Without ``lookaheads``, lookaheads 1..12 are predicted from calibrations at 2, 5 and 12 (each prediction
    records the lookahead it was calibrated at); with them, each one is calibrated and only those are
    predicted. Each of ``draft_thresholds`` adds a dynamic lookahead (up to ``dynamic_lookahead`` drafted
    tokens, a draft ended after a token below the threshold), calibrated and predicted on its own; ``()`` adds
    none. ``drafter_temperature`` (default: the target's) is every calibration's, as in :func:`hsd.generate`.
    Progress lines go to ``log``; :func:`advise_steps` yields them instead."""
    for item in advise_steps(pair, prompts, temperature=temperature, algorithms=algorithms,
                             max_new_tokens=max_new_tokens, seed=seed, lookaheads=lookaheads,
                             draft_thresholds=draft_thresholds, dynamic_lookahead=dynamic_lookahead,
                             drafter_temperature=drafter_temperature):
        if isinstance(item, str):
            log(item)
    return item


def advise_steps(pair: Pair, prompts: list[str], *, temperature: float = 0.0, algorithms: list[str] | None = None,
                 max_new_tokens: int = 128, seed: int = 0, lookaheads=None, draft_thresholds=DRAFT_THRESHOLDS,
                 dynamic_lookahead: int = DYNAMIC_LOOKAHEAD, drafter_temperature: float | None = None):
    """:func:`advise` as a generator: progress lines (with a time estimate once AR is calibrated), then the
    advice. Its ``calibration`` holds, per algorithm, each calibration by lookahead, and each dynamic one by
    its :func:`setting_label` (``"12, stop < 0.5"``)."""
    thresholds = check_draft_thresholds(draft_thresholds)
    _check_int("dynamic_lookahead", dynamic_lookahead, 1, MAX_LOOKAHEAD, "drafted tokens per round at most")
    if drafter_temperature is not None:
        Sampling(drafter_temperature)  # refused now, not after the costs are measured
    settings = dict(temperature=temperature, max_new_tokens=max_new_tokens, seed=seed,
                    drafter_temperature=drafter_temperature)
    why = availability(pair)
    candidates = algorithms or [a for a, spec in ALGORITHMS.items() if spec.needs_drafter and spec.advised]
    usable = [a for a in candidates if why[a] is None]
    skipped = {a: why[a] for a in candidates if why[a] is not None}
    dynamic = [a for a in usable if ALGORITHMS[a].dynamic_lookahead] if thresholds else []
    calibrated = tuple(sorted(set(lookaheads))) if lookaheads else CALIBRATION_LOOKAHEADS
    reported = calibrated if lookaheads else LOOKAHEADS
    ids = [encode_prompt(pair.target, p, None)[0] for p in prompts]
    context = int(statistics.mean(len(i) for i in ids) + max_new_tokens / 2)
    runs = len(usable) * (len(calibrated) + 1) + len(dynamic) * len(thresholds)
    also = (f"; {len(dynamic)} of them also at lookahead {dynamic_lookahead} stopping a draft below "
            f"{' or '.join(f'{t:g}' for t in thresholds)}" if dynamic else "")
    yield (f"measuring the forward costs of both models; then AR and {runs} calibration run(s) ({len(usable)} "
           f"algorithm(s) at {len(calibrated)} lookahead(s){also}, plus warm-ups) of {len(prompts)} prompt(s) × "
           f"{max_new_tokens} tokens")
    longest = max(calibrated + ((dynamic_lookahead,) if dynamic else ()))
    costs = measure_costs(pair, context, 2 * longest + 2, 15, ids[0])[0]
    start = time.perf_counter()
    generate(pair, prompts[0], algorithm="ar", max_new_tokens=16)  # warm-up
    ar = _calibrate(pair, prompts, "ar", costs, settings)
    ar_seconds = time.perf_counter() - start
    yield (f"calibrated AR; now {len(usable)} algorithm(s) ({', '.join(usable)}) at lookahead "
           f"{', '.join(map(str, calibrated))}{also}: {runs} runs of {len(prompts)} prompt(s), about "
           f"{runs * ar_seconds:.0f} s at AR's pace")
    ar_tps = 1.0 / (costs.verify_cost(1) + ar["o_round_ms"] / 1e3)
    calibration, predictions = {"ar": ar}, []
    for i, a in enumerate(usable):
        generate(pair, prompts[0], algorithm=a, max_new_tokens=16, temperature=temperature)  # warm-up
        calibration[a] = cals = {}
        for kc in calibrated:
            yield f"calibrating {a} ({i + 1}/{len(usable)}) at lookahead {kc}"
            cals[kc] = _calibrate(pair, prompts, a, costs, settings, kc)
        for k in reported:
            at = min(kc for kc in calibrated if kc >= k)
            predictions.append(_prediction(a, k, at, None, *predict(cals[at], costs, k), ar_tps))
        for t in thresholds if a in dynamic else ():
            label = setting_label(dynamic_lookahead, t)
            yield f"calibrating {a} ({i + 1}/{len(usable)}) at lookahead {label}"
            cals[label] = _calibrate(pair, prompts, a, costs, settings, dynamic_lookahead, t)
            predictions.append(_prediction(a, dynamic_lookahead, dynamic_lookahead, t,
                                           *predict_calibrated(cals[label], costs), ar_tps))
        yield f"  calibrated {a}: tau at lookahead " + "; ".join(f"{kc}: {c['tau']:.2f}" for kc, c in cals.items())
    yield {"temperature": temperature, "drafter_temperature": drafter_temperature, "costs": costs.to_dict(),
           "ar_tokens_per_s": ar_tps, "draft_thresholds": list(thresholds), "dynamic_lookahead": dynamic_lookahead,
           "calibration": calibration, "skipped": skipped, "predictions": predictions,
           "recommendation": recommend(predictions, ar_tps), "machine": machine_info(pair)}


def _prediction(algorithm: str, lookahead: int, calibrated_at: int, draft_threshold: float | None, tau: float,
                seconds: float, ar_tps: float) -> dict:
    return {"algorithm": algorithm, "lookahead": lookahead, "draft_threshold": draft_threshold,
            "calibrated_at": calibrated_at, "tau": tau, "round_ms": seconds * 1e3, "tokens_per_s": tau / seconds,
            "speedup": tau / seconds / ar_tps}


def recommend(predictions: list[dict], ar_tps: float) -> dict:
    """The prediction with the highest tokens/s, named precisely, or AR when none beats it."""
    best = max(predictions, key=lambda p: p["tokens_per_s"], default=None)
    beats = best is not None and best["speedup"] > 1.0
    if beats:
        text = (f"Use {_setting_text(best)}: predicted {best['tokens_per_s']:.1f} tokens/s, {best['speedup']:.2f}x AR "
                f"({ar_tps:.1f} tokens/s).")
    elif best is not None:
        text = (f"No drafter setting is predicted to beat AR here: the best, {_setting_text(best)}, is predicted at "
                f"{best['speedup']:.2f}x AR. Use algorithm='ar'.")
    else:
        text = "No drafting algorithm applies to this pair: use algorithm='ar'."
    return {"algorithm": best["algorithm"] if beats else "ar", "lookahead": best["lookahead"] if beats else None,
            "draft_threshold": best["draft_threshold"] if beats else None,
            "tokens_per_s": best["tokens_per_s"] if beats else ar_tps,
            "speedup": best["speedup"] if beats else 1.0, "beats_ar": beats, "text": text}


def _drafter_temperature(advice: dict) -> str:
    t = advice.get("drafter_temperature")
    return "" if t is None else f", drafter temperature {t:g}"


def format_advice(advice: dict) -> str:
    lines = [f"machine: {machine_line(advice['machine'])}",
             f"temperature {advice['temperature']:g}{_drafter_temperature(advice)}; AR predicted "
             f"{advice['ar_tokens_per_s']:.1f} tokens/s; "
             f"drafter step {advice['costs']['draft_ms']:.3f} ms, target forward of 1 / 6 / 13 tokens "
             + " / ".join(f"{advice['costs'].get(f'verify_{n}_ms', float('nan')):.3f}" for n in (1, 6, 13)) + " ms"]
    for a, why in advice["skipped"].items():
        lines.append(f"{a}: not applicable ({why})")
    predictions = advice["predictions"]
    algorithms = list(dict.fromkeys(p["algorithm"] for p in predictions))
    settings = list(dict.fromkeys((p["lookahead"], p.get("draft_threshold")) for p in predictions))
    width = max([len(setting_label(*s)) + 2 for s in settings] + [6])
    lines.append("predicted speedup over AR by lookahead (calibrated at: the lookahead whose measured acceptance "
                 "the row uses):")
    if any(t is not None for _, t in settings):
        lines.append("(k, stop < θ: a dynamic lookahead of up to k drafted tokens, a draft ended after a token the "
                     "drafter gives below θ (draft_threshold=θ); predicted from its own calibration)")
    lines.append(f"{'k':<{width}s}" + "".join(f"{a:>8s}" for a in algorithms) + "   calibrated at")
    for k, t in settings:
        row = {p["algorithm"]: p for p in predictions if (p["lookahead"], p.get("draft_threshold")) == (k, t)}
        at = {p.get("calibrated_at", k) for p in row.values()}
        where = ("this setting" if t is not None else "this k" if at == {k}
                 else ", ".join(f"k={x}" for x in sorted(at)))
        lines.append(f"{setting_label(k, t):<{width}s}" + "".join(f"{row[a]['speedup']:8.2f}" if a in row
                                                                  else f"{'-':>8s}" for a in algorithms)
                     + "   " + where)
    lines.append(advice["recommendation"]["text"])
    return "\n".join(lines)
