"""The embedded pair with its linear weights in each layout hsd knows (:mod:`hsd.layout`: row-major as stored,
column-major, and dual, hsd's CPU default), side by side at the embedded pair's goal settings, timed in pairs
(asserts nothing).

    OMP_WAIT_POLICY=PASSIVE python scripts/pair/weight_layout.py --prompts 8 --seeds 2

This measures what a layout buys end to end: for each held-out prompt and seed, AR and the algorithm run with every
layout one after the other, the order rotated (as ``scripts/pair/target_pair.py``, whose settings and timing this
reuses), and the texts of the layouts are compared (the same text is expected; the last bits of a logit may differ
between matrix kernels, which could only matter at an exact tie). First it times the target's forward alone for
1 to 8 tokens after 150 cached ones, in every layout, in turn.
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

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts" / "pair"))

import torch  # noqa: E402

import hsd  # noqa: E402
from hsd.bench import machine_info, machine_line, measured_prompts  # noqa: E402
from hsd.layout import KERNELS, LAYOUTS, kernel_plan, use_layout  # noqa: E402
from target_pair import GOALS, add_goal_options, measure  # noqa: E402


SIZES = (1, 2, 3, 4, 5, 8)


def layouts(pair, names=("row", "column", "dual")) -> dict:
    """A pair per layout in ``names``, each with its own copy of the target laid out so (the drafters are shared:
    the lean drafter reads the layout from the environment when a generation builds it, :func:`set_layout`)."""
    out = {}
    for name in names:
        model = copy.deepcopy(pair.target.model)
        use_layout(model, name)
        out[name] = dataclasses.replace(pair, target=dataclasses.replace(pair.target, model=model))
    return out


#: model shapes ``--shapes`` can time with random weights: a real model's forward without downloading it
SHAPES = {"qwen2-0.5b": dict(model_type="qwen2", hidden_size=896, intermediate_size=4864, num_hidden_layers=24,
                             num_attention_heads=14, num_key_value_heads=2, vocab_size=151936,
                             tie_word_embeddings=True),
          "smollm2-135m": dict(model_type="llama", hidden_size=576, intermediate_size=1536, num_hidden_layers=30,
                               num_attention_heads=9, num_key_value_heads=3, vocab_size=49152,
                               tie_word_embeddings=True)}


def shaped(name: str, names) -> dict:
    """A randomly initialised model of ``SHAPES[name]``, once per layout in ``names``, as ``forward_costs`` takes
    pairs (only ``.target`` is read)."""
    import types

    import transformers

    spec = dict(SHAPES[name])
    config = transformers.AutoConfig.for_model(spec.pop("model_type"), **spec)
    torch.manual_seed(0)
    net = transformers.AutoModelForCausalLM.from_config(config, dtype=torch.float32).eval()
    out = {}
    for layout in names:
        model = copy.deepcopy(net)
        use_layout(model, layout)
        target = types.SimpleNamespace(model=model, device=torch.device("cpu"), n_logits=config.vocab_size)
        out[layout] = types.SimpleNamespace(target=target)
    return out


def print_costs(costs: dict, names, what: str) -> None:
    print(f"| {what} | " + " | ".join(f"{n} token{'s' if n > 1 else ''}" for n in SIZES) + " |")
    print("|---" * (len(SIZES) + 1) + "|")
    for name in names:
        one = costs[name, 1]
        print(f"| {name} | " + " | ".join(f"{costs[name, n]:.2f} ms ({costs[name, n] / one:.2f}x)"
                                        for n in SIZES) + " |", flush=True)


def print_plan(model, what: str) -> None:
    """What ``dual``'s kernel plan measured for ``model`` on this machine, at this thread count."""
    plan = kernel_plan(model)
    if plan is None:
        return
    chosen, seconds = plan.measure()
    by_kernel = {k: sorted(n for n, c in chosen.items() if c == k) for k in KERNELS[1:]}
    print(f"{what}, dual's plan ({len(plan.shapes)} matrices, {torch.get_num_threads()} threads): "
          + ("; ".join(f"{k} for {', '.join(map(str, rows))} rows" for k, rows in by_kernel.items() if rows)
             or "linear_columns for every number of rows")
          + f"; ms per pass {' / '.join(KERNELS)}: "
          + ", ".join(f"{n} rows " + " / ".join(f"{by[k] * 1e3:.2f}" for k in KERNELS)
                      for n, by in seconds.items() if n in SIZES))


