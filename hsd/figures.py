"""Every plotly figure hsd draws, on one palette: the app's comparison figures and the benchmark's.

Pure functions from :class:`~hsd.trace.Result` objects (or a ``hsd bench`` report) to figures. An
algorithm keeps its colour everywhere (:attr:`Algorithm.color <hsd.algorithms.contract.Algorithm>`), and a
Transformers peer row (``hf-slem``) takes its algorithm's.
Bars that are a model's number rather than a measurement are hatched.
"""

from __future__ import annotations

import html
import math

import plotly.graph_objects as go

from .algorithms import ALGORITHMS
from .metrics import Metrics, predicted_speedup
from .trace import Result, Round

EXTRA_COLORS = ("#14b8a6", "#84cc16", "#e11d48", "#a855f7", "#0284c7", "#ca8a04")  # algorithms without a colour
SPLIT_COLORS = {"draft": "#0ea5e9", "convert": "#f59e0b", "verify": "#6366f1", "other": "#9ca3af"}


def _esc(text: str) -> str:
    return html.escape(text, quote=True)


# ----------------------------------------------------------------------------- the app's comparison

def _layout(fig: go.Figure, title: str, x: str, y: str) -> go.Figure:
    # type no smaller than 12 px anywhere, on a projector too: a subtitle (<sup>, 70 % of the title) of an 18 px
    # title is 12.6 px, and bar labels keep their size rather than shrink to fit a narrow bar
    fig.update_layout(title=dict(text=title, font=dict(size=18)), xaxis_title=x, yaxis_title=y,
                      template="plotly_white", height=380, margin=dict(l=60, r=20, t=60, b=50),
                      legend=dict(orientation="h", y=-0.2), font=dict(size=14),
                      uniformtext=dict(minsize=12, mode="show"))
    return fig


def _color(name: str) -> str:
    """One colour per algorithm everywhere (the app's figures and the benchmark's); a peer row (``hf-slem``)
    takes its algorithm's colour, an algorithm without one of its own a stable one from ``EXTRA_COLORS``."""
    base = name[3:] if name.startswith("hf-") else name
    spec = ALGORITHMS.get(base)
    if spec is not None and spec.color:
        return spec.color
    return EXTRA_COLORS[sum(base.encode()) % len(EXTRA_COLORS)]


def _mean_per_round(result: Result, key: str) -> float:
    m = Metrics.of(result.metrics)
    return m.time_split_s[key] / max(1, m.rounds)


def predicted(result: Result, ar: Result) -> float | None:
    """Speedup over AR predicted by ``hsd advise``'s model from this run (:func:`hsd.metrics.predicted_speedup`)."""
    return predicted_speedup(result.rounds, ar.rounds)


def _hatched(colors: list[str]) -> dict:
    """The marker of a bar that is a model's number, not a measurement."""
    return dict(color="white", line=dict(color=colors, width=3), pattern=dict(shape="/", fgcolor=colors))


def speedup_figure(results: dict[str, Result], device: str = "", comparison=None) -> go.Figure:
    """Measured speedup over AR (filled bars), and beside each (hatched bars) the speedup ``hsd advise``'s
    model predicts from the same runs' acceptance chain and round times.

    With a :class:`hsd.bench.Comparison` (interleaved repeats), both bars are medians over the repeats, the
    measured one with its spread as an error bar, and where a spread is too large to trust the title says
    so in words."""
    ar = results.get("ar")
    names = [n for n in results if n != "ar"]
    fig = go.Figure()
    if ar is None or not Metrics.of(ar.metrics).tokens_per_s:
        return _layout(fig, "Speedup over AR (needs an AR run)", "algorithm", "× AR tokens/s")
    colors = [_color(n) for n in names]
    error, title = None, "Speedup over AR, measured in this run"
    if comparison is not None and comparison.speedup:
        spreads = [comparison.spread(n) for n in names]
        measured = [s.median if s else 0.0 for s in spreads]
        model = [s.median if (s := comparison.spread(n, "predicted")) else None for n in names]
        error = dict(type="data", symmetric=False, color="#111827", thickness=2, width=8,
                     array=[s.high - s.median if s else 0 for s in spreads],
                     arrayminus=[s.median - s.low if s else 0 for s in spreads])
        title = f"Speedup over AR<br><sup>median of {comparison.repeats} interleaved repeats; whiskers: spread</sup>"
        noisy = [n for n, s in zip(names, spreads) if s is None or s.noisy]
        if noisy:
            worst = max((s for n, s in zip(names, spreads) if n in noisy and s), key=lambda s: s.relative,
                        default=None)
            title = ("Speedup over AR: too noisy to trust<br><sup>"
                     + (f"{names[spreads.index(worst)]}: {worst.low:.2f}×–{worst.high:.2f}× " if worst else "")
                     + f"over {comparison.repeats} repeats</sup>")
        if getattr(comparison, "busy", False):
            title = ("Speedup over AR: the machine was busy<br><sup>this comparison had the CPU "
                     f"{comparison.cpu_share:.0%} of the time</sup>")
    else:
        ar_tps = Metrics.of(ar.metrics).tokens_per_s
        measured = [(Metrics.of(results[n].metrics).tokens_per_s or 0) / ar_tps for n in names]
        model = [predicted(results[n], ar) for n in names]
    fig.add_bar(x=names, y=measured, name="measured", marker_color=colors, error_y=error,
                text=[f"{v:.2f}×" for v in measured], textposition="outside", cliponaxis=False)
    fig.add_bar(x=names, y=model, name="predicted (advise's model)",
                marker=_hatched(colors), text=[f"{v:.2f}×" if v is not None else "" for v in model],
                textposition="outside", cliponaxis=False)
    top = max([1.0, *measured, *(v for v in model if v is not None),
               *((m + e) for m, e in zip(measured, error["array"] if error else []))])
    fig.update_layout(barmode="group")
    fig.update_yaxes(range=[0, top * 1.25])
    fig.add_hline(y=1.0, line_dash="dash", line_color="#6b7280")
    # the line's label sits in the right margin, outside the plot, so it never covers a bar or its number
    fig.add_annotation(x=1.0, xref="paper", xanchor="left", y=1.0, yref="y", text=" AR = 1×", showarrow=False,
                       font=dict(color="#6b7280"))
    title = title + (f"<br><sup>{_esc(device)}</sup>" if device else "")
    fig = _layout(fig, title, "algorithm", "× AR tokens/s")
    fig.update_layout(margin=dict(t=90, r=70))
    return fig


