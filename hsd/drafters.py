"""Compare drafters for one target (``python -m hsd drafters``): which drafter, with which algorithm?

For one target, several drafters (preset names, Hub ids or local directories), one prompt set and one
algorithm (or ``"best"``: every drafting algorithm that applies to the pair, and the one with the highest
measured speedup is the drafter's row), :func:`compare_drafters` gives, per drafter:

* the **compatibility summary** (:mod:`hsd.report`): whether the vocabularies are shared, how many byte
  strings they share, how faithfully the drafter's tokenizer round-trips text, and which algorithms apply
  (:func:`hsd.availability`, with the reason for each that does not);
* **``advise``'s prediction** (:mod:`hsd.advise`, calibrated at the comparison's settings on the same
  prompts: its lookahead, drafter temperature and, where it applies, draft threshold): τ and speedup over AR,
  shown beside the measurement, so a user sees how far the model is off;
* the **measurement**, by :func:`hsd.bench.run_each` (AR and each algorithm interleaved, repeated until the
  speedups settle or the time budget is spent), once per prompt: ``draft_acceptance_rate`` (accepted ÷
  proposed target tokens), τ (``mean_accepted_length``: tokens per verification round, bonus included) and
  ``per_position_acceptance``, all pooled over every round of every prompt by :func:`hsd.metrics.summarize`
  and named as :mod:`hsd.metrics` names them; the speedup over AR (each repeat against AR's run of the same
  repeat and prompt; the median over all of them, with its spread); and whether greedy output equals AR's;
* the **drafter cost ratio** ``c = c_draft / c_verify(1)``: one drafter forward over one target forward,
  measured on these models (:mod:`hsd.costs`), the ``c`` of the speculative-decoding speedup formula.

Each drafter is measured against its own interleaved AR, so machine load drifts over a drafter's rows alike;
AR is the same target everywhere, so the drafters' speedups are comparable. :func:`drafters_table` and
:func:`drafters_figure` are pure functions of the result.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .algorithms import ALGORITHMS, availability
from .errors import HsdError, InvalidSettingError
from .options import add_decoding_options

#: the rows of a comparison, as columns (the table's and the CSV's)
COLUMNS = ["drafter", "algorithm", "chosen", "speedup", "speedup spread", "predicted speedup (advise)",
           "draft_acceptance_rate", "τ (mean_accepted_length)", "predicted τ (advise)", "per_position_acceptance",
           "drafter cost ratio", "tokens/s", "AR tokens/s", "greedy = AR", "shared vocabulary", "shared tokens",
           "drafter round-trip", "applicable", "note"]


@dataclass
class Row:
    """One (drafter, algorithm) measurement; ``chosen`` marks the drafter's row (its best, or the one asked for)."""

    drafter: str
    algorithm: str
    chosen: bool = False
    note: str = ""
    draft_acceptance_rate: float | None = None
    mean_accepted_length: float | None = None
    per_position_acceptance: list[float] = field(default_factory=list)
    tokens_per_s: float | None = None
    ar_tokens_per_s: float | None = None
    speedup: float | None = None
    speedup_low: float | None = None
    speedup_high: float | None = None
    speedup_n: int = 0
    noisy: bool = False
    predicted_speedup: float | None = None
    predicted_tau: float | None = None
    greedy_equals_ar: str = ""
    new_tokens: int = 0
    rounds: int = 0


@dataclass
class Entry:
    """One drafter: what was given, what it resolved to, its compatibility, costs, advice and rows."""

    name: str
    path: str
    compatibility: dict = field(default_factory=dict)
    costs: dict = field(default_factory=dict)
    advice: dict | None = None
    rows: list[Row] = field(default_factory=list)
    error: str | None = None
    seconds: float = 0.0

    @property
    def chosen(self) -> Row | None:
        return next((r for r in self.rows if r.chosen), None)