def set_layout(name: str):
    def apply():
        os.environ["HSD_WEIGHT_LAYOUT"] = name  # read by the lean drafter when a generation builds it
    return apply


def forward_costs(pair_by_layout: dict, context: int = 150, sizes=SIZES, rounds: int = 30) -> dict:
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
    ap.add_argument("--layouts", nargs="+", default=["row", "column", "dual"],
                    choices=[name for name in LAYOUTS if name != "auto"], help="the layouts to compare")
    ap.add_argument("--skip-forwards", action="store_true", help="skip the target's forward timings")
    ap.add_argument("--shapes", nargs="+", default=[], choices=sorted(SHAPES),
                    help="also time the forward of these models' shapes, random weights (qwen2-0.5b: 2 GB a layout)")
    ap.add_argument("--skip-speed", action="store_true", help="only the forward timings, no generation")
    args = ap.parse_args(argv)
    names = list(dict.fromkeys(args.layouts))
    os.environ.pop("HSD_WEIGHT_LAYOUT", None)
    torch.set_num_threads(args.threads)
    prompts = measured_prompts(args.prompts)
    base = hsd.load_pair(preset="tiny-code", device="cpu")
    print(machine_line(machine_info(base)) + f"; {len(prompts)} held-out prompts, {args.max_new_tokens} new "
          f"tokens, {args.seeds} seeds when sampling")
    if not args.skip_forwards:
        pairs = layouts(base, names)
        print_costs(forward_costs(pairs), names, "target forward")
        if "dual" in pairs:
            print_plan(pairs["dual"].target.model, "target")
    for shape in args.shapes:
        pairs = shaped(shape, names)
        print_costs(forward_costs(pairs, rounds=7), names, f"{shape} shape, random weights")
        if "dual" in pairs:
            print_plan(pairs["dual"].target.model, shape)
    settings = [] if args.skip_speed else [g for g in GOALS if args.roles is None or g[0] in args.roles]
    drafters = ROOT / "assets" / "tiny-code"
    rows = []
    if not settings:
        return rows
    heads = [f"{name} {what}" for what in ("AR ms/token", "τ", "speedup") for name in names]
    print("| drafter | algorithm | T | lookahead | goal | " + " | ".join(heads) + " | same text |")
    print("|---" * (len(heads) + 6) + "|")
    for role in dict.fromkeys(g[0] for g in settings):
        pairs = layouts(hsd.load_pair(str(drafters / "target"), str(drafters / role), device="cpu"), names)
        before = {name: set_layout(name) for name in pairs}
        for setting in (g for g in settings if g[0] == role):
            _, algorithm, t, k, threshold, noise, goal = setting
            got = measure(pairs, prompts, setting, args.seeds, args.max_new_tokens, before=before)
            look = f"{k}" + (f" (stop below {threshold:g})" if threshold else "") + (
                ", shared noise" if noise == "shared" else "")
            outputs = list(zip(*(got[name]["outputs"] for name in names)))  # AR's and the algorithm's, per layout
            same = sum(len(set(o)) == 1 for o in outputs)
            cells = [f"{got[name]['ar_ms']:.2f}" for name in names] + [f"{got[name]['tau']:.3f}" for name in names]
            cells += [f"{got[name]['speedup']:.3f}x" for name in names]
            print(f"| {role} | {algorithm} | {t:g} | {look} | {goal:g}x | " + " | ".join(cells) +
                  f" | {same}/{len(outputs)} |", flush=True)
            rows.append(dict(role=role, algorithm=algorithm, temperature=t, lookahead=look, goal=goal, same=same,
                             outputs=len(outputs), **{f"{name}_{key}": value for name, rec in got.items()
                                                      for key, value in rec.items() if key != "outputs"}))
    os.environ.pop("HSD_WEIGHT_LAYOUT", None)
    return rows


if __name__ == "__main__":
    main()