def tokens_time_figure(results: dict[str, Result]) -> go.Figure:
    """Cumulative emitted tokens against wall time since the call started, one line per run."""
    fig = go.Figure()
    for name, res in results.items():
        xs, ys, n = [0.0], [0], 0
        for r in res.rounds:
            n += len(r.emitted)
            xs.append(r.t_end)
            ys.append(n)
        fig.add_scatter(x=xs, y=ys, name=name, mode="lines", line=dict(shape="hv", width=3, color=_color(name)))
    return _layout(fig, "Tokens against wall time", "seconds since the call started", "tokens emitted")


def acceptance_histogram_figure(results: dict[str, Result]) -> go.Figure:
    """Share of rounds that accepted 0, 1, 2, ... drafted tokens."""
    fig = go.Figure()
    for name, res in results.items():
        hist = Metrics.of(res.metrics).acceptance_histogram
        if name == "ar" or not hist or not sum(hist):
            continue
        total = sum(hist)
        fig.add_bar(x=list(range(len(hist))), y=[h / total for h in hist], name=name, marker_color=_color(name))
    fig.update_layout(barmode="group")
    return _layout(fig, "Accepted drafted tokens per round", "accepted in the round", "share of rounds")


def position_acceptance_figure(results: dict[str, Result]) -> go.Figure:
    """Acceptance at draft position i, among rounds that proposed at least i tokens."""
    fig = go.Figure()
    for name, res in results.items():
        per = Metrics.of(res.metrics).per_position_acceptance
        if name == "ar" or not per:
            continue
        fig.add_scatter(x=list(range(1, len(per) + 1)), y=per, name=name, mode="lines+markers",
                        line=dict(width=3, color=_color(name)), marker=dict(size=9))
    fig.update_yaxes(range=[0, 1.05])
    return _layout(fig, "Acceptance by draft position", "position in the draft",
                   "accepted / rounds that proposed it")


def time_split_figure(results: dict[str, Result]) -> go.Figure:
    """Mean milliseconds per round spent drafting, converting, verifying and elsewhere."""
    fig = go.Figure()
    names = list(results)
    for key, color in SPLIT_COLORS.items():
        fig.add_bar(x=names, y=[1000 * _mean_per_round(results[n], key) for n in names], name=key, marker_color=color)
    fig.update_layout(barmode="stack")
    return _layout(fig, "Time per round", "algorithm", "ms per round")


#: a run's rounds plot shows at most this many bars; a longer run is averaged over groups of consecutive rounds
MAX_ROUND_BARS = 80