@dataclass
class DrafterComparison:
    """What :func:`compare_drafters` measured: one :class:`Entry` per drafter, in the order given."""

    target: str
    algorithm: str
    settings: dict
    prompts: list[str]
    entries: list[Entry] = field(default_factory=list)
    machine: dict = field(default_factory=dict)
    seconds: float = 0.0

    def to_dict(self) -> dict:
        return asdict(self)


# --------------------------------------------------------------------------------------------- checks

def resolve_target(target: str | None) -> str:
    """A preset name stands for its target; ``None`` for the embedded tiny-code target."""
    from .loading import DEFAULT_PRESET, EMBEDDED, PRESETS

    if target is None or target == "":
        return EMBEDDED[DEFAULT_PRESET][0]
    if target in PRESETS:
        return EMBEDDED[target][0]
    return target


def resolve_drafter(name: str) -> str:
    """A preset name stands for its drafter (``tiny-code-bytes`` → ``assets/tiny-code/drafter-bytes``)."""
    from .loading import EMBEDDED

    return EMBEDDED[name][1] if name in EMBEDDED else name


def check_comparison(target, drafters, prompts, algorithm: str = "best", **settings) -> tuple[str, list[str]]:
    """Every argument of :func:`compare_drafters` checked before a model loads; returns the resolved target
    and drafters. Raises :class:`~hsd.errors.InvalidSettingError` with what to do."""
    from .generate import MAX_LOOKAHEAD, MAX_NEW_TOKENS, _check_int, check_draft_threshold
    from .loading import embedded_path
    from .sampling import Sampling

    if isinstance(drafters, str) or not drafters:
        raise InvalidSettingError("Give a list of drafters to compare (preset names, Hub ids or local directories), "
                                  "e.g. drafters=['assets/tiny-code/drafter', 'assets/tiny-code/drafter-bytes'].")
    names = []
    for d in drafters:
        if not isinstance(d, str) or not d.strip():
            raise InvalidSettingError(f"Drafter {d!r} is not a name: give a preset, a Hub id or a local directory.")
        names.append(resolve_drafter(d.strip()))
    for given, name in zip(drafters, names):
        if name.startswith("assets/") and embedded_path(name) is None:
            raise InvalidSettingError(f"Drafter {given!r}: there is no embedded model {name!r}.")
        if names.count(name) > 1:
            raise InvalidSettingError(f"Drafter {given!r} is listed twice: compare each drafter once.")
    target = resolve_target(target)
    if target.startswith("assets/") and embedded_path(target) is None:
        raise InvalidSettingError(f"There is no embedded model {target!r} to use as the target.")
    if algorithm != "best":
        if algorithm not in ALGORITHMS:
            raise InvalidSettingError(f"Unknown algorithm {algorithm!r}: choose 'best' or one of "
                                      f"{', '.join(a for a, s in ALGORITHMS.items() if s.needs_drafter)}.")
        if not ALGORITHMS[algorithm].needs_drafter:
            raise InvalidSettingError(f"algorithm={algorithm!r} uses no drafter: every drafter is measured against "
                                      "it anyway. Choose 'best' or a drafting algorithm.")
    if isinstance(prompts, str) or not prompts or not all(isinstance(p, str) and p for p in prompts):
        raise InvalidSettingError("Give a non-empty list of prompt texts (or a prompt set: hsd.bench.load_prompts).")
    Sampling(settings.get("temperature", 0.0), settings.get("top_k", 0), settings.get("top_p", 1.0))
    if settings.get("drafter_temperature") is not None:
        try:
            Sampling(settings["drafter_temperature"], settings.get("top_k", 0), settings.get("top_p", 1.0))
        except InvalidSettingError as exc:
            raise InvalidSettingError(f"drafter_temperature: {exc}") from None
    check_draft_threshold(settings.get("draft_threshold", 0.0))
    _check_int("lookahead", settings.get("lookahead", 5), 1, MAX_LOOKAHEAD, "drafted tokens per round")
    _check_int("max_new_tokens", settings.get("max_new_tokens", 64), 1, MAX_NEW_TOKENS, "tokens to generate")
    _check_int("min_repeats", settings.get("min_repeats", 2), 1, 1000, "interleaved repeats per prompt")
    _check_int("max_repeats", settings.get("max_repeats", 4), settings.get("min_repeats", 2), 1000,
               "interleaved repeats per prompt (at least min_repeats)")
    budget = settings.get("budget_s", 30.0)
    if not isinstance(budget, (int, float)) or isinstance(budget, bool) or not budget > 0:
        raise InvalidSettingError(f"budget_s={budget!r}: give the seconds each prompt's repeats may take (> 0).")
    return target, names


