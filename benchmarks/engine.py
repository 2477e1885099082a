"""Engine overhead benchmark: tokens/s, speedup over AR in the same run, tau, and the share of round
time spent outside model forwards; plus whether time per round grows with context length.

    python benchmarks/engine.py                       # the embedded tiny-code pair
    python benchmarks/engine.py --target DIR --drafter DIR --algorithms ar slem tli --max-new-tokens 256

Goals: outside-forward share under 10% for slem and tli; time per round flat in context
length (no full re-encoding). Prints numbers; asserts nothing.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402

import hsd  # noqa: E402
from hsd.machine import machine_info, machine_line  # noqa: E402

PROMPTS = [
    "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n",
    "import os\n\n\ndef list_files(path):\n",
    "class Stack:\n    def __init__(self):\n",
    "def parse_args(argv=None):\n    parser = argparse.ArgumentParser(",
]


def run(pair, algorithm, prompts, args):
    results = []
    for prompt in prompts:
        best = None
        for _ in range(args.repeats):
            res = hsd.generate(pair, prompt, algorithm=algorithm, max_new_tokens=args.max_new_tokens,
                               temperature=args.temperature, lookahead=args.lookahead, seed=0)
            if best is None or res.metrics["total_s"] < best.metrics["total_s"]:
                best = res
        results.append(best)
    return results


def summarize(results):
    tps = [r.metrics["tokens_per_s"] for r in results]
    rounds = [rd for r in results for rd in r.rounds]
    quarter = max(1, len(results[0].rounds) // 4)
    early = statistics.mean(rd.seconds for r in results for rd in r.rounds[:quarter])
    late = statistics.mean(rd.seconds for r in results for rd in r.rounds[-quarter:])
    total_round = sum(rd.seconds for rd in rounds)
    forward = sum(rd.forward_seconds for rd in rounds)
    return {
        "tokens_per_s": statistics.harmonic_mean(tps),
        "tau": statistics.mean(r.metrics["mean_accepted_length"] for r in results),
        "acceptance": statistics.mean(r.metrics["draft_acceptance_rate"] or 0 for r in results),
        "outside_forwards": 1 - forward / total_round,
        "round_ms_early": early * 1e3,
        "round_ms_late": late * 1e3,
        "tokens": [r.token_ids for r in results],
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--target")
    parser.add_argument("--drafter")
    parser.add_argument("--preset")
    parser.add_argument("--algorithms", nargs="+", default=["ar", "slem", "tli"])
    parser.add_argument("--max-new-tokens", type=int, default=128)
    parser.add_argument("--lookahead", type=int, default=5)
    parser.add_argument("--temperature", type=float, default=0.0)
    parser.add_argument("--repeats", type=int, default=2, help="runs per prompt; the fastest counts")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--threads", type=int, default=None)
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    pair = hsd.load_pair(args.target, args.drafter, preset=args.preset, device=args.device)
    print(f"machine: {machine_line(machine_info(pair))}")
    print(f"pair: {pair.target.name} <- {pair.drafter.name if pair.drafter else None} on {pair.target.device}")
    print(f"settings: max_new_tokens={args.max_new_tokens} lookahead={args.lookahead} "
          f"temperature={args.temperature} prompts={len(PROMPTS)} repeats={args.repeats}")
    hsd.generate(pair, PROMPTS[0], algorithm=args.algorithms[0], max_new_tokens=8)  # warm-up
    rows = {}
    for algorithm in args.algorithms:
        hsd.generate(pair, PROMPTS[0], algorithm=algorithm, max_new_tokens=16)  # warm-up
        rows[algorithm] = summarize(run(pair, algorithm, PROMPTS, args))
    base = rows.get("ar", {}).get("tokens_per_s")
    print(f"{'algorithm':10s} {'tok/s':>8s} {'speedup':>8s} {'tau':>6s} {'accept':>7s} {'outside fwd':>11s} "
          f"{'round ms (first 1/4)':>21s} {'(last 1/4)':>10s} {'= AR':>5s}")
    for algorithm, row in rows.items():
        speedup = row["tokens_per_s"] / base if base else float("nan")
        same = "-" if args.temperature > 0 or "ar" not in rows else "yes" if row["tokens"] == rows["ar"]["tokens"] else "NO"
        print(f"{algorithm:10s} {row['tokens_per_s']:8.1f} {speedup:8.2f} {row['tau']:6.2f} {row['acceptance']:7.1%} "
              f"{row['outside_forwards']:11.1%} {row['round_ms_early']:21.2f} {row['round_ms_late']:10.2f} {same:>5s}")


if __name__ == "__main__":
    main()
