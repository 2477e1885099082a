"""Benchmark outputs: the printed / markdown table, CSV files and plotly figures (HTML, PNG when it works).

Every output carries the machine line (:func:`hsd.bench.machine_line`).
"""

from __future__ import annotations

import csv
import json
import logging
from pathlib import Path

#: (column, header, format) of the printed and markdown table
TABLE = [
    ("temperature", "T", "g"), ("algorithm", "algorithm", "s"), ("prompts", "n", "d"),
    ("new_tokens", "new tok", ".0f"), ("ttft_ms", "TTFT ms", ".1f"), ("tpot_ms", "TPOT ms", ".2f"),
    ("tokens_per_s", "tok/s", ".1f"), ("speedup", "speedup", ".2f"), ("speedup_vs_own_ar", "vs own AR", ".2f"),
    ("vs_transformers", "vs HF", ".2f"), ("tau", "τ", ".2f"),
    ("acceptance_rate", "accept", ".1%"), ("target_forwards_per_token", "tgt fw/tok", ".2f"),
    ("drafter_forwards_per_token", "drf fw/tok", ".2f"), ("ideal_tokens_per_s", "ideal tok/s", ".1f"),
    ("efficiency", "efficiency", ".2f"), ("cpu_efficiency", "CPU eff.", ".2f"), ("outside_forwards", "outside fw", ".0%"), ("greedy_equals_ar", "= AR", "s"), ("note", "note", "s"),
]


def _fmt(value, spec: str) -> str:
    if value is None or value == "" or (isinstance(value, float) and value != value):
        return "-"
    return format(value, spec) if spec != "s" else str(value)


def markdown_table(rows: list[dict], columns=TABLE) -> str:
    used = [c for c in columns if any(r.get(c[0]) not in (None, "") for r in rows)]
    lines = ["| " + " | ".join(h for _, h, _ in used) + " |", "|" + "---|" * len(used)]
    for r in rows:
        lines.append("| " + " | ".join(_fmt(r.get(k), f).replace("|", "/") for k, _, f in used) + " |")
    return "\n".join(lines)


def write_csv(rows: list[dict], path: Path) -> None:
    """Rows as CSV; lists (per-position acceptance) as JSON in their cell."""
    columns = list(dict.fromkeys(k for r in rows for k in r))
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, columns)
        writer.writeheader()
        for r in rows:
            writer.writerow({k: json.dumps(v) if isinstance(v, (list, dict)) else v for k, v in r.items()})