# --------------------------------------------------------------------------------------------- the run

def compatibility_summary(pair) -> dict:
    """The compatibility report's headline (:mod:`hsd.report`), without SLRS's path count: whether the
    vocabularies are shared, the byte strings they share, both tokenizers' round-trip rates, and which
    algorithms apply (with the reason for each that does not)."""
    from .report import bytes_roundtrip_rate, roundtrip_rate

    pv = pair.vocab
    d = pair.drafter.vocab
    why = {name: reason for name, reason in availability(pair).items() if ALGORITHMS[name].needs_drafter}
    return {
        "shared_vocabulary": pv.shared,
        "shared_tokens": pv.intersection_size,
        "shared_share_of_drafter": pv.intersection_size / max(1, len(d) - len(d.special_ids)),
        "target_roundtrip": roundtrip_rate(pair.target.tokenizer)[0],
        "drafter_roundtrip": roundtrip_rate(pair.drafter.tokenizer)[0],
        "drafter_bytes_roundtrip": bytes_roundtrip_rate(pair.drafter.tokenizer, d)[0],
        "drafter_tokens": len(d),
        "applicable": [a for a, reason in why.items() if reason is None],
        "not_applicable": {a: reason for a, reason in why.items() if reason is not None},
    }


def _measure(pair, algorithms: list[str], prompts: list[str], settings: dict, repeats: dict, label: str):
    """:func:`hsd.bench.run_each` once per prompt; yields its progress lines, then the rows' raw numbers."""
    from .bench import run_each

    per_prompt = []
    for i, prompt in enumerate(prompts):
        kw = {**settings, "prompt": prompt, "seed": settings.get("seed", 0) + i}
        for item in run_each(pair, algorithms, **repeats, **kw):
            if isinstance(item, str):
                yield f"{label}, prompt {i + 1}/{len(prompts)}: {item}"
        per_prompt.append(item)
    yield per_prompt


def _row(drafter: str, name: str, per_prompt: list) -> Row:
    from .metrics import Metrics, round_counts, spread, summarize

    row = Row(drafter, name)
    failed = [c.failed[name] for c in per_prompt if name in c.failed]
    if failed:
        row.note = failed[0]
        return row
    results = [c.results[name] for c in per_prompt]
    pooled = summarize([c for r in results for c in round_counts(r.rounds, ALGORITHMS[name].ideal_drafted)])
    row.new_tokens, row.rounds = pooled.new_tokens, pooled.rounds
    row.draft_acceptance_rate = pooled.draft_acceptance_rate
    row.mean_accepted_length = pooled.mean_accepted_length
    row.per_position_acceptance = [round(a, 4) for a in pooled.per_position_acceptance]
    metrics = [Metrics.of(r.metrics) for r in results]
    tps = [m.tokens_per_s for m in metrics if m.tokens_per_s]
    row.tokens_per_s = statistics.harmonic_mean(tps) if tps else None
    ar_tps = [Metrics.of(c.results["ar"].metrics).tokens_per_s for c in per_prompt if "ar" in c.results]
    ar_tps = [t for t in ar_tps if t]
    row.ar_tokens_per_s = statistics.harmonic_mean(ar_tps) if ar_tps else None
    s = spread([v for c in per_prompt for v in c.speedup.get(name, [])])
    if s is not None:
        row.speedup, row.speedup_low, row.speedup_high, row.speedup_n = s.median, s.low, s.high, s.n
    # noisy: some prompt's repeats disagree too much to trust (or ran once), not prompts differing from each other
    row.noisy = any(name in c.noisy() for c in per_prompt)
    return row


