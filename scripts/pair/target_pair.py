"""Two targets with the same drafters, side by side at the embedded pair's goal settings, timed in pairs (asserts
nothing).

    python scripts/train_pair.py grow --from assets/tiny-code/target --layers 28 --out /tmp/deep/target
    OMP_WAIT_POLICY=PASSIVE python scripts/pair/target_pair.py --old assets/tiny-code/target --new /tmp/deep/target

The embedded target's shape is chosen for the best speedup on a CPU, where at batch 1 a step's cost is set by
depth. ``train_pair.py grow`` makes a deeper target that computes exactly what the shallower one does, so
τ and the acceptance are the same and only the costs differ: the difference in speedup is what the depth buys,
before any training. ``pair_goals.py`` answers that badly, run by run (a shared machine's speed moves by 10% from
minute to minute, and each run calibrates its own lookahead); here, for each held-out prompt and seed, AR and the
algorithm run on both targets one after the other, the order rotated from prompt to prompt, so that a change
in the machine's speed falls on all four alike. The settings are the ones the goals' calibration chose
(``GOALS``); the prompts are the first ``--prompts`` held-out code prompts (never the calibration ones).

The drafters come from ``--drafters`` (a pair folder with ``drafter/``, ``drafter-bytes/`` and
``drafter-sampling/``). A target that was trained after growing changes τ too; the table shows both.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

import hsd  # noqa: E402
from hsd.bench import machine_info, machine_line, measured_prompts  # noqa: E402

# (drafter folder, algorithm, temperature, lookahead, draft threshold, noise, goal): the embedded pair's four speed
# goals (scripts/pair/pair_goals.py), each at the settings pair_goals.py's calibration (--lookahead auto) chose for
# it, fixed here so that every run compares the same settings
GOALS = [
    ("drafter", "slem", 0.0, 12, 0.5, "independent", 2.0),
    ("drafter-sampling", "tli", 1.0, 12, 0.7, "independent", 1.0),
    ("drafter-sampling", "slem", 0.7, 12, 0.5, "shared", 1.2),
    ("drafter-bytes", "slrs", 0.0, 1, 0.0, "independent", 1.0),
]


def measure(pairs: dict, prompts, setting, seeds: int, max_new_tokens: int, before: dict | None = None) -> dict:
    """Per target: AR's and the algorithm's tokens and seconds, and the algorithm's rounds, summed over the runs,
    and every output (AR's, then the algorithm's, in the order they ran).
    ``before[name]``, if given, is called before each of that pair's generations (e.g. to set its environment)."""
    _, algorithm, t, k, threshold, noise, _ = setting
    jobs = [(name, alg) for name in pairs for alg in ("ar", algorithm)]
    sums = {job: dict(tokens=0, seconds=0.0, rounds=0, outputs=[]) for job in jobs}
    turn = 0
    for i, prompt in enumerate(prompts):
        for s in range(seeds if t > 0 else 1):
            for name, alg in jobs[turn % len(jobs):] + jobs[:turn % len(jobs)]:
                extra = {} if alg == "ar" else dict(lookahead=k, draft_threshold=threshold, noise=noise)
                if before and name in before:
                    before[name]()
                res = hsd.generate(pairs[name], prompt, algorithm=alg, max_new_tokens=max_new_tokens, temperature=t,
                                   seed=1000 * s + i, **extra)
                got = sums[name, alg]
                got["tokens"] += len(res.token_ids)
                got["seconds"] += res.metrics["total_s"]
                got["rounds"] += len(res.rounds)
                got["outputs"].append(tuple(res.token_ids))
            turn += 1
    out = {}
    for name in pairs:
        ar, sd = sums[name, "ar"], sums[name, algorithm]
        ar_tps, tps = ar["tokens"] / ar["seconds"], sd["tokens"] / sd["seconds"]
        out[name] = dict(ar_ms=1000 / ar_tps, ar_tps=ar_tps, tps=tps, speedup=tps / ar_tps,
                         tau=sd["tokens"] / max(1, sd["rounds"]), outputs=ar["outputs"] + sd["outputs"])
    return out


def add_goal_options(ap: argparse.ArgumentParser) -> None:
    """The options of a paired run at the goals' settings (here and in ``weight_layout.py``)."""
    ap.add_argument("--prompts", type=int, default=8, help="held-out code prompts (at most 22: 4 calibrate)")
    ap.add_argument("--seeds", type=int, default=2, help="seeds per prompt when sampling")
    ap.add_argument("--max-new-tokens", type=int, default=128)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--roles", nargs="+", default=None, choices=sorted({g[0] for g in GOALS}),
                    help="only the goals of these drafters (default: all four)")


def main(argv=None) -> list[dict]:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--old", default=str(ROOT / "assets" / "tiny-code" / "target"), help="a target folder")
    ap.add_argument("--new", required=True, help="another target folder with the same tokenizer")
    ap.add_argument("--drafters", default=str(ROOT / "assets" / "tiny-code"),
                    help="folder with drafter/, drafter-bytes/ and drafter-sampling/")
    add_goal_options(ap)
    args = ap.parse_args(argv)
    settings = [g for g in GOALS if args.roles is None or g[0] in args.roles]
    torch.set_num_threads(args.threads)
    prompts = measured_prompts(args.prompts)
    targets = {"old": args.old, "new": args.new}
    rows = []
    for role in dict.fromkeys(g[0] for g in settings):
        pairs = {name: hsd.load_pair(folder, str(Path(args.drafters) / role), device="cpu")
                 for name, folder in targets.items()}
        if not rows:
            print(machine_line(machine_info(pairs["old"])) + f"; {len(prompts)} held-out prompts, "
                  f"{args.max_new_tokens} new tokens, {args.seeds} seeds when sampling; old {args.old}, "
                  f"new {args.new}")
            print("| drafter | algorithm | T | lookahead | goal | old AR ms/token | new AR ms/token | old τ | new τ "
                  "| old speedup | new speedup |")
            print("|---|---|---|---|---|---|---|---|---|---|---|")
        for setting in (g for g in settings if g[0] == role):
            _, algorithm, t, k, threshold, noise, goal = setting
            got = measure(pairs, prompts, setting, args.seeds, args.max_new_tokens)
            look = f"{k}" + (f" (stop below {threshold:g})" if threshold else "") + (
                ", shared noise" if noise == "shared" else "")
            print(f"| {role} | {algorithm} | {t:g} | {look} | {goal:g}x | {got['old']['ar_ms']:.2f} | "
                  f"{got['new']['ar_ms']:.2f} | {got['old']['tau']:.3f} | {got['new']['tau']:.3f} | "
                  f"{got['old']['speedup']:.3f}x | {got['new']['speedup']:.3f}x |", flush=True)
            rows.append(dict(role=role, algorithm=algorithm, temperature=t, lookahead=look, goal=goal, **{
                f"{name}_{key}": value for name, rec in got.items() for key, value in rec.items() if key != "outputs"}))
    return rows


if __name__ == "__main__":
    main()
