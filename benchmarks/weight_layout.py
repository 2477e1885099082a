"""The embedded pair with its weights row-major (as stored) and column-major (hsd's CPU default), side by side at
issue 13's goal settings, timed in pairs (asserts nothing).

    OMP_WAIT_POLICY=PASSIVE python benchmarks/weight_layout.py --prompts 8 --seeds 2

hsd stores the linear weights of the models it loads on the CPU in float32 column-major (:mod:`hsd.layout`), and
the lean drafter's copies too: the same values in the layout that oneMKL multiplies fastest for the one row of an
AR step and the few rows of a verification. This measures what that buys end to end: for each held-out prompt and
seed, AR and the algorithm run with both layouts one after the other, the order rotated (as
``benchmarks/target_pair.py``, whose settings and timing this reuses), and the texts of the two layouts are
compared (the same text is expected; the last bits of a logit may differ between matrix kernels, which could
only matter at an exact tie). First it times the target's forward alone for 1, 2, 4 and 8 tokens after 150
cached ones, in both layouts, in turn.
"""
from __future__ import annotations

import argparse
import copy
import dataclasses
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import torch  # noqa: E402

import hsd  # noqa: E402
from hsd.bench import machine_info, machine_line, measured_prompts  # noqa: E402
from hsd.layout import use_row_major  # noqa: E402
from target_pair import GOALS, add_goal_options, measure  # noqa: E402


def layouts(pair) -> dict:
    """The pair as loaded (column-major on the CPU) and a copy of it whose target is row-major."""
    model = copy.deepcopy(pair.target.model)
    use_row_major(model)
    return {"row": dataclasses.replace(pair, target=dataclasses.replace(pair.target, model=model)), "column": pair}


def set_layout(name: str):
    def apply():
        os.environ["HSD_WEIGHT_LAYOUT"] = name  # read by the lean drafter when a generation builds it
    return apply


def forward_costs(pair_by_layout: dict, context: int = 150, sizes=(1, 2, 4, 8), rounds: int = 30) -> dict:
    """Median ms of one target forward (hsd's :class:`~hsd.runner.Runner`, as a generation runs it) of ``n`` tokens
    after ``context`` cached ones, per layout, taken in turn; each forward keeps every position's logits, as a
    verification does."""
    from hsd.runner import Runner

    ids = torch.randint(10, 4000, (context + max(sizes),), generator=torch.Generator().manual_seed(0)).tolist()
    runners = {name: Runner(pair.target) for name, pair in pair_by_layout.items()}
    for runner in runners.values():
        runner.forward(ids[:context])
    times = {(name, n): [] for name in runners for n in sizes}
    for _ in range(rounds):
        for n in sizes:
            for name, runner in runners.items():
                started = time.perf_counter()
                runner.forward(ids[context:context + n], keep=n)
                times[name, n].append(time.perf_counter() - started)
                runner.crop(context)
    return {key: 1000 * statistics.median(v) for key, v in times.items()}


def main(argv=None) -> list[dict]:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_goal_options(ap)
    ap.add_argument("--skip-forwards", action="store_true", help="skip the target's forward timings")
    args = ap.parse_args(argv)
    os.environ.pop("HSD_WEIGHT_LAYOUT", None)
    torch.set_num_threads(args.threads)
    prompts = measured_prompts(args.prompts)
    base = hsd.load_pair(preset="tiny-code", device="cpu")
    print(machine_line(machine_info(base)) + f"; {len(prompts)} held-out prompts, {args.max_new_tokens} new "
          f"tokens, {args.seeds} seeds when sampling")
    if not args.skip_forwards:
        models = layouts(base)
        costs = forward_costs(models)
        print("| target forward | " + " | ".join(f"{n} token{'s' if n > 1 else ''}" for n in (1, 2, 4, 8)) + " |")
        print("|---|---|---|---|---|")
        for name in models:
            one = costs[name, 1]
            print(f"| {name}-major | " + " | ".join(f"{costs[name, n]:.2f} ms ({costs[name, n] / one:.2f}x)"
                                                 for n in (1, 2, 4, 8)) + " |", flush=True)
    settings = [g for g in GOALS if args.roles is None or g[0] in args.roles]
    drafters = ROOT / "assets" / "tiny-code"
    rows = []
    print("| drafter | algorithm | T | lookahead | goal | row AR ms/token | column AR ms/token | row τ | column τ "
          "| row speedup | column speedup | same text |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for role in dict.fromkeys(g[0] for g in settings):
        pairs = layouts(hsd.load_pair(str(drafters / "target"), str(drafters / role), device="cpu"))
        before = {name: set_layout(name) for name in pairs}
        for setting in (g for g in settings if g[0] == role):
            _, algorithm, t, k, threshold, noise, goal = setting
            got = measure(pairs, prompts, setting, args.seeds, args.max_new_tokens, before=before)
            look = f"{k}" + (f" (stop below {threshold:g})" if threshold else "") + (
                ", shared noise" if noise == "shared" else "")
            pairs_out = list(zip(got["row"]["outputs"], got["column"]["outputs"]))  # AR's and the algorithm's
            same = sum(a == b for a, b in pairs_out)
            print(f"| {role} | {algorithm} | {t:g} | {look} | {goal:g}x | {got['row']['ar_ms']:.2f} | "
                  f"{got['column']['ar_ms']:.2f} | {got['row']['tau']:.3f} | {got['column']['tau']:.3f} | "
                  f"{got['row']['speedup']:.3f}x | {got['column']['speedup']:.3f}x | {same}/{len(pairs_out)} |",
                  flush=True)
            rows.append(dict(role=role, algorithm=algorithm, temperature=t, lookahead=look, goal=goal, same=same,
                             outputs=len(pairs_out), **{f"{name}_{key}": value for name, rec in got.items()
                                                        for key, value in rec.items() if key != "outputs"}))
    os.environ.pop("HSD_WEIGHT_LAYOUT", None)
    return rows


if __name__ == "__main__":
    main()