def _greedy_identity(rows: list[Row], per_prompt: list, temperature: float) -> None:
    if temperature != 0:
        return
    for row in rows:
        if row.note:
            continue
        same = [c.results[row.algorithm].token_ids == c.results["ar"].token_ids for c in per_prompt
                if "ar" in c.results and row.algorithm in c.results]
        row.greedy_equals_ar = f"{sum(same)}/{len(same)}" if same else ""


def _threshold(algorithm: str, draft_threshold: float) -> float | None:
    """The draft threshold ``algorithm`` runs with (``None``: a fixed lookahead), as advise's rows record it."""
    return draft_threshold if draft_threshold and ALGORITHMS[algorithm].dynamic_lookahead else None


def compare_drafters(target: str | None, drafters: list[str], prompts: list[str], algorithm: str = "best", *,
                     temperature: float = 0.0, top_k: int = 0, top_p: float = 1.0, lookahead: int = 5,
                     max_new_tokens: int = 64, seed: int = 0, drafter_temperature: float | None = None,
                     draft_threshold: float = 0.0, min_repeats: int = 2, max_repeats: int = 4,
                     budget_s: float = 30.0, predict: bool = True, device: str = "auto", dtype: str = "auto",
                     trust_remote_code: bool = False):
    """Measure each drafter for ``target`` on ``prompts``; yields progress lines, then a :class:`DrafterComparison`.

    ``algorithm``: ``"best"`` measures every drafting algorithm that applies to each pair and marks the one
    with the highest measured speedup; a name measures that one (a drafter it does not apply to gets a row
    that says why). ``drafter_temperature`` and ``draft_threshold`` are :func:`hsd.generate`'s (the drafter's
    own temperature; a dynamic lookahead for SD, SLEM and TLI). ``predict``: also run ``advise``'s calibration
    at these settings for the prediction beside each measurement. ``min_repeats``, ``max_repeats`` and
    ``budget_s`` bound :func:`hsd.bench.run_each` per prompt. A drafter that fails to load gets an entry with its
    error; a target that fails to load raises.
    """
    from .costs import measure_costs
    from .generate import encode_prompt
    from .loading import load_pair
    from .machine import machine_info

    settings = dict(temperature=temperature, top_k=top_k, top_p=top_p, lookahead=lookahead,
                    max_new_tokens=max_new_tokens, seed=seed, drafter_temperature=drafter_temperature,
                    draft_threshold=draft_threshold)
    repeats = dict(min_repeats=min_repeats, max_repeats=max_repeats, budget_s=budget_s)
    target, paths = check_comparison(target, drafters, prompts, algorithm, **settings, **repeats)
    load = dict(device=device, dtype=dtype, trust_remote_code=trust_remote_code)
    out = DrafterComparison(target, algorithm, {**settings, **repeats, "predict": predict}, list(prompts))
    start = time.perf_counter()
    yield f"Loading the target {target}…"
    base = load_pair(target, None, **load)  # a target that does not load ends the comparison here
    out.machine = machine_info(base)
    ids = [encode_prompt(base.target, p, None)[0] for p in prompts]
    context = int(statistics.mean(len(i) for i in ids) + max_new_tokens / 2)
    for n, (given, path) in enumerate(zip(drafters, paths)):
        label = f"drafter {n + 1}/{len(paths)} ({given})"
        entry = Entry(given, path)
        out.entries.append(entry)
        t0 = time.perf_counter()
        yield f"Loading {label}…"
        try:
            pair = load_pair(target, path, **load)
        except HsdError as exc:
            entry.error = str(exc)
            yield f"{label} cannot be used: {exc}"
            continue
        entry.compatibility = compat = compatibility_summary(pair)
        if algorithm == "best":
            algorithms = compat["applicable"]
        else:
            algorithms = [algorithm] if algorithm in compat["applicable"] else []
            if not algorithms:
                entry.rows.append(Row(given, algorithm, chosen=True,
                                      note=f"not applicable: {compat['not_applicable'].get(algorithm)}"))
        if predict and algorithms:
            yield from _advise(entry, pair, prompts, algorithms, label, settings)
        else:
            _costs(entry, measure_costs(pair, context, 2, 15, ids[0])[0].to_dict())
        if algorithms:
            yield from _measure_entry(entry, pair, algorithms, prompts, settings, repeats, label)
        entry.seconds = time.perf_counter() - t0
        chosen = entry.chosen
        left = len(paths) - n - 1
        # the time left, from the drafters measured so far (a drafter that did not load took no time to speak of)
        spent = [e.seconds for e in out.entries if e.seconds]
        eta = f"; about {statistics.mean(spent) * left:.0f} s left for {left} more" if left and spent else ""
        if chosen is not None and chosen.speedup is not None:
            acceptance = chosen.draft_acceptance_rate
            yield (f"{label} measured in {entry.seconds:.0f} s: {chosen.algorithm} {chosen.speedup:.2f}× AR, "
                   f"draft_acceptance_rate {acceptance if acceptance is not None else float('nan'):.2f}, "
                   f"τ {chosen.mean_accepted_length:.2f}{eta}")
    out.seconds = time.perf_counter() - start
    yield out


