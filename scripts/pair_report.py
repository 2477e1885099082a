#!/usr/bin/env python3
"""Print a Markdown summary of a train_pair.py run (reads <dir>/train_log.json).

    python scripts/pair_report.py assets/tiny-code

Used to fill the "Results" section of docs/embedded-pair.md after a run.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path


def fmt(v, nd=3):
    return "n/a" if v is None else (f"{v:.{nd}f}" if isinstance(v, float) else str(v))


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    d = Path(argv[0] if argv else "assets/tiny-code")
    log = json.loads((d / "train_log.json").read_text())
    c = log["corpus"]
    out = [f"Run: `{log['command']}` (seed {log['seed']}, preset {log['preset']}, {log['machine']['cpu']}, "
           f"{log['threads']} threads, torch {log['machine']['torch']}), started {log['started']}, "
           f"finished {log.get('finished', '(not finished)')}, {log.get('total_seconds', 0) / 60:.0f} min in total.", "",
           f"Corpus: {c['train_files']} train files ({c['train_chars']:,} chars), {c['heldout_files']} held-out files "
           f"({c['heldout_chars']:,} chars).", "",
           "| tokenizer | vocab | chars/token (held-out) | round-trip exact |", "|---|---|---|---|"]
    for name, t in log["tokenizers"].items():
        out.append(f"| {name} | {t['vocab_size']} | {t['chars_per_token']} | {t['roundtrip_exact']}/{t['roundtrip_docs']} |")
    sh = log["tokenizers_shared"]
    out += ["", f"Token strings shared by the target and drafter vocabularies: {sh['target_drafter_shared_token_strings']} "
            f"(of {sh['target_ordinary']} target / {sh['drafter_ordinary']} drafter ordinary tokens).", "",
            "| model | params | steps | tokens seen | wall min | effective min | held-out nats/token (fp32 / stored fp16) "
            "| bits/char (fp16) | agreement | decode ms |", "|---|---|---|---|---|---|---|---|---|---|"]
    meas = log.get("measurements", {})
    for name in ("target", "drafter", "drafter-bytes"):
        r = log.get(name)
        if not r or "training" not in r:
            continue
        tr, ev = r["training"], r.get("heldout", {})
        params = r.get("model", {}).get("params", "")
        agree = r.get("agreement")
        out.append(
            f"| {name} | {params:,} | {tr['steps']} | {tr['tokens_seen']:,} | {tr['seconds'] / 60:.1f} | "
            f"{tr.get('effective_seconds', tr['seconds']) / 60:.1f} | "
            f"{fmt(ev.get('fp32', {}).get('nats_per_token'))} / {fmt(ev.get('fp16', {}).get('nats_per_token'))} | "
            f"{fmt(ev.get('fp16', {}).get('bits_per_char'))} | "
            f"{'' if not agree else format(agree['agree'] * 100, '.1f') + '%'} | "
            f"{meas.get(name, {}).get('decode_ms', '')} |")
    if "distill" in log:
        ds = log["distill"]
        out += ["", f"Distillation: {ds['samples']} target continuations ({ds['greedy_samples']} greedy), "
                f"{ds['generated_tokens']:,} generated tokens in {ds['seconds'] / 60:.1f} min."]
    if "target" in meas:
        v = meas["target"]["verify_k_plus_1_ms"]
        out += ["", "Target verification cost, k drafted + 1 tokens (ms): "
                + ", ".join(f"k={k}: {ms}" for k, ms in v.items())]
        for name in ("drafter", "drafter-bytes"):
            if name in meas:
                out.append(f"Target/{name} decode-cost ratio: {meas[name].get('target_over_drafter')}")
    print("\n".join(out))


if __name__ == "__main__":
    main()