def rounds_figure(rounds: list[Round], title: str = "Rounds", max_bars: int = MAX_ROUND_BARS) -> go.Figure:
    """One run: time split of every round (stacked bars) and tokens emitted per round (line, right axis). A run of
    more than ``max_bars`` rounds is shown as means over groups of consecutive rounds (the subtitle says how many),
    since hundreds of one-pixel bars show nothing."""
    size = max(1, math.ceil(len(rounds) / max(1, max_bars)))
    groups = [rounds[i:i + size] for i in range(0, len(rounds), size)]
    xs = [(g[0].index + g[-1].index) / 2 for g in groups]
    hover = [f"round {g[0].index}" if len(g) == 1 else f"rounds {g[0].index}–{g[-1].index}" for g in groups]
    fig = go.Figure()
    for key, color in SPLIT_COLORS.items():
        fig.add_bar(x=xs, y=[1000 * sum(getattr(r, "t_" + key) for r in g) / len(g) for g in groups], name=key,
                    marker_color=color, hovertext=hover, width=size * 0.8)
    fig.add_scatter(x=xs, y=[sum(len(r.emitted) for r in g) / len(g) for g in groups], name="tokens emitted",
                    yaxis="y2", mode="lines+markers", line=dict(color="#111827", width=2), hovertext=hover)
    fig.update_layout(barmode="stack", yaxis2=dict(title="tokens", overlaying="y", side="right", rangemode="tozero"))
    if size > 1:
        title += f"<br><sup>{len(rounds)} rounds: each bar the mean of {size} consecutive rounds</sup>"
    fig = _layout(fig, title, "round", "ms" if size == 1 else "ms per round")
    if size > 1:
        fig.update_layout(margin=dict(t=80))
    return fig


# ----------------------------------------------------------------------------- benchmark figures

def bench_figures(report: dict) -> dict[str, go.Figure]:
    """A ``hsd bench`` report: throughput against the limit per temperature, and acceptance per position."""
    from pathlib import Path

    from plotly.subplots import make_subplots

    from .machine import machine_line

    rows = [r for r in report["rows"] if r.get("tokens_per_s")]
    title = f"{Path(report['pair']['target']).name} ← {Path(str(report['pair']['drafter'])).name}"
    sub = f"<br><sup>{machine_line(report['machine'])}</sup>"
    temps = sorted({r["temperature"] for r in rows})
    fig = make_subplots(1, len(temps), subplot_titles=[f"T = {t:g}" for t in temps], shared_yaxes=True)
    for j, t in enumerate(temps, 1):
        rr = [r for r in rows if r["temperature"] == t]
        names = [r["algorithm"] for r in rr]
        colors = [_color(n) for n in names]
        fig.add_bar(x=names, y=[r["tokens_per_s"] for r in rr], name="measured", marker_color=colors,
                    text=[f"{r['speedup']:.2f}×" if r.get("speedup") else "" for r in rr], textposition="outside",
                    showlegend=j == 1, row=1, col=j)
        fig.add_bar(x=names, y=[r.get("ideal_tokens_per_s") for r in rr], name="ideal (forwards only)",
                    marker=_hatched(colors), showlegend=j == 1, row=1, col=j)
    fig.update_layout(title=f"Output tokens/s (harmonic mean), speedup over hsd AR: {title}{sub}",
                      yaxis_title="tokens/s", barmode="group", height=460, template="plotly_white")
    acc = go.Figure()
    for r in rows:
        if r.get("per_position_acceptance"):
            acc.add_scatter(x=list(range(1, len(r["per_position_acceptance"]) + 1)), y=r["per_position_acceptance"],
                            mode="lines+markers", name=f"{r['algorithm']} T={r['temperature']:g}",
                            line=dict(color=_color(r["algorithm"]), dash="solid" if r["temperature"] == 0 else "dot"))
    acc.update_layout(title=f"Share of rounds proposing ≥ i tokens whose first i were all accepted: {title}{sub}",
                      xaxis_title="draft position i", yaxis_title="accepted through i", yaxis_range=[0, 1.05],
                      height=420, template="plotly_white")
    return {"throughput": fig, "acceptance": acc}


def scale_figure(points: list[dict], machine: str = "") -> go.Figure:
    """Per-token time against max new tokens and against prompt length, one line per algorithm."""
    from plotly.subplots import make_subplots

    fig = make_subplots(1, 2, subplot_titles=["against max new tokens", "against prompt length (target tokens)"])
    for j, axis in enumerate(("max_new_tokens", "prompt_tokens"), 1):
        for a in dict.fromkeys(p["algorithm"] for p in points):
            pts = [p for p in points if p["axis"] == axis and p["algorithm"] == a]
            fig.add_scatter(x=[p["x"] for p in pts], y=[p["tpot_ms"] for p in pts], mode="lines+markers", name=a,
                            legendgroup=a, showlegend=j == 1, line_color=_color(a), row=1, col=j)
    fig.update_xaxes(type="log")
    fig.update_yaxes(title_text="TPOT ms (median)", row=1, col=1)
    fig.update_layout(title="Per-token time vs length" + (f"<br><sup>{_esc(machine)}</sup>" if machine else ""),
                      height=440, template="plotly_white")
    return fig
