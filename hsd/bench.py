"""``python -m hsd bench``: paper-style tables, the distance to the limit, and Transformers as the peer.

Metrics follow the paper's harness (``keyboardAnt/hf-bench``; docs/benchmarks.md, *What is measured*): per
prompt, TTFT (call to first token, prefill of both models included), TPOT = (total − TTFT) / (new tokens − 1) and
tokens/s = 1 / TPOT; per row, the arithmetic mean of new tokens and TTFT and the harmonic mean of TPOT and of
tokens/s; speedup = tokens/s ÷ tokens/s of hsd's AR at the same temperature in the same run. Each prompt
runs ``repeats`` times (rows interleaved, so machine load drifts over all rows alike) after ``warmups``
untimed calls per row; per prompt the median TTFT and TPOT count. τ (tokens per target forward),
acceptance and per-position acceptance are pooled over all rounds of a row. The limit and efficiency
columns are defined in :mod:`hsd.costs`; the peer rows (``hf-*``) in :mod:`hsd.peer`. "Outside forwards" is
hsd's own in-loop measure: the share of round time not spent inside model forwards (its metrics'
``outside_forwards``, median over prompts), which machine load affects far less than the limit does. Every
number per run comes from :func:`hsd.metrics.summarize`, for hsd's rows and the peer's alike.
"""

from __future__ import annotations

import json
import statistics
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .algorithms import ALGORITHMS
from .costs import Costs, ideal_call_seconds, ideal_decode_seconds, measure_costs
from .errors import HsdError, InvalidSettingError, ResourceLimitError
from .generate import encode_prompt, generate
from .loading import ASSETS, Pair
from .machine import machine_info, machine_line  # noqa: F401  (re-exported: benchmarks/ import them here)
from .metrics import Metrics, Spread, predicted_speedup, round_counts, spread, summarize
from .peer import Peer, PeerUnavailable, failure_note, runs_at

PROMPT_SETS = ASSETS / "prompts"


@dataclass
class BenchConfig:
    algorithms: list[str] = field(default_factory=lambda: ["ar", "slem", "tli"])
    temperatures: list[float] = field(default_factory=lambda: [0.0, 1.0])
    prompts: str = "code"
    num_prompts: int = 8
    max_new_tokens: int = 128
    lookahead: int = 5
    warmups: int = 1
    repeats: int = 3
    seed: int = 0
    peer: bool = True
    min_new_tokens: int = 0  # the paper drops prompts where any row made fewer than 128 tokens
    cost_repeats: int = 15


def load_prompts(spec: str, n: int | None = None) -> list[str]:
    """A prompt-set name in ``assets/prompts`` (``code``, ``summarize``, ``long``) or a file: ``.jsonl``
    with a ``prompt`` field per line, or any other text file as a single prompt."""
    path = Path(spec)
    if not path.exists():
        path = PROMPT_SETS / f"{spec}.jsonl"
    if not path.exists():
        known = ", ".join(sorted(p.stem for p in PROMPT_SETS.glob("*.jsonl")))
        raise InvalidSettingError(f"No prompt set or file {spec!r}; known sets: {known}.")
    if path.is_dir():
        raise InvalidSettingError(f"--prompts {spec}: is a directory; give a .jsonl file (one {{\"prompt\": ...}} "
                                  "per line), a text file, or a set name.")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidSettingError(f"--prompts {spec}: not valid UTF-8 text (byte {exc.start}); save it as UTF-8.") from None
    except OSError as exc:
        raise InvalidSettingError(f"--prompts {spec}: cannot be read ({exc.strerror or exc}).") from None
    prompts = [_jsonl_prompt(line, i, spec) for i, line in enumerate(text.splitlines(), 1) if line.strip()] \
        if path.suffix == ".jsonl" else [text]
    if not prompts:
        raise InvalidSettingError(f"--prompts {spec}: holds no prompt.")
    return prompts[:n] if n else prompts


