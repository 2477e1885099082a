"""Measure SLRS against SLEM and TLI: acceptance, τ, drafter forwards per token, tokens/s, ψ cost.

Same prompts, seeds and settings for every algorithm. Pairs: the embedded tiny-code target with
each of its drafters (when ``assets/tiny-code`` holds the models), and the test suite's bigram and
random-weight pairs (built from local text, as in ``tests/``). Prints Markdown tables for
``docs/slrs.md``; ``--json`` writes the raw numbers.

    python scripts/slrs_bench.py --pairs tiny-code tiny-code-bytes --max-new-tokens 48 --seeds 3
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

import hsd  # noqa: E402

CODE_PROMPTS = ["def fib(n):", "import os\n\nclass Config:\n    def __init__(self, path):\n",
                "    for i, line in enumerate(lines):\n", "# Parse the command line\nparser = "]


def load(name: str) -> hsd.Pair:
    if name in hsd.PRESETS:
        return hsd.load_pair(preset=name, device="cpu")
    from builders import byte_tokenizer, bytelevel_tokenizer, correlated_bigrams, tiny_llama
    from pairs import bigram, heterogeneous

    if name == "bigram-bpe<-bytes":
        bpe, tok = bytelevel_tokenizer(), byte_tokenizer()
        target, drafter = correlated_bigrams(bpe, tok, seed=7)
        return hsd.Pair.from_models(target, bpe, drafter, tok)
    if name == "llama-bpe<-bytes":
        bpe, tok = bytelevel_tokenizer(), byte_tokenizer()
        return hsd.Pair.from_models(tiny_llama(bpe, 0, layers=2), bpe, tiny_llama(tok, 5), tok)
    if name.startswith("bigram-"):
        return bigram(name[len("bigram-"):])
    return heterogeneous(name[len("llama-"):])


def run(pair, algorithm, prompts, seeds, settings) -> dict:
    """Totals over prompts x seeds; ``None`` values when SLRS hit a limit."""
    agg = defaultdict(float)
    per_len = defaultdict(list)  # target-token byte length -> paths per psi
    for prompt in prompts:
        for seed in range(seeds):
            try:
                res = hsd.generate(pair, prompt, algorithm=algorithm, seed=seed, **settings)
            except hsd.ResourceLimitError as exc:
                return {"error": str(exc).split(".")[0]}
            m = res.metrics
            total = m["total_s"] - m["prefill_s"]
            for key, value in (("tokens", m["new_tokens"]), ("rounds", m["rounds"]), ("proposed", m["proposed"]),
                               ("accepted", m["accepted"]), ("drafter_forwards", m["drafter_forwards"]),
                               ("seconds", total), ("psi_paths", m.get("psi_paths", 0)),
                               ("psi_forwards", m.get("psi_forwards", 0)), ("psi_seconds", m.get("psi_seconds", 0)),
                               ("psi_evaluations", m.get("psi_evaluations", 0))):
                agg[key] += value
            for rnd in res.rounds:
                for slot in rnd.extra.get("slrs_positions", []):
                    for t, n in slot["paths_per_psi"]:
                        b = pair.target.vocab.tokens[t] if t >= 0 else None
                        per_len[len(b) if b else 0].append(n)
    out = {
        "acceptance_rate": agg["accepted"] / agg["proposed"] if agg["proposed"] else None,
        "tau": agg["tokens"] / agg["rounds"],
        "drafter_forwards_per_token": agg["drafter_forwards"] / agg["tokens"],
        "tokens_per_s": agg["tokens"] / agg["seconds"],
        "tokens": agg["tokens"],
    }
    if agg["psi_evaluations"]:
        all_paths = [n for v in per_len.values() for n in v]
        out.update(psi_paths_mean=statistics.mean(all_paths), psi_paths_max=max(all_paths),
                   psi_forwards_per_round=agg["psi_forwards"] / agg["rounds"],
                   psi_time_share=agg["psi_seconds"] / agg["seconds"],
                   paths_by_token_bytes={k: (len(v), statistics.mean(v), max(v)) for k, v in sorted(per_len.items())})
    return out


def psi_cost(pair, prompt: str, per_length: int = 4, max_length: int = 12, temperature: float = 1.0) -> dict:
    """Cost of one ψ(t), from scratch (no memo), for target tokens of each byte length, after ``prompt``."""
    from hsd.algorithms import slrs
    from hsd.psi import Enumerator, Proposer
    from hsd.sampling import Sampling
    from hsd.session import DrafterContext
    from hsd.trie import drafter_trie, target_trie

    d = DrafterContext(pair.drafter, pair.drafter.tokenizer(prompt)["input_ids"])
    d.prefill()
    tt, dt = target_trie(pair.target.vocab, pair.target.n_logits), drafter_trie(pair.drafter.vocab, pair.drafter.n_logits)
    by_length = defaultdict(list)
    for t, b in enumerate(pair.target.vocab.tokens[:pair.target.n_logits]):
        if b and len(b) <= max_length and len(by_length[len(b)]) < per_length and t in tt.node:
            by_length[len(b)].append(t)
    out = {}
    for length, tokens in sorted(by_length.items()):
        rows_paths, rows_fwd, rows_s = [], [], []
        for t in tokens:
            rows = slrs._Rows(d, Sampling(temperature))
            rows.draft(())
            enum = Enumerator(Proposer(tt, dt), rows, max_paths=200_000)
            start = time.perf_counter()
            if enum.psi(t) is None:  # more than 200,000 paths
                rows_paths.append(float("inf"))
                continue
            rows_s.append(time.perf_counter() - start)
            rows_paths.append(enum.paths)
            rows_fwd.append(rows.forwards)
        out[length] = (statistics.mean(rows_paths), max(rows_paths), statistics.mean(rows_fwd or [0]),
                       statistics.mean(rows_s or [0]))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pairs", nargs="+", default=["bigram-bpe<-bytes", "bigram-sp<-bpe", "llama-bpe<-bytes"])
    ap.add_argument("--algorithms", nargs="+", default=["slem", "tli", "slrs"])
    ap.add_argument("--max-new-tokens", type=int, default=48)
    ap.add_argument("--lookahead", type=int, default=5)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--temperature", type=float, default=1.0)
    ap.add_argument("--top-k", type=int, default=0)
    ap.add_argument("--top-p", type=float, default=1.0)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--psi-cost", action="store_true", help="only: cost of one ψ(t) by target-token length")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    if args.psi_cost:
        print("| pair | token bytes | ψ paths mean / max | ψ forwards (batched) | ψ seconds |\n|---|---|---|---|---|")
        for name in args.pairs:
            for length, (mean, top, fwd, sec) in psi_cost(load(name), CODE_PROMPTS[0],
                                                            temperature=args.temperature).items():
                print(f"| {name} | {length} | {mean:.0f} / {top:.0f} | {fwd:.1f} | {sec * 1000:.1f} ms |", flush=True)
        return
    settings = dict(max_new_tokens=args.max_new_tokens, lookahead=args.lookahead, temperature=args.temperature,
                    top_k=args.top_k, top_p=args.top_p)
    results = {}
    print(f"temperature {args.temperature}, top_k {args.top_k}, top_p {args.top_p}, lookahead {args.lookahead}, "
          f"{len(CODE_PROMPTS)} prompts x {args.seeds} seeds, {args.max_new_tokens} new tokens\n")
    print("| pair | algorithm | acceptance | τ | drafter fwd / token | tokens/s | ψ paths mean / max | "
          "ψ fwd / round | ψ time share |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name in args.pairs:
        start = time.perf_counter()
        pair = load(name)
        for algorithm in args.algorithms:
            r = results.setdefault(name, {})[algorithm] = run(pair, algorithm, CODE_PROMPTS, args.seeds, settings)
            if "error" in r:
                print(f"| {name} | {algorithm} | limit: {r['error']} | | | | | | |")
                continue
            psi = (f"{r['psi_paths_mean']:.1f} / {r['psi_paths_max']} | {r['psi_forwards_per_round']:.1f} | "
                   f"{r['psi_time_share']:.0%}") if "psi_paths_mean" in r else "| |"
            print(f"| {name} | {algorithm} | {r['acceptance_rate']:.3f} | {r['tau']:.2f} | "
                  f"{r['drafter_forwards_per_token']:.2f} | {r['tokens_per_s']:.1f} | {psi} |", flush=True)
        print(f"<!-- {name}: {time.perf_counter() - start:.0f} s -->", flush=True)
    for name, by_alg in results.items():
        lengths = by_alg.get("slrs", {}).get("paths_by_token_bytes")
        if lengths:
            print(f"\nψ paths by target-token length, {name}: " + ", ".join(
                f"{k} B: {mean:.1f} (max {top}, n={n})" for k, (n, mean, top) in lengths.items()))
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