def _advise(entry: Entry, pair, prompts: list[str], algorithms: list[str], label: str, settings: dict):
    """``advise``'s calibration of ``algorithms`` on the pair at the comparison's settings: the prediction beside
    each measurement (``entry.advice``) and the forward costs (``entry.costs``); yields its progress lines."""
    from .advise import advise_steps

    threshold = settings["draft_threshold"]
    for item in advise_steps(pair, prompts, temperature=settings["temperature"], algorithms=algorithms,
                             max_new_tokens=settings["max_new_tokens"], seed=settings["seed"],
                             lookaheads=[settings["lookahead"]], draft_thresholds=(threshold,) if threshold else (),
                             dynamic_lookahead=settings["lookahead"],
                             drafter_temperature=settings["drafter_temperature"]):
        if isinstance(item, str):
            yield f"{label}, advise: {item}"
    entry.advice = {p["algorithm"]: {"tau": p["tau"], "speedup": p["speedup"]} for p in item["predictions"]
                    if p["draft_threshold"] == _threshold(p["algorithm"], threshold)}
    _costs(entry, item["costs"])


def _costs(entry: Entry, costs: dict) -> None:
    entry.costs = {"draft_ms": costs["draft_ms"], "verify_1_ms": costs["verify_1_ms"],
                   "cost_ratio": costs["draft_ms"] / costs["verify_1_ms"] if costs.get("verify_1_ms") else None}


def _measure_entry(entry: Entry, pair, algorithms: list[str], prompts: list[str], settings: dict, repeats: dict,
                   label: str):
    """Each of ``algorithms`` against AR on every prompt (:func:`_measure`): one row per algorithm in ``entry.rows``,
    with advise's prediction beside it and the fastest measured one chosen; yields progress lines."""
    for item in _measure(pair, algorithms, prompts, settings, repeats, label):
        if isinstance(item, str):
            yield item
    per_prompt = item
    rows = [_row(entry.name, a, per_prompt) for a in algorithms]
    _greedy_identity(rows, per_prompt, settings["temperature"])
    for r in rows:
        pred = (entry.advice or {}).get(r.algorithm)
        if pred:
            r.predicted_speedup, r.predicted_tau = pred["speedup"], pred["tau"]
    measured = [r for r in rows if r.speedup is not None]
    best = max(measured, key=lambda r: r.speedup) if measured else (rows[0] if rows else None)
    if best is not None:
        best.chosen = True
    entry.rows = rows