def measured_prompts(n: int, spec: str = "code", calibration: int = 4) -> list[str]:
    """The first ``n`` prompts of a set, never its last ``calibration`` ones (the embedded pair's benchmarks keep
    those for choosing a lookahead: ``scripts/pair/pair_goals.py --calibration-prompts``, default 4)."""
    every = load_prompts(spec)
    return every[:min(n, len(every) - calibration)]


def _jsonl_prompt(line: str, number: int, spec: str) -> str:
    """The ``prompt`` of one line of a prompt file; a specific error, with the line number, for a bad line."""
    try:
        record = json.loads(line)
    except json.JSONDecodeError as exc:
        raise InvalidSettingError(f"--prompts {spec}, line {number}: not valid JSON ({exc.msg} at column {exc.colno}); "
                                  'each line must be an object such as {"prompt": "def f(x):"}.') from None
    if not isinstance(record, dict) or not isinstance(record.get("prompt"), str) or not record["prompt"]:
        raise InvalidSettingError(f'--prompts {spec}, line {number}: needs a non-empty "prompt" string, such as '
                                  '{"prompt": "def f(x):"}.')
    return record["prompt"]


@dataclass
class Comparison:
    """What :func:`run_each` measured. ``results``: per algorithm, its run with the median tokens/s;
    ``failed``: the message of each that hit a resource limit; ``tokens_per_s``: per algorithm, one value per
    repeat; ``speedup`` and ``predicted``: per drafting algorithm, its speedup over AR in each repeat (against
    AR's run of the same repeat) and the speedup :func:`~hsd.metrics.predicted_speedup` gives from that pair
    of runs' rounds, so the prediction is fed by costs measured the same interleaved way."""

    results: dict = field(default_factory=dict)
    failed: dict = field(default_factory=dict)
    tokens_per_s: dict = field(default_factory=dict)
    speedup: dict = field(default_factory=dict)
    predicted: dict = field(default_factory=dict)
    seconds: float = 0.0
    #: on a CPU, the CPU time this process had during the repeats per second of wall time (None on a GPU): a
    #: decoding loop computes all the time, so well under one core means other programs took the CPU
    cpu_share: float | None = None

    @property
    def repeats(self) -> int:
        return max((len(v) for v in self.tokens_per_s.values()), default=0)

    def spread(self, name: str, key: str = "speedup") -> Spread | None:
        return spread(getattr(self, key).get(name, []))

    def noisy(self) -> list[str]:
        """The algorithms whose measured speedup varied too much across repeats to be trusted."""
        return [n for n in self.speedup if (s := self.spread(n)) is None or s.noisy]

    @property
    def busy(self) -> bool:
        """Whether other programs took enough of the CPU during the repeats to bend the timings
        (:data:`BUSY_CPU_SHARE`), however steady the repeats look."""
        return self.cpu_share is not None and self.cpu_share < BUSY_CPU_SHARE


#: a CPU comparison whose process had less than this share of one core while it ran counts as run on a busy machine
BUSY_CPU_SHARE = 0.75


