"""Two sets of drafters for one target, side by side at fixed settings (asserts nothing).

    OMP_WAIT_POLICY=PASSIVE python scripts/pair/drafter_pair.py --old OLD_PAIR --new assets/tiny-code

Whether a retrained drafter is better is a question about acceptance, and ``pair_goals.py``'s speedups answer
it badly: their lookahead is chosen per run and their tokens/s move by 10% with the machine's load. Here both
drafter sets run the same held-out prompts (the first ``--prompts`` of ``assets/prompts/code.jsonl``, never the
4 calibration ones; with ``--prompt-set calibration`` those of ``code-calibration.jsonl``, functions of the packages
held out for choosing settings) at the same settings, one prompt after the other. At T = 0 the output, the rounds and so
τ (target tokens per round) and the acceptance are exact: the same weights give the same numbers on any
machine, so a difference of 0.01 is real. At T > 0 each prompt has its own seed, the same for both sets.
Tokens/s are printed too, measured alternately, for what they are worth.

Each folder holds ``drafter/``, ``drafter-bytes/`` (the byte drafter for SLRS) and ``drafter-sampling/`` (the
drafter for sampling: TLI at T = 1, SLEM at T = 0.7 with shared noise); the target is ``--target``.
"""
from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

import hsd  # noqa: E402
from hsd.bench import machine_info, machine_line, measured_prompts  # noqa: E402

# (drafter folder, algorithm, temperature, lookahead, drafter temperature, draft threshold, noise): settings
# pair_goals.py's calibration (--lookahead auto) chose for the embedded pair's goals, fixed here so that two drafter
# sets compare at the same settings; the goal for SLEM at T=0.7 is measured with shared noise (hsd/noise.py)
SETTINGS = [
    ("drafter", "slem", 0.0, 12, None, 0.5, "independent"),
    ("drafter", "slem", 0.0, 5, None, 0.0, "independent"),
    ("drafter", "tli", 1.0, 1, None, 0.0, "independent"),
    ("drafter", "slem", 0.7, 12, 0.0, 0.7, "independent"),
    ("drafter-sampling", "tli", 1.0, 1, None, 0.0, "independent"),
    ("drafter-sampling", "tli", 1.0, 12, None, 0.7, "independent"),
    ("drafter-sampling", "slem", 0.7, 12, None, 0.5, "shared"),
    ("drafter-sampling", "slem", 0.7, 3, None, 0.0, "shared"),
    ("drafter-bytes", "slrs", 0.0, 1, None, 0.0, "independent"),
    ("drafter-bytes", "slrs", 0.0, 2, None, 0.0, "independent"),
]


def measure(pair, prompts, algorithm, temperature, lookahead, drafter_t, threshold, max_new_tokens,
            noise="independent") -> dict:
    taus, verified, seconds, tokens = [], [], 0.0, 0
    for i, prompt in enumerate(prompts):
        res = hsd.generate(pair, prompt, algorithm=algorithm, max_new_tokens=max_new_tokens, temperature=temperature,
                           lookahead=lookahead, seed=i, drafter_temperature=drafter_t, draft_threshold=threshold,
                           noise=noise)
        taus.append(res.metrics["mean_accepted_length"] or 0.0)
        verified.append(res.metrics["verified_acceptance_rate"] or 0.0)
        seconds, tokens = seconds + res.metrics["total_s"], tokens + len(res.token_ids)
    return dict(tau=statistics.mean(taus), verified_acceptance=statistics.mean(verified), tps=tokens / seconds)


def main(argv=None) -> list[dict]:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--old", required=True, help="folder with drafter/ and drafter-bytes/")
    ap.add_argument("--new", default=str(ROOT / "assets" / "tiny-code"), help="the same, to compare with --old")
    ap.add_argument("--target", default=str(ROOT / "assets" / "tiny-code" / "target"))
    ap.add_argument("--prompts", type=int, default=22, help="held-out code prompts (at most 22: 4 calibrate)")
    ap.add_argument("--prompt-set", choices=("files", "calibration"), default="files",
                    help="files: functions of held-out standard-library files (code.jsonl, never its last 4); "
                         "calibration: the 24 functions of the calibration packages (code-calibration.jsonl), where "
                         "a drafter trained on the package split is chosen without reading the evaluation prompts")
    ap.add_argument("--max-new-tokens", type=int, default=128)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--roles", nargs="+", default=None, choices=sorted({s[0] for s in SETTINGS}),
                    help="only the settings of these drafters (default: all)")
    args = ap.parse_args(argv)
    settings = [s for s in SETTINGS if args.roles is None or s[0] in args.roles]
    torch.set_num_threads(args.threads)
    prompts = (measured_prompts(args.prompts) if args.prompt_set == "files"
               else measured_prompts(args.prompts, "code-calibration", calibration=0))
    sets = {"old": Path(args.old), "new": Path(args.new)}
    pairs = {(name, role): hsd.load_pair(args.target, str(folder / role), device="cpu")
             for name, folder in sets.items() for role in sorted({s[0] for s in settings})}
    print(machine_line(machine_info(next(iter(pairs.values())))) + f"; {len(prompts)} held-out prompts, "
          f"{args.max_new_tokens} new tokens")
    print("| algorithm | T | lookahead | old τ | new τ | old accepted/verified | new accepted/verified "
          "| old tok/s | new tok/s |")
    print("|---|---|---|---|---|---|---|---|---|")
    rows = []
    for role, algorithm, t, k, drafter_t, threshold, noise in settings:
        got = {}
        for name, folder in sets.items():
            got[name] = measure(pairs[name, role], prompts, algorithm, t, k, drafter_t, threshold, args.max_new_tokens,
                                noise)
        setting = f"{k}" + (f" (stop below {threshold:g})" if threshold else "") + (
            "" if drafter_t is None else f", drafter T={drafter_t:g}") + (", shared noise" if noise == "shared" else "")
        print(f"| {algorithm} ({role}) | {t:g} | {setting} | {got['old']['tau']:.3f} | {got['new']['tau']:.3f} | "
              f"{got['old']['verified_acceptance']:.3f} | {got['new']['verified_acceptance']:.3f} | "
              f"{got['old']['tps']:.1f} | {got['new']['tps']:.1f} |", flush=True)
        rows.append(dict(role=role, algorithm=algorithm, temperature=t, lookahead=setting, **{
            f"{name}_{key}": value for name, rec in got.items() for key, value in rec.items()}))
    return rows


if __name__ == "__main__":
    main()