def run_comparison(*args, log=print, **kwargs) -> DrafterComparison:
    """:func:`compare_drafters` with its progress lines sent to ``log``; returns the result."""
    for item in compare_drafters(*args, **kwargs):
        if isinstance(item, str):
            log(item)
    return item


# --------------------------------------------------------------------------------------------- views

def _r(x, d=3):
    return None if x is None else round(x, d)


def drafters_table(result: DrafterComparison, all_rows: bool = False):
    """A pandas table, one row per drafter (its chosen algorithm), or with ``all_rows`` one per
    (drafter, algorithm) measured; a drafter that failed to load gets a row with its error."""
    import pandas as pd

    rows = []
    for e in result.entries:
        c = e.compatibility
        common = {"drafter": e.name, "drafter cost ratio": _r((e.costs or {}).get("cost_ratio")),
                  "shared vocabulary": {True: "yes", False: "no"}.get(c.get("shared_vocabulary"), "—"),
                  "shared tokens": c.get("shared_tokens"), "drafter round-trip": _r(c.get("drafter_roundtrip"), 2),
                  "applicable": " ".join(c.get("applicable", []))}
        if e.error:
            rows.append({**common, "note": f"not loaded: {e.error}"})
            continue
        for r in e.rows if all_rows else [x for x in e.rows if x.chosen]:
            rows.append({**common, "algorithm": r.algorithm, "chosen": "✓" if r.chosen else "",
                         "speedup": _r(r.speedup, 2),
                         "speedup spread": (f"{r.speedup_low:.2f}–{r.speedup_high:.2f} ({r.speedup_n})"
                                            + (" noisy" if r.noisy else "")) if r.speedup is not None else None,
                         "predicted speedup (advise)": _r(r.predicted_speedup, 2),
                         "draft_acceptance_rate": _r(r.draft_acceptance_rate),
                         "τ (mean_accepted_length)": _r(r.mean_accepted_length, 2),
                         "predicted τ (advise)": _r(r.predicted_tau, 2),
                         "per_position_acceptance": " ".join(f"{a:.2f}" for a in r.per_position_acceptance),
                         "tokens/s": _r(r.tokens_per_s, 1), "AR tokens/s": _r(r.ar_tokens_per_s, 1),
                         "greedy = AR": r.greedy_equals_ar, "note": r.note})
    return pd.DataFrame(rows, columns=COLUMNS)


def decoding_text(s: dict) -> str:
    """A comparison's decoding settings in words: temperature, lookahead, and the drafter's temperature and the
    draft threshold where they are set."""
    text = f"temperature {s['temperature']:g}"
    if s.get("drafter_temperature") is not None:
        text += f", drafter temperature {s['drafter_temperature']:g}"
    text += f", lookahead {s['lookahead']}"
    if s.get("draft_threshold"):
        text += f", draft threshold {s['draft_threshold']:g}"
    return text


def format_comparison(result: DrafterComparison) -> str:
    """The table as text for a terminal, with a line on what was run."""
    s = result.settings
    head = (f"target {result.target}; algorithm {result.algorithm}; {len(result.prompts)} prompt(s), "
            f"{s['max_new_tokens']} new tokens, {decoding_text(s)}; {result.seconds:.0f} s")
    table = drafters_table(result)
    keep = ["drafter", "algorithm", "speedup", "predicted speedup (advise)", "draft_acceptance_rate",
            "τ (mean_accepted_length)", "predicted τ (advise)", "drafter cost ratio", "shared tokens",
            "applicable", "note"]
    return head + "\n" + table[keep].to_string(index=False, na_rep="—")


def _short(name: str) -> str:
    """A drafter's name as a figure shows it: a local directory by its last folder, a Hub id as it is."""
    path = Path(name)
    return path.name if path.is_absolute() or name.startswith(("assets/", "./", "../")) else name