def run_each(pair: Pair, algorithms: list[str], warmup_tokens: int = 8, min_repeats: int = 3, max_repeats: int = 9,
             budget_s: float = 45.0, target_spread: float = 0.1, **settings):
    """AR and each algorithm on the same prompt, settings and seed, interleaved (the app's Compare).

    After a short warm-up of each, every repeat runs each algorithm once, in an order rotated each repeat,
    so a change in machine load falls on all alike; repeats go on until every speedup's spread
    (:func:`~hsd.metrics.spread`) is within ``target_spread`` of its median (after ``min_repeats``), or
    ``max_repeats`` or ``budget_s`` seconds are spent. ``noise="shared"`` applies to the algorithms that declare
    :attr:`~hsd.algorithms.contract.Algorithm.shared_noise` (AR and SLEM); the others draw independently.
    Yields progress lines, then a :class:`Comparison`."""
    out = Comparison()
    names = list(dict.fromkeys(["ar", *algorithms]))
    shared = settings.pop("noise", "independent") == "shared"
    each = {name: {**settings, "noise": "shared" if shared and ALGORITHMS[name].shared_noise else "independent"}
            for name in names}

    yield f"Warming up {', '.join(names)}…"
    for name in names:
        try:
            generate(pair, algorithm=name, **{**each[name], "max_new_tokens": min(warmup_tokens,
                                                                               settings["max_new_tokens"])})
        except ResourceLimitError as exc:
            out.failed[name] = str(exc)
    todo = [n for n in names if n not in out.failed]
    runs: dict[str, list] = {n: [] for n in todo}
    start, cpu_start = time.perf_counter(), time.process_time()
    for rep in range(max_repeats):
        order = todo[rep % len(todo):] + todo[:rep % len(todo)]
        for name in order:
            yield f"Repeat {rep + 1} (at most {max_repeats}, {budget_s:.0f} s): {name}…"
            try:
                runs[name].append(generate(pair, algorithm=name, **each[name]))
            except ResourceLimitError as exc:
                out.failed[name] = str(exc)
                todo.remove(name)
                runs.pop(name)
        _record(out, runs)
        done = rep + 1 >= min_repeats and all(s is not None and s.relative <= target_spread
                                              for s in map(out.spread, out.speedup))
        if done or time.perf_counter() - start > budget_s and rep + 1 >= min_repeats:
            break
    out.seconds = time.perf_counter() - start
    if pair.target.device.type == "cpu" and out.seconds > 0:
        out.cpu_share = (time.process_time() - cpu_start) / out.seconds
    for name, reps in runs.items():
        tps = [Metrics.of(r.metrics).tokens_per_s or 0.0 for r in reps]
        out.results[name] = reps[sorted(range(len(reps)), key=tps.__getitem__)[(len(reps) - 1) // 2]]
    yield out


def _record(out: Comparison, runs: dict) -> None:
    """Per-repeat tokens/s, and each drafting algorithm's speedup and predicted speedup against AR's run of
    the same repeat."""
    ar = runs.get("ar", [])
    for name, reps in runs.items():
        out.tokens_per_s[name] = [Metrics.of(r.metrics).tokens_per_s for r in reps]
        if name == "ar" or not ar:
            continue
        pairs = list(zip(reps, ar))
        out.speedup[name] = [Metrics.of(r.metrics).tokens_per_s / Metrics.of(a.metrics).tokens_per_s
                             for r, a in pairs if Metrics.of(r.metrics).tokens_per_s
                             and Metrics.of(a.metrics).tokens_per_s]
        out.predicted[name] = [predicted_speedup(r.rounds, a.rounds) for r, a in pairs]


def row_labels(algorithms: list[str], temperature: float, peer: bool) -> list[str]:
    """hsd's rows, then the peer's: its AR, and the peer row (:attr:`Algorithm.peer
    <hsd.algorithms.contract.Algorithm>`) of each algorithm asked for that Transformers runs at this temperature
    (its SLEM when greedy, its TLI when sampling)."""
    labels = list(algorithms)
    if peer:
        rows = (ALGORITHMS[name].peer for name in dict.fromkeys(["ar", *algorithms]))
        labels += list(dict.fromkeys(label for label in rows if label and runs_at(label, temperature)))
    return labels


def _run_once(pair: Pair, peer: Peer | None, label: str, prompt: str, prompt_ids: list[int], cfg: BenchConfig,
              temperature: float, seed: int, max_new_tokens: int | None = None) -> dict:
    n = max_new_tokens or cfg.max_new_tokens
    start_cpu = time.thread_time()
    if label.startswith("hf-"):
        res = peer.generate(label, prompt_ids, max_new_tokens=n, temperature=temperature, seed=seed)
        return {"metrics": res.metrics, "rounds": res.rounds, "token_ids": res.token_ids,
                "cpu_s": time.thread_time() - start_cpu}
    res = generate(pair, prompt, algorithm=label, max_new_tokens=n, temperature=temperature,
                   lookahead=cfg.lookahead, seed=seed)
    return {"metrics": res.metrics, "rounds": round_counts(res.rounds, ALGORITHMS[label].ideal_drafted),
            "token_ids": res.token_ids, "cpu_s": time.thread_time() - start_cpu}


def run_bench(pair: Pair, prompts: list[str], cfg: BenchConfig, log=print) -> dict:
    """Every (temperature, row, prompt) ``repeats`` times; returns rows, per-prompt medians and costs."""
    peer = Peer(pair, cfg.lookahead) if cfg.peer and pair.drafter is not None else None
    prompt_ids = [encode_prompt(pair.target, p, None)[0] for p in prompts]
    notes: dict[tuple, str] = {}
    runs: dict[tuple, list[dict]] = {}
    cost_samples: list[tuple[Costs, Costs]] = []
    mean_prompt = int(statistics.mean(len(i) for i in prompt_ids))
    context = int(mean_prompt + cfg.max_new_tokens / 2)
    plan = [(t, label) for t in cfg.temperatures for label in row_labels(cfg.algorithms, t, peer is not None)]
    for t, label in plan:  # refusals first, then warm-ups
        try:
            if label.startswith("hf-"):
                peer.check(label)
            for _ in range(cfg.warmups):
                _run_once(pair, peer, label, prompts[0], prompt_ids[0], cfg, t, cfg.seed, min(cfg.max_new_tokens, 32))
        except Exception as exc:  # noqa: BLE001 - a refusal or a crash becomes the row's note
            notes[(t, label)] = _why(exc, label)
            log(f"  {label} T={t}: not run: {notes[(t, label)]}")
    completed = 0
    try:
        for rep in range(cfg.repeats):
            cost_samples.append(measure_costs(pair, context, 2 * cfg.lookahead + 2, cfg.cost_repeats,
                                              prompt_ids[0], mean_prompt))
            for t, label in plan:
                if (t, label) in notes:
                    continue
                for i, (prompt, ids) in enumerate(zip(prompts, prompt_ids)):
                    try:
                        out = _run_once(pair, peer, label, prompt, ids, cfg, t, cfg.seed + i)
                    except (HsdError, PeerUnavailable, RuntimeError, ValueError, AttributeError) as exc:
                        notes[(t, label)] = f"failed on prompt {i}: {_why(exc, label)}"
                        log(f"  {label} T={t}: {notes[(t, label)]}")
                        break
                    runs.setdefault((t, label, i), []).append(out)
            completed += 1
            log(f"  repeat {rep + 1}/{cfg.repeats} done")
    except KeyboardInterrupt:  # a time limit (SIGINT): report what is complete
        if completed:  # drop the unfinished repeat, so every row has the same prompts and repeats
            runs = {key: reps[:completed] for key, reps in runs.items()}
        log(f"  interrupted after {completed} complete repeat(s); reporting those")
    if not cost_samples or not runs:
        raise HsdError("The benchmark was interrupted before any run finished.")
    costs = Costs.median([c[0] for c in cost_samples])
    cpu_costs = Costs.median([c[1] for c in cost_samples])
    per_prompt = _per_prompt(runs, costs, cpu_costs)
    rows = _rows(per_prompt, plan, notes, cfg, len(prompts))
    return {"rows": rows, "per_prompt": per_prompt, "costs": {**costs.to_dict(), **cpu_costs.to_dict("_cpu")},
            "config": {**asdict(cfg), "completed_repeats": completed},
            "machine": machine_info(pair), "pair": pair.provenance()}


def _why(exc: Exception, label: str) -> str:
    if isinstance(exc, (HsdError, PeerUnavailable)):
        return str(exc)
    if label.startswith("hf-"):
        return failure_note(label, exc)
    return f"hsd raised {type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"


def _per_prompt(runs: dict, costs: Costs, cpu_costs: Costs) -> list[dict]:
    out = []
    for (t, label, i), reps in runs.items():
        m = reps[0]["metrics"]
        n = m.new_tokens
        ideal = ideal_decode_seconds(reps[0]["rounds"], costs) / (n - 1) if n > 1 else None
        tpot = statistics.median(r["metrics"].tpot_s or float("nan") for r in reps)
        out.append({
            "temperature": t, "row": label, "prompt": i, "new_tokens": n,
            "ttft_s": statistics.median(r["metrics"].ttft_s for r in reps), "tpot_s": tpot,
            "tokens_per_s": 1.0 / tpot if tpot and tpot == tpot else None, "ideal_tpot_s": ideal,
            "rounds": m.rounds, "proposed": m.proposed, "accepted": m.accepted,
            "round_counts": reps[0]["rounds"], "target_forwards": m.target_forwards,
            "drafter_forwards": m.drafter_forwards, "token_ids": reps[0]["token_ids"],
            "same_tokens_across_repeats": all(r["token_ids"] == reps[0]["token_ids"] for r in reps),
            "outside_forwards": _median_or_none([r["metrics"].outside_forwards for r in reps]),
            "cpu_s": statistics.median(r["cpu_s"] for r in reps),
            "ideal_cpu_s": ideal_call_seconds(reps[0]["rounds"], cpu_costs),
        })
    return out


def _median_or_none(values: list) -> float | None:
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def _hmean(values: list[float]) -> float | None:
    values = [v for v in values if v and v == v]  # a one-token output has no TPOT
    return statistics.harmonic_mean(values) if values else None


def _rows(per_prompt: list[dict], plan, notes, cfg: BenchConfig, n_prompts: int) -> list[dict]:
    keep = set(range(n_prompts))
    for t, label in plan:  # after an interruption: only prompts every row that ran has finished
        done = {p["prompt"] for p in per_prompt if p["temperature"] == t and p["row"] == label}
        if (t, label) in notes:  # refused or failed: a note, no numbers
            continue
        if done:
            keep &= done
        else:
            notes[(t, label)] = "not reached before the run was interrupted"
    if cfg.min_new_tokens:  # the paper's filter: drop a prompt if any row made too few tokens on it
        keep -= {p["prompt"] for p in per_prompt if p["new_tokens"] < cfg.min_new_tokens}
    rows = []
    for t, label in plan:
        pp = [p for p in per_prompt if p["temperature"] == t and p["row"] == label and p["prompt"] in keep
              and (t, label) not in notes]
        row = {"temperature": t, "algorithm": label, "implementation": "transformers" if label.startswith("hf-") else "hsd",
               "prompts": len(pp), "note": notes.get((t, label), "")}
        if pp:
            pooled = summarize([r for p in pp for r in p["round_counts"]])  # every round of every prompt
            tokens = sum(p["new_tokens"] for p in pp)
            tps = _hmean([p["tokens_per_s"] for p in pp])
            ideal = _hmean([1 / p["ideal_tpot_s"] for p in pp if p["ideal_tpot_s"]])
            dfw = [p["drafter_forwards"] for p in pp]
            row.update({
                "new_tokens": statistics.mean(p["new_tokens"] for p in pp),
                "ttft_ms": 1e3 * statistics.mean(p["ttft_s"] for p in pp),
                "tpot_ms": 1e3 * (_hmean([p["tpot_s"] for p in pp]) or float("nan")),
                "tokens_per_s": tps,
                "tau": pooled.mean_accepted_length,
                "draft_acceptance_rate": pooled.draft_acceptance_rate,
                "verified_acceptance_rate": pooled.verified_acceptance_rate,
                "per_position_acceptance": [round(a, 4) for a in pooled.per_position_acceptance],
                "target_forwards_per_token": sum(p["target_forwards"] for p in pp) / tokens,
                "drafter_forwards_per_token": sum(dfw) / tokens if None not in dfw else None,
                "ideal_tokens_per_s": ideal,
                "efficiency": tps / ideal if tps and ideal else None,
                "outside_forwards": _median_or_none([p["outside_forwards"] for p in pp]),
                "cpu_efficiency": sum(p["ideal_cpu_s"] for p in pp) / sum(p["cpu_s"] for p in pp),
                "deterministic": all(p["same_tokens_across_repeats"] for p in pp),
            })
        rows.append(row)
    _relative(rows, per_prompt, keep)
    return rows


def _relative(rows: list[dict], per_prompt: list[dict], keep: set) -> None:
    """Speedup against hsd's AR (and the peer's own AR), hsd's tokens/s over the peer's for the same
    algorithm, and greedy token identity with hsd's AR."""
    def tokens(t, label):
        return {p["prompt"]: p["token_ids"] for p in per_prompt if p["temperature"] == t and p["row"] == label}

    for row in rows:
        t = row["temperature"]
        by = {r["algorithm"]: r for r in rows if r["temperature"] == t}
        for key, base in (("speedup", "ar"), ("speedup_vs_own_ar", "hf-ar" if row["implementation"] == "transformers" else "ar")):
            b = by.get(base, {}).get("tokens_per_s")
            row[key] = row["tokens_per_s"] / b if row.get("tokens_per_s") and b else None
        spec = ALGORITHMS.get(row["algorithm"])
        peer = by.get(spec.peer if spec else None, {}).get("tokens_per_s")
        row["vs_transformers"] = row["tokens_per_s"] / peer if row.get("tokens_per_s") and peer else None
        if t == 0 and row["algorithm"] != "ar" and "tokens_per_s" in row:
            ref, mine = tokens(0, "ar"), tokens(0, row["algorithm"])
            same = sum(ref.get(i) == mine.get(i) for i in keep if i in mine)
            row["greedy_equals_ar"] = f"{same}/{len([i for i in keep if i in mine])}" if ref else ""


# --------------------------------------------------------------------------------------------- scale curve

def scale_prompt(pair: Pair, texts: list[str], n_tokens: int) -> str:
    """A prompt of about ``n_tokens`` target tokens, cut from the concatenated prompt texts."""
    tok = pair.target.tokenizer
    ids: list[int] = []
    while len(ids) < n_tokens:
        ids += tok("\n\n".join(texts), add_special_tokens=False)["input_ids"]
    return tok.decode(ids[:n_tokens])


def run_scale(pair: Pair, prompts: list[str], cfg: BenchConfig, new_tokens: list[int], prompt_tokens: list[int],
              log=print) -> list[dict]:
    """Per-token time against max new tokens (first prompt) and against prompt length (fixed new tokens)."""
    limit = pair.target.context_length or 10**9
    base_len = len(encode_prompt(pair.target, prompts[0], None)[0])
    fit = sorted({min(n, limit - base_len) for n in new_tokens if limit - base_len > 0})  # capped at the context
    points = [("max_new_tokens", n, prompts[0], n) for n in fit]
    points += [("prompt_tokens", L, scale_prompt(pair, prompts, L), cfg.max_new_tokens)
               for L in prompt_tokens if L + cfg.max_new_tokens <= limit]
    t = cfg.temperatures[0]
    out = []
    try:
        for label in cfg.algorithms:
            _run_once(pair, None, label, prompts[0], [], cfg, t, cfg.seed, 16)  # warm-up
            for axis, x, prompt, n in points:
                reps = [_run_once(pair, None, label, prompt, [], cfg, t, cfg.seed, n)["metrics"]
                        for _ in range(cfg.repeats)]
                tpot = statistics.median(r.tpot_s or float("nan") for r in reps)
                out.append({"algorithm": label, "temperature": t, "axis": axis, "x": x,
                            "new_tokens": reps[0].new_tokens, "tau": reps[0].mean_accepted_length,
                            "tpot_ms": tpot * 1e3,
                            "tokens_per_s": 1 / tpot if tpot == tpot else None,
                            "ttft_ms": 1e3 * statistics.median(r.ttft_s for r in reps)})
            log(f"  scale {label} done")
    except KeyboardInterrupt:  # a time limit: keep the points measured so far
        log(f"  scale interrupted after {len(out)} points")
    return out
