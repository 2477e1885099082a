"""The dual layout's measured kernel plan against an assumed one, side by side, timed in pairs (asserts nothing).

    OMP_WAIT_POLICY=PASSIVE python scripts/pair/kernel_plan.py --pair assets/tiny-code --prompts 12

A ``dual`` model multiplies each number of rows by whichever kernel its :class:`hsd.layout.KernelPlan` measured
fastest on this machine (``F.linear`` by the column-major copy or by the row-major weight, or ``W @ x.T`` by the
row-major weight). This runs the target with the plan it measured and a copy of it told to use ``W @ x.T`` for
``--assume-rows`` (2-5 by default, the rule measured once on an AMD EPYC), or, with ``--without KERNEL``, a copy
whose plan was chosen from the same measurement without that kernel, at the goal settings of ``target_pair.py``
(greedy SLEM with ``drafter``,
TLI at T = 1 with ``drafter-sampling``), AR and the algorithm for each prompt and seed one after the other, the
order rotated. Same weights, same drafters: τ and the texts are the same, only the verifications' cost differs.
The prompts are the first ``--prompts`` functions of the evaluation packages (``code-packages.jsonl``).
"""
from __future__ import annotations

import argparse
import copy
import dataclasses
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts" / "pair"))

import torch  # noqa: E402

import hsd  # noqa: E402
from hsd import layout  # noqa: E402
from hsd.bench import machine_info, machine_line  # noqa: E402
from target_pair import GOALS, measure  # noqa: E402

PROMPTS = ROOT / "assets" / "prompts" / "code-packages.jsonl"


def assumed_choice(plan, rows: list[int], without: str | None = None) -> dict[int, str]:
    """What the assumed plan multiplies each number of rows by: ``W @ x.T`` for ``rows``, whatever this machine
    measures, or (``without``) the kernels ``plan`` measured fastest, that one left out."""
    if not without:
        return dict.fromkeys(rows, "mm_rows")
    seconds = plan.measure()[1]
    return layout.choose({n: {k: t for k, t in by.items() if k != without} for n, by in seconds.items()})


def assumed(pair, choice: dict[int, str]):
    """``pair`` with a copy of its target whose linear layers follow ``choice`` (at the thread count in force
    now)."""
    model = copy.deepcopy(pair.target.model)
    plan = layout.kernel_plan(model)
    if plan is None:
        raise SystemExit("the target is not in the dual layout here (HSD_WEIGHT_LAYOUT, or not float32 on a CPU)")
    plan._chosen = {torch.get_num_threads(): choice}
    return dataclasses.replace(pair, target=dataclasses.replace(pair.target, model=model))


def describe(chosen: dict[int, str]) -> str:
    """A plan's choice in words: the rows each kernel other than ``F.linear`` column-major multiplies."""
    by_kernel = {k: sorted(n for n, c in chosen.items() if c == k) for k in layout.KERNELS[1:]}
    return "; ".join(f"{k} for {rows} rows" for k, rows in by_kernel.items() if rows) or "linear_columns throughout"


def main(argv=None) -> list[dict]:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pair", default=str(ROOT / "assets" / "tiny-code"),
                    help="folder with target/, drafter/ and drafter-sampling/")
    ap.add_argument("--assume-rows", type=int, nargs="+", default=[2, 3, 4, 5],
                    help="the numbers of rows the assumed plan multiplies by W @ x.T")
    ap.add_argument("--without", choices=layout.KERNELS[1:], default=None,
                    help="assume instead the plan measured without this kernel")
    ap.add_argument("--prompts", type=int, default=12)
    ap.add_argument("--seeds", type=int, default=2, help="seeds per prompt when sampling")
    ap.add_argument("--max-new-tokens", type=int, default=128)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    prompts = [json.loads(line)["prompt"] for line in PROMPTS.read_text().splitlines() if line.strip()]
    prompts = prompts[:args.prompts]
    folder = Path(args.pair)
    rows = []
    for setting in (g for g in GOALS if g[0] in ("drafter", "drafter-sampling") and g[1] in ("slem", "tli")
                    and (g[1], g[2]) in (("slem", 0.0), ("tli", 1.0))):
        role, algorithm, t, k, threshold, noise, _ = setting
        base = hsd.load_pair(str(folder / "target"), str(folder / role), device="cpu")
        if not rows:
            print(machine_line(machine_info(base)) + f"; {len(prompts)} evaluation prompts, {args.max_new_tokens} "
                  f"new tokens, {args.seeds} seeds when sampling")
            plan = layout.kernel_plan(base.target.model)
            if plan is None:
                raise SystemExit("the target is not in the dual layout here (HSD_WEIGHT_LAYOUT, or not float32 on a "
                                 "CPU)")
            choice = assumed_choice(plan, args.assume_rows, args.without)
            print(f"measured plan: {describe(plan.measure()[0])}; assumed: {describe(choice)}")
            print("| drafter | algorithm | T | lookahead | plan | AR ms/token | τ | speedup | same text |")
            print("|---|---|---|---|---|---|---|---|---|")
        got = measure({"measured": base, "assumed": assumed(base, choice)}, prompts, setting, args.seeds,
                      args.max_new_tokens)
        same = got["measured"]["outputs"] == got["assumed"]["outputs"]
        look = f"{k}" + (f" (stop below {threshold:g})" if threshold else "")
        for name, r in got.items():
            print(f"| {role} | {algorithm} | {t:g} | {look} | {name} | {r['ar_ms']:.2f} | {r['tau']:.3f} | "
                  f"{r['speedup']:.3f}x | {'yes' if same else 'NO'} |", flush=True)
            rows.append(dict(role=role, algorithm=algorithm, temperature=t, plan=name, same=same,
                             **{key: value for key, value in r.items() if key != "outputs"}))
    return rows


if __name__ == "__main__":
    main()
