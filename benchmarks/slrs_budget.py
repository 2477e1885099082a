"""SLRS's path budget on the embedded pair: what each budget buys and costs (docs/slrs.md).

For the SentencePiece-style drafter (``tiny-code``) and the byte-level drafter (``tiny-code-bytes``)
at ``slrs_max_paths`` 16, 256 and 4096: acceptance (accepted / proposed, as hsd's metrics count it:
``⊥`` and unverified positions are proposals; and accepted / verified positions), τ (tokens per target forward), drafter forwards per round, ψ paths per round, the share
of proposals that were heavy (``⊥``), and tokens/s against AR. AR and SLRS alternate prompt by prompt
and seed by seed in the same run, so a change in the machine's load hits both. Prints a Markdown
table and the machine; asserts nothing.

    OMP_WAIT_POLICY=PASSIVE python benchmarks/slrs_budget.py --prompts 4 --seeds 2 --max-new-tokens 32
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

import hsd  # noqa: E402
from hsd.bench import load_prompts, machine_info, machine_line  # noqa: E402
from hsd.paths import path_counts  # noqa: E402

BUDGETS = (16, 256, 4096)
DRAFTERS = ("tiny-code", "tiny-code-bytes")


def heavy_share(pair: hsd.Pair, budget: int) -> float:
    counts = path_counts(pair.target.vocab, pair.target.n_logits, pair.drafter.vocab, pair.drafter.n_logits).paths
    return sum(n > budget for n in counts.values()) / len(counts)


def measure(pair, prompts, seeds, budget, settings) -> dict:
    """Totals over prompts × seeds, AR and SLRS alternating."""
    tot = defaultdict(float)
    for prompt in prompts:
        for seed in range(seeds):
            for algorithm in ("ar", "slrs"):
                extra = {"slrs_max_paths": budget} if algorithm == "slrs" else {}
                res = hsd.generate(pair, prompt, algorithm=algorithm, seed=seed, **settings, **extra)
                m = res.metrics
                tot[f"{algorithm}_tokens"] += m["new_tokens"]
                tot[f"{algorithm}_seconds"] += m["total_s"] - m["prefill_s"]
                if algorithm == "slrs":
                    for key in ("rounds", "proposed", "accepted", "psi_paths", "psi_seconds"):
                        tot[key] += m.get(key) or 0
                    tot["drafter_forwards"] += sum(r.drafter_forwards for r in res.rounds)
                    tot["heavy"] += sum(r.extra.get("psi_heavy", 0) for r in res.rounds)
                    tot["verified"] += sum(p.outcome != "unverified" for r in res.rounds for p in r.positions)
    slrs_tps = tot["slrs_tokens"] / tot["slrs_seconds"]
    ar_tps = tot["ar_tokens"] / tot["ar_seconds"]
    return {
        "acceptance": tot["accepted"] / tot["proposed"] if tot["proposed"] else 0.0,
        "verified_acceptance": tot["accepted"] / tot["verified"] if tot["verified"] else 0.0,
        "tau": tot["slrs_tokens"] / tot["rounds"],
        "drafter_forwards_per_round": tot["drafter_forwards"] / tot["rounds"],
        "psi_paths_per_round": tot["psi_paths"] / tot["rounds"],
        "heavy_share_of_proposals": tot["heavy"] / tot["proposed"] if tot["proposed"] else 0.0,
        "psi_share_of_time": tot["psi_seconds"] / tot["slrs_seconds"],
        "tokens_per_s": slrs_tps, "ar_tokens_per_s": ar_tps, "speedup": slrs_tps / ar_tps,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--prompt-set", default="code-packages",
                    help="a set in assets/prompts or a .jsonl file (default: functions of packages the pair never saw)")
    ap.add_argument("--prompts", type=int, default=4, help="the set's first N prompts")
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--max-new-tokens", type=int, default=32)
    ap.add_argument("--temperature", type=float, default=1.0)
    ap.add_argument("--lookahead", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1, help="torch threads (tiny models gain nothing from more)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    prompts = load_prompts(args.prompt_set, args.prompts)
    settings = dict(temperature=args.temperature, max_new_tokens=args.max_new_tokens, lookahead=args.lookahead)
    print(f"SLRS path budgets: {len(prompts)} prompts of {args.prompt_set} × {args.seeds} seeds × "
          f"{args.max_new_tokens} new tokens, temperature {args.temperature}, lookahead {args.lookahead}")
    print("| drafter | slrs_max_paths | target tokens heavy (static) | acceptance (of proposed / of verified) | τ "
          "| drafter fwd / round | ψ paths / round | ⊥ heavy / proposals | ψ share of time | tokens/s | AR tokens/s "
          "| speedup |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    pair = None
    for preset in DRAFTERS:
        pair = hsd.load_pair(preset=preset, device="cpu")
        for budget in BUDGETS:
            r = measure(pair, prompts, args.seeds, budget, settings)
            print(f"| {preset} | {budget} | {heavy_share(pair, budget):.1%} | {r['acceptance']:.3f} / {r['verified_acceptance']:.3f} "
                  f"| {r['tau']:.2f} "
                  f"| {r['drafter_forwards_per_round']:.1f} | {r['psi_paths_per_round']:.0f} "
                  f"| {r['heavy_share_of_proposals']:.1%} | {r['psi_share_of_time']:.0%} | {r['tokens_per_s']:.1f} "
                  f"| {r['ar_tokens_per_s']:.1f} | {r['speedup']:.2f}× |", flush=True)
    print(f"\nMachine: {machine_line(machine_info(pair))}")


if __name__ == "__main__":
    main()
