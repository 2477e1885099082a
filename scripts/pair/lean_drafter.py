"""The drafter's lean forward (hsd/lean.py) against transformers' forward, each against AR, in one run.

    OMP_WAIT_POLICY=PASSIVE python scripts/pair/lean_drafter.py --prompts 8

For each of the embedded pair's goal settings (``drafter_pair.SETTINGS``), every held-out prompt runs three times
in turn: AR, the algorithm with the drafter on transformers' forward (``HSD_LEAN_DRAFTER=0``), the algorithm with
the lean forward. Each prints tokens/s and the ratio to AR of the same prompts, and how many outputs were identical (at
T = 0 the two drafters may differ only where float32 rounding flips a near-tie of the drafter; every output is the
target's either way). The drafter's single-token forward is timed on both runners too, in alternating rounds.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts" / "pair"))

import torch  # noqa: E402

import hsd  # noqa: E402
from drafter_pair import SETTINGS  # noqa: E402
from hsd.bench import machine_info, machine_line, measured_prompts  # noqa: E402
from hsd.lean import LeanRunner  # noqa: E402
from hsd.runner import Runner  # noqa: E402

RUNNERS = {"transformers": "0", "lean": "1"}


def forward_ms(model, rounds: int = 5, reps: int = 200, context: int = 128) -> dict[str, float]:
    """Median single-token forward of ``model`` after ``context`` cached tokens, per runner; the lowest of
    ``rounds`` alternating rounds."""
    best: dict[str, float] = {}
    for _ in range(rounds):
        for name, cls in (("transformers", Runner), ("lean", LeanRunner)):
            runner = cls(model)
            runner.forward(list(range(3, 3 + context)), keep=1)
            times = []
            for _ in range(reps):
                start = time.perf_counter()
                runner.forward([7])
                times.append(time.perf_counter() - start)
                runner.crop(context)
            best[name] = min(best.get(name, float("inf")), statistics.median(times) * 1e3)
    return best


def _generate(pair, prompt, runner: str, **settings):
    old = os.environ.get("HSD_LEAN_DRAFTER")
    os.environ["HSD_LEAN_DRAFTER"] = RUNNERS[runner]
    try:
        return hsd.generate(pair, prompt, **settings)
    finally:
        if old is None:
            os.environ.pop("HSD_LEAN_DRAFTER", None)
        else:
            os.environ["HSD_LEAN_DRAFTER"] = old


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pair", default=str(ROOT / "assets" / "tiny-code"), help="folder with target/, drafter/, "
                    "drafter-bytes/")
    ap.add_argument("--prompts", type=int, default=8, help="held-out code prompts (at most 22: 4 calibrate)")
    ap.add_argument("--max-new-tokens", type=int, default=128)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--json", help="also write the numbers here")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    prompts = measured_prompts(args.prompts)
    folder = Path(args.pair)
    pairs = {role: hsd.load_pair(str(folder / "target"), str(folder / role), device="cpu")
             for role in sorted({s[0] for s in SETTINGS})}
    print(machine_line(machine_info(pairs["drafter"])) + f"; {len(prompts)} held-out prompts, "
          f"{args.max_new_tokens} new tokens")
    out = {"machine": machine_info(pairs["drafter"]), "forward_ms": {}, "settings": []}
    for role, pair in pairs.items():
        ms = forward_ms(pair.drafter)
        out["forward_ms"][role] = ms
        print(f"{role}: one-token forward {ms['transformers']:.3f} ms on transformers, {ms['lean']:.3f} ms lean")
    print("| algorithm | T | lookahead | AR tok/s | transformers drafter tok/s | x AR | lean drafter tok/s | x AR "
          "| same output |")
    print("|---|---|---|---|---|---|---|---|---|")
    for role, algorithm, t, k, drafter_t, threshold, noise in SETTINGS:
        seconds = dict.fromkeys(("ar", *RUNNERS), 0.0)
        tokens = dict.fromkeys(seconds, 0)
        same = 0
        for i, prompt in enumerate(prompts):
            settings = dict(max_new_tokens=args.max_new_tokens, temperature=t, lookahead=k, seed=i,
                            drafter_temperature=drafter_t, draft_threshold=threshold)
            runs = {"ar": _generate(pairs[role], prompt, "lean", algorithm="ar", **settings)}
            for runner in RUNNERS:
                runs[runner] = _generate(pairs[role], prompt, runner, algorithm=algorithm, noise=noise, **settings)
            for key, res in runs.items():
                seconds[key] += res.metrics["total_s"]
                tokens[key] += len(res.token_ids)
            same += runs["transformers"].token_ids == runs["lean"].token_ids
        tps = {key: tokens[key] / seconds[key] for key in seconds}
        setting = f"{k}" + (f" (stop below {threshold:g})" if threshold else "") + (
            "" if drafter_t is None else f", drafter T={drafter_t:g}") + (", shared noise" if noise == "shared" else "")
        print(f"| {algorithm} ({role}) | {t:g} | {setting} | {tps['ar']:.1f} | {tps['transformers']:.1f} | "
              f"{tps['transformers'] / tps['ar']:.2f} | {tps['lean']:.1f} | {tps['lean'] / tps['ar']:.2f} | "
              f"{same}/{len(prompts)} |", flush=True)
        out["settings"].append(dict(role=role, algorithm=algorithm, temperature=t, lookahead=setting, tps=tps,
                                    same_output=same, prompts=len(prompts)))
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    return out


if __name__ == "__main__":
    main()