def drafters_figure(result: DrafterComparison):
    """Four panels, one bar (or line) per drafter's chosen row, coloured by algorithm: measured speedup over AR
    (with its spread) beside ``advise``'s prediction (hatched), ``draft_acceptance_rate``, τ, and per-position
    acceptance."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    from .figures import _color, _hatched

    chosen = [(e, e.chosen) for e in result.entries if e.chosen is not None and e.chosen.speedup is not None]
    labels = [f"{_short(e.name)}<br>{r.algorithm}" for e, r in chosen]
    colors = [_color(r.algorithm) for _, r in chosen]
    fig = make_subplots(rows=2, cols=2, subplot_titles=(
        "speedup over AR (hatched: advise's prediction)", "draft_acceptance_rate (accepted ÷ proposed)",
        "τ, tokens per target forward (hatched: advise)", "per_position_acceptance"),
        vertical_spacing=0.16, horizontal_spacing=0.08)
    rows = [r for _, r in chosen]
    fig.add_trace(go.Bar(x=labels, y=[r.speedup for r in rows], marker_color=colors, name="measured",
                         error_y=dict(type="data", symmetric=False,
                                      array=[r.speedup_high - r.speedup for r in rows],
                                      arrayminus=[r.speedup - r.speedup_low for r in rows]),
                         showlegend=False), 1, 1)
    fig.add_trace(go.Bar(x=labels, y=[r.predicted_speedup for r in rows], marker=_hatched(colors),
                         name="advise's prediction", showlegend=False), 1, 1)
    fig.add_hline(y=1.0, line_dash="dot", line_color="#6b7280", row=1, col=1)
    fig.add_trace(go.Bar(x=labels, y=[r.draft_acceptance_rate for r in rows], marker_color=colors, showlegend=False),
                  1, 2)
    fig.add_trace(go.Bar(x=labels, y=[r.mean_accepted_length for r in rows], marker_color=colors,
                         showlegend=False), 2, 1)
    fig.add_trace(go.Bar(x=labels, y=[r.predicted_tau for r in rows], marker=_hatched(colors),
                         showlegend=False), 2, 1)
    dashes = ["solid", "dash", "dot", "dashdot", "longdash"]
    for i, ((e, r), c) in enumerate(zip(chosen, colors)):
        fig.add_trace(go.Scatter(x=list(range(1, len(r.per_position_acceptance) + 1)), y=r.per_position_acceptance,
                                 mode="lines+markers", line=dict(color=c, dash=dashes[i % len(dashes)]),
                                 name=f"{_short(e.name)} ({r.algorithm})"), 2, 2)
    fig.update_yaxes(range=[0, 1.05], row=1, col=2)
    fig.update_yaxes(range=[0, 1.05], row=2, col=2)
    fig.update_xaxes(title_text="draft position", row=2, col=2)
    s = result.settings
    fig.update_layout(title=f"Drafters for {Path(result.target).name or result.target} "
                            f"({result.algorithm}, {decoding_text(s)}, {len(result.prompts)} prompt(s))",
                      template="plotly_white", height=720, barmode="group", font=dict(size=13),
                      margin=dict(l=60, r=20, t=90, b=50), legend=dict(orientation="h", y=-0.08))
    return fig


# --------------------------------------------------------------------------------------------- CLI

def add_drafters_parser(sub) -> None:
    """``drafters``: compare drafters for one target (called from :func:`hsd.cli.build_parser`)."""
    p = sub.add_parser("drafters", help="compare drafters for one target: acceptance, τ, speedup, advise's "
                                        "prediction, compatibility; table and CSV")
    p.add_argument("--target", help="target: preset, Hub id or local directory (default: the embedded tiny-code target)")
    p.add_argument("--drafter", action="append", required=True, dest="drafters",
                   help="a drafter to compare (repeat: --drafter A --drafter B); preset, Hub id or local directory")
    p.add_argument("--algorithm", default="best", help="'best' (each drafter's best by measured speedup) or one of "
                   + " ".join(a for a, s in ALGORITHMS.items() if s.needs_drafter))
    p.add_argument("--prompts", default="code", help="prompt set in assets/prompts (code, summarize, long) or a file")
    p.add_argument("--num-prompts", type=int, default=4)
    add_decoding_options(p, max_new_tokens=64)
    p.add_argument("--min-repeats", type=int, default=2, help="interleaved repeats per prompt, at least (1 cannot "
                   "tell noise from a difference)")
    p.add_argument("--max-repeats", type=int, default=4, help="interleaved repeats per prompt, at most")
    p.add_argument("--budget-s", type=float, default=30.0, help="seconds of repeats per prompt and drafter")
    p.add_argument("--no-advise", action="store_true", help="skip advise's calibration (no predicted columns)")
    p.add_argument("--all-rows", action="store_true", help="print every algorithm measured, not only the chosen")
    p.add_argument("--csv", type=Path, help="write every measured row (the chosen ones marked) as CSV")
    p.add_argument("--json", type=Path, help="write the whole comparison as JSON")
    p.add_argument("--html", type=Path, help="write the figure as a self-contained HTML page")
    p.add_argument("--threads", type=int, help="torch intra-op threads")
    p.add_argument("--device", default="auto")
    p.add_argument("--dtype", default="auto", choices=["auto", "float32", "bfloat16", "float16"])
    p.add_argument("--trust-remote-code", action="store_true")
    p.set_defaults(func=cmd_drafters)


def cmd_drafters(args) -> int:
    import json
    import sys

    from .bench import load_prompts
    from .outfiles import check_output_file, write_output
    from .generate import _check_int

    for flag in ("csv", "json", "html"):
        check_output_file(getattr(args, flag), f"--{flag}")
    _check_int("--num-prompts", args.num_prompts, 1, 10**6, "prompts from the set")
    if args.threads is not None:
        _check_int("--threads", args.threads, 1, 4096, "torch intra-op threads")
    prompts = load_prompts(args.prompts, args.num_prompts)
    kw = dict(temperature=args.temperature, top_k=args.top_k, top_p=args.top_p, lookahead=args.lookahead,
              max_new_tokens=args.max_new_tokens, seed=args.seed, drafter_temperature=args.drafter_temperature,
              draft_threshold=args.draft_threshold, min_repeats=args.min_repeats,
              max_repeats=args.max_repeats, budget_s=args.budget_s)
    check_comparison(args.target, args.drafters, prompts, args.algorithm, **kw)  # before any model loads
    from . import threads

    threads.choose(args.threads or "auto")  # --threads, else by the target's size (hsd/threads.py)
    result = run_comparison(args.target, args.drafters, prompts, args.algorithm, predict=not args.no_advise,
                            device=args.device, dtype=args.dtype, trust_remote_code=args.trust_remote_code,
                            log=lambda line: print(line, file=sys.stderr), **kw)
    if args.all_rows:
        print(drafters_table(result, all_rows=True).to_string(index=False, na_rep="—"))
    else:
        print(format_comparison(result))
    code = 0
    if args.csv:
        code |= write_output(args.csv, drafters_table(result, all_rows=True).to_csv(index=False), "--csv")
    if args.json:
        code |= write_output(args.json, json.dumps(result.to_dict(), indent=1, default=str), "--json")
    if args.html:
        code |= write_output(args.html, drafters_figure(result).to_html(include_plotlyjs=True), "--html")
    failed = [e.name for e in result.entries if e.error]
    if failed:  # the table says why; the exit status says that not every drafter was compared
        print(f"error: {len(failed)} of {len(result.entries)} drafter{'s' * (len(result.entries) > 1)} could not be "
              f"compared ({', '.join(failed)}): see the note in its row.", file=sys.stderr)
        return 2
    return code