def figures(report: dict) -> dict:
    """Plotly figures of a bench report: throughput vs the limit, and acceptance per position."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    from .bench import machine_line

    rows = [r for r in report["rows"] if r.get("tokens_per_s")]
    title = f"{Path(report['pair']['target']).name} ← {Path(str(report['pair']['drafter'])).name}"
    sub = f"<br><sup>{machine_line(report['machine'])}</sup>"
    temps = sorted({r["temperature"] for r in rows})
    fig = make_subplots(1, len(temps), subplot_titles=[f"T = {t:g}" for t in temps], shared_yaxes=True)
    for j, t in enumerate(temps, 1):
        rr = [r for r in rows if r["temperature"] == t]
        names = [r["algorithm"] for r in rr]
        fig.add_bar(x=names, y=[r["tokens_per_s"] for r in rr], name="measured", marker_color="#1f77b4",
                    text=[f"{r['speedup']:.2f}×" if r.get("speedup") else "" for r in rr], textposition="outside",
                    showlegend=j == 1, row=1, col=j)
        fig.add_bar(x=names, y=[r.get("ideal_tokens_per_s") for r in rr], name="ideal (forwards only)",
                    marker_color="#aec7e8", showlegend=j == 1, row=1, col=j)
    fig.update_layout(title=f"Output tokens/s (harmonic mean), speedup over hsd AR: {title}{sub}",
                      yaxis_title="tokens/s", barmode="group", height=460)
    acc = go.Figure()
    for r in rows:
        if r.get("per_position_acceptance"):
            acc.add_scatter(x=list(range(1, len(r["per_position_acceptance"]) + 1)), y=r["per_position_acceptance"],
                            mode="lines+markers", name=f"{r['algorithm']} T={r['temperature']:g}")
    acc.update_layout(title=f"Share of rounds proposing ≥ i tokens whose first i were all accepted: {title}{sub}",
                      xaxis_title="draft position i", yaxis_title="accepted through i", yaxis_range=[0, 1.05],
                      height=420)
    return {"throughput": fig, "acceptance": acc}


def scale_figure(points: list[dict], report: dict):
    from plotly.subplots import make_subplots

    from .bench import machine_line

    fig = make_subplots(1, 2, subplot_titles=["against max new tokens", "against prompt length (target tokens)"])
    algorithms = list(dict.fromkeys(p["algorithm"] for p in points))
    for j, axis in enumerate(("max_new_tokens", "prompt_tokens"), 1):
        for k, a in enumerate(algorithms):
            pts = [p for p in points if p["axis"] == axis and p["algorithm"] == a]
            fig.add_scatter(x=[p["x"] for p in pts], y=[p["tpot_ms"] for p in pts], mode="lines+markers", name=a,
                            legendgroup=a, showlegend=j == 1, line_color=f"hsl({k * 67 % 360},60%,45%)", row=1, col=j)
    fig.update_xaxes(type="log")
    fig.update_yaxes(title_text="TPOT ms (median)", row=1, col=1)
    fig.update_layout(title=f"Per-token time vs length<br><sup>{machine_line(report['machine'])}</sup>", height=440)
    return fig


def save_figure(fig, path: Path, png: bool) -> list[str]:
    """Write ``path``.html, and ``path``.png if asked and image export works (kaleido + a Chrome)."""
    fig.write_html(path.with_suffix(".html"), include_plotlyjs="cdn")
    written = [path.with_suffix(".html").name]
    if png:
        logging.getLogger("choreographer").setLevel(logging.CRITICAL)  # kaleido's browser chatter
        try:
            fig.write_image(path.with_suffix(".png"), width=1100, height=fig.layout.height or 450, scale=1)
            written.append(path.with_suffix(".png").name)
        except Exception as exc:  # kaleido missing, or no Chrome it can drive: HTML only
            print(f"  PNG export unavailable ({type(exc).__name__}: {str(exc).splitlines()[0][:120]}); HTML only")
    return written


def _markdown(report: dict) -> str:
    from .bench import machine_line

    cfg = report["config"]
    md = [f"**Machine:** {machine_line(report['machine'])}", "",
          f"**Pair:** `{report['pair']['target']}` ← `{report['pair']['drafter']}`; prompts `{cfg['prompts']}` "
          f"({cfg['num_prompts']}), max_new_tokens {cfg['max_new_tokens']}, lookahead {cfg['lookahead']}, "
          f"{cfg['warmups']} warm-up(s) per row, median of {cfg.get('completed_repeats', cfg['repeats'])} repeats, "
          f"seed {cfg['seed']}+prompt index", "",
          markdown_table(report["rows"]), "",
          "Per-forward costs (median ms of single forwards, KV cache holding "
          f"{report['costs']['context']} tokens; wall clock): " + ", ".join(
              f"{k[:-3]} {v:.3f}" for k, v in report["costs"].items() if k.endswith("_ms") and "_cpu" not in k
              and v is not None), "",
          "The same in thread CPU time: " + ", ".join(
              f"{k[:-7]} {v:.3f}" for k, v in report["costs"].items() if k.endswith("_cpu_ms") and v is not None), "",
          "Acceptance per draft position: " + "; ".join(
              f"{r['algorithm']} T={r['temperature']:g}: " + " ".join(f"{a:.2f}" for a in r["per_position_acceptance"])
              for r in report["rows"] if r.get("per_position_acceptance"))]
    if report.get("scale"):
        md += ["", markdown_table(report["scale"], [("algorithm", "algorithm", "s"), ("axis", "axis", "s"),
                                                    ("x", "x", "d"), ("new_tokens", "new tok", "d"),
                                                    ("tau", "τ", ".2f"),
                                                    ("tpot_ms", "TPOT ms", ".2f"), ("ttft_ms", "TTFT ms", ".1f")])]
    return "\n".join(md) + "\n"


def write_report(report: dict, out: Path, png: bool = True) -> list[str]:
    """Tables first (CSV, JSON, markdown), figures last: a run cut short after the data still leaves it."""
    out.mkdir(parents=True, exist_ok=True)
    write_csv(report["rows"], out / "results.csv")
    write_csv([{k: v for k, v in p.items() if k not in ("token_ids", "round_counts")} for p in report["per_prompt"]],
              out / "per_prompt.csv")
    (out / "report.json").write_text(json.dumps(report, indent=1, default=str), encoding="utf-8")
    (out / "results.md").write_text(_markdown(report), encoding="utf-8")
    written = ["results.csv", "per_prompt.csv", "report.json", "results.md"]
    if report.get("scale"):
        write_csv(report["scale"], out / "scale.csv")
        written.append("scale.csv")
    try:
        import plotly  # noqa: F401
    except ImportError:
        print("  plotly is not installed: no figures")
        return written
    for name, fig in figures(report).items():
        written += save_figure(fig, out / name, png)
    if report.get("scale"):
        written += save_figure(scale_figure(report["scale"], report), out / "scale", png)
    return written
