"""Benchmark outputs: the printed / markdown table, CSV files, and the figures of :mod:`hsd.figures` as HTML (and
PNG when it works).

Every output carries the machine line (:func:`hsd.machine.machine_line`).
"""

from __future__ import annotations

import csv
import json
import logging
from pathlib import Path

from .machine import machine_line

#: (column, header, format) of the printed and markdown table
TABLE = [
    ("temperature", "T", "g"), ("algorithm", "algorithm", "s"), ("prompts", "n", "d"),
    ("new_tokens", "new tok", ".0f"), ("ttft_ms", "TTFT ms", ".1f"), ("tpot_ms", "TPOT ms", ".2f"),
    ("tokens_per_s", "tok/s", ".1f"), ("speedup", "speedup", ".2f"), ("speedup_vs_own_ar", "vs own AR", ".2f"),
    ("vs_transformers", "vs HF", ".2f"), ("tau", "τ", ".2f"),
    ("verified_acceptance_rate", "acc/verified", ".1%"), ("draft_acceptance_rate", "acc/proposed", ".1%"), ("target_forwards_per_token", "tgt fw/tok", ".2f"),
    ("drafter_forwards_per_token", "drf fw/tok", ".2f"), ("ideal_tokens_per_s", "ideal tok/s", ".1f"),
    ("efficiency", "efficiency", ".2f"), ("cpu_efficiency", "CPU eff.", ".2f"),
    ("outside_forwards", "outside forwards", ".0%"), ("greedy_equals_ar", "= AR", "s"), ("note", "note", "s"),
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
    """The benchmark's plotly figures (:func:`hsd.figures.bench_figures`)."""
    from .figures import bench_figures

    return bench_figures(report)


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
        from .figures import scale_figure

        written += save_figure(scale_figure(report["scale"], machine_line(report["machine"])), out / "scale", png)
    return written
