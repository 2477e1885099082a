"""What shared noise (hsd/noise.py) changes for SLEM when sampling: acceptance per position, τ and speed.

For each setting (noise, drafter temperature) SLEM runs the first ``--prompts`` held-out code prompts with
``--seeds`` seeds each; AR with independent noise (its fastest sampler) runs the same prompts in the same
loop, so the speedups are side by side. Prints, per setting: tokens/s, speedup, τ, and the share of
proposals accepted at each position among the rounds that reached it (docs/coupling.md).

    OMP_WAIT_POLICY=PASSIVE python benchmarks/shared_noise.py --temperature 0.7 --lookahead 5
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

import hsd  # noqa: E402
from hsd.bench import load_prompts, machine_info, machine_line  # noqa: E402

SETTINGS = [("independent", None), ("independent", 0.0), ("shared", None)]  # (noise, drafter temperature)


def run(pair, prompts, seeds, temperature, lookahead, noise, drafter_t, algorithm="slem", positions=6) -> dict:
    tokens = seconds = forwards = 0
    reached, accepted = [0] * positions, [0] * positions
    for i, prompt in enumerate(prompts):
        for seed in range(seeds):
            res = hsd.generate(pair, prompt, algorithm=algorithm, max_new_tokens=128, temperature=temperature,
                               lookahead=lookahead, seed=1000 * seed + i, noise=noise, drafter_temperature=drafter_t)
            tokens, seconds = tokens + len(res.token_ids), seconds + res.metrics["total_s"]
            forwards += sum(r.target_forwards for r in res.rounds)
            for r in res.rounds:
                for j in range(min(r.n_proposed, positions, r.n_accepted + 1)):
                    reached[j] += 1
                    accepted[j] += j < r.n_accepted
    return dict(tps=tokens / seconds, tau=tokens / forwards,
                per_position=[a / r if r else None for a, r in zip(accepted, reached)])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", default="tiny-code")
    ap.add_argument("--temperature", type=float, default=0.7)
    ap.add_argument("--lookahead", type=int, default=5)
    ap.add_argument("--prompts", type=int, default=8)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    if args.temperature <= 0:
        ap.error("--temperature: shared noise changes nothing at temperature 0 (greedy); give one > 0")
    torch.set_num_threads(args.threads)
    pair = hsd.load_pair(preset=args.preset, device="cpu")
    prompts = load_prompts("code")[:args.prompts]
    hsd.generate(pair, prompts[0], algorithm="slem", max_new_tokens=8, temperature=args.temperature)  # warm-up
    print(f"machine: {machine_line(machine_info(pair))}")
    print(f"{args.preset}, SLEM at T={args.temperature:g}, lookahead {args.lookahead}, {len(prompts)} held-out prompts "
          f"x {args.seeds} seeds x 128 tokens")
    ar = run(pair, prompts, args.seeds, args.temperature, 1, "independent", None, algorithm="ar")
    print(f"AR (independent noise): {ar['tps']:.1f} tok/s")
    rows = []
    for noise, drafter_t in SETTINGS:
        r = run(pair, prompts, args.seeds, args.temperature, args.lookahead, noise, drafter_t)
        r.update(noise=noise, drafter_temperature=drafter_t, speedup=r["tps"] / ar["tps"])
        rows.append(r)
        pos = " ".join("-" if a is None else f"{a:.2f}" for a in r["per_position"])
        print(f"{noise:11s} drafter T={'as target' if drafter_t is None else drafter_t}: {r['tps']:6.1f} tok/s "
              f"{r['speedup']:.2f}x  tau {r['tau']:.2f}  acceptance by position {pos}", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(dict(settings=vars(args), ar=ar, rows=rows), indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
