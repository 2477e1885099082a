"""What a model shape costs per token on this CPU, and what that allows speculative decoding.

    OMP_WAIT_POLICY=PASSIVE python scripts/pair/shapes.py            # prints a table; asserts nothing

At batch 1 on a CPU a decoding step is mostly per-layer overhead, so the target-to-drafter cost ratio
is set by depth more than by width, and the embedded pair's sizes are chosen by measuring it. This measures, for
randomly initialised models of each candidate shape (cost does not depend on the weights), through
hsd's own runner:

* ``step_ms``: one cached decoding step (one new token), the cost AR pays per token;
* ``verify_ms``: one cached forward of 6 tokens, what a lookahead-5 round costs the target.

It then prints, for each target x drafter combination, the cost ratio ``c = drafter step / target
step`` and the greedy speedup that lookahead ``k`` would give at a per-token agreement ``a`` in the
i.i.d. model ``tau / (k c + v)``, where ``tau = (1 - a^(k+1)) / (1 - a)`` and ``v = verify / step`` of
the target (an upper bound: it ignores the algorithm's own per-round work, retokenization included).

    OMP_WAIT_POLICY=PASSIVE python scripts/pair/shapes.py --folders assets/tiny-code/drafter CANDIDATE ...

measures model folders instead (trained or not: ``scripts/gpu_drafters.py fresh`` makes untrained ones) through
the runner hsd drafts with (the lean forward of ``hsd/lean.py`` where it is exact), one cached step each in turn,
``--rounds`` times: the median of each round's steps, then the median and the range over rounds. ``--after TARGET``
adds each model's first step after a forward of that target, what a round's first drafter step costs (the step
column is then the second step after it, as a round's next drafter steps are). Interleaving matters on a shared
VM, where a step's time moves by up to 2x from one minute to the next.
The per-layer rule holds while the weights stay in the caches: past a few MB of float32 weights a step costs
about what reading them costs (on a 2-core AMD EPYC, 2 x 384 takes twice the step of 2 x 192).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

import torch  # noqa: E402

TARGETS = [(8, 256), (6, 256), (12, 192), (12, 256), (16, 192), (8, 384)]
DRAFTERS = [(1, 128), (1, 192), (2, 128), (2, 192)]


def model(vocab: int, layers: int, hidden: int):
    from train_common import make_model

    torch.manual_seed(0)
    return make_model(vocab, layers, hidden, 1, 2, 3, 1024).eval()


@torch.no_grad()
def costs(m, context: int, reps: int) -> tuple[float, float]:
    """Best-of-``reps`` milliseconds of a 1-token and a 6-token cached forward after ``context`` tokens."""
    from transformers import DynamicCache

    ids = torch.randint(4, m.config.vocab_size, (1, context + 6))
    best1 = best6 = float("inf")
    for _ in range(reps):
        cache = DynamicCache(config=m.config)
        m(input_ids=ids[:, :context], past_key_values=cache, use_cache=True)
        t0 = time.perf_counter()
        m(input_ids=ids[:, context:context + 1], past_key_values=cache, use_cache=True)
        best1 = min(best1, time.perf_counter() - t0)
        cache.crop(-1)  # drop the token just added
        t0 = time.perf_counter()
        m(input_ids=ids[:, context:context + 6], past_key_values=cache, use_cache=True)
        best6 = min(best6, time.perf_counter() - t0)
    return best1 * 1e3, best6 * 1e3


@torch.no_grad()
def folder_costs(folders: list[str], context: int, reps: int, rounds: int, after: str | None = None) -> None:
    """Interleaved cached-step times of model folders through the runner hsd drafts with (``drafter_runner``: the
    lean forward where it computes the model exactly, transformers' otherwise), printed as a table. ``after``: a
    target folder; each model's first step after one of its 3-token forwards is timed too (a round's first drafter
    step follows a verification that pushed the drafter's weights out of the caches)."""
    import statistics

    from hsd.lean import LeanRunner, drafter_runner
    from hsd.loading import load_model

    models = {f: load_model(f, device="cpu", dtype="float32") for f in folders}
    target = None
    if after:
        from hsd.runner import Runner

        target = Runner(load_model(after, device="cpu", dtype="float32"))
        target.forward(list(range(4, 4 + context)))
    times: dict[str, list[float]] = {f: [] for f in folders}
    cold: dict[str, list[float]] = {f: [] for f in folders}
    kinds = {}
    for _ in range(rounds):
        for f, m in models.items():
            ids = torch.randint(4, m.n_logits, (context + reps,)).tolist()
            runner = drafter_runner(m)
            kinds[f] = "lean" if isinstance(runner, LeanRunner) else "transformers"
            runner.forward(ids[:context])
            steps, firsts = [], []
            for i in range(context, context + reps):
                if target is not None:
                    target.forward([5, 6, 7], keep=3)
                    target.crop(context)
                    t0 = time.perf_counter()
                    runner.forward([ids[i]])
                    firsts.append(time.perf_counter() - t0)
                    runner.crop(context)
                t0 = time.perf_counter()
                runner.forward([ids[i]])
                steps.append(time.perf_counter() - t0)
            times[f].append(statistics.median(steps) * 1e3)
            if firsts:
                cold[f].append(statistics.median(firsts) * 1e3)
    extra = " first step after a target forward, median |" if target is not None else ""
    print(f"| model | layers x hidden (MLP) | params | runner | step ms, median of rounds | range over rounds |{extra}")
    print("|---|---|---|---|---|---|" + ("---|" if target is not None else ""))
    for f, m in models.items():
        t, cfg = times[f], m.model.config
        print(f"| {f} | {cfg.num_hidden_layers} x {cfg.hidden_size} ({cfg.intermediate_size}) | "
              f"{sum(p.numel() for p in m.model.parameters()):,} | {kinds[f]} | {statistics.median(t):.2f} | "
              f"{min(t):.2f}-{max(t):.2f} |" + (f" {statistics.median(cold[f]):.2f} |" if target is not None else ""))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--context", type=int, default=256, help="tokens already in the cache")
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--agreement", type=float, nargs="+", default=[0.6, 0.7, 0.8])
    ap.add_argument("--lookahead", type=int, default=5)
    ap.add_argument("--folders", nargs="+", default=None, help="measure these model folders instead, interleaved")
    ap.add_argument("--rounds", type=int, default=8, help="--folders: rounds of --reps steps per model")
    ap.add_argument("--after", default=None, metavar="TARGET",
                    help="--folders: also time each model's first step after a 3-token forward of this target")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    from hsd.bench import machine_info, machine_line

    if args.folders:
        print(f"machine: {machine_line(machine_info(None))}; {args.threads} torch thread(s), float32, "
              f"context {args.context}, {args.rounds} rounds of {args.reps} steps")
        folder_costs(args.folders, args.context, args.reps, args.rounds, args.after)
        return 0

    print(f"machine: {machine_line(machine_info(None))}; {args.threads} torch thread(s), float32, "
          f"context {args.context}, best of {args.reps}")
    rows = {}
    print("| role | layers x hidden | params | step ms | verify(6) ms |")
    print("|---|---|---|---|---|")
    for role, vocab, shapes in (("target", 4096, TARGETS), ("drafter", 1024, DRAFTERS), ("bytes", 260, DRAFTERS)):
        for layers, hidden in shapes:
            m = model(vocab, layers, hidden)
            step, verify = costs(m, args.context, args.reps)
            rows[role, layers, hidden] = (step, verify)
            print(f"| {role} | {layers} x {hidden} | {sum(p.numel() for p in m.parameters()):,} | {step:.2f} | "
                  f"{verify:.2f} |")
    k = args.lookahead
    print(f"\ni.i.d. greedy speedup bound at lookahead {k}, drafter vocab 1024: tau / (k c + v)")
    print("| target | drafter | c | v | " + " | ".join(f"a={a}" for a in args.agreement) + " |")
    print("|---|---|---|---|" + "---|" * len(args.agreement))
    for (role, tl, th), (ts, tv) in rows.items():
        if role != "target":
            continue
        for (drole, dl, dh), (ds, _) in rows.items():
            if drole != "drafter":
                continue
            c, v = ds / ts, tv / ts
            cells = []
            for a in args.agreement:
                tau = (1 - a ** (k + 1)) / (1 - a)
                cells.append(f"{tau / (k * c + v):.2f}x")
            print(f"| {tl} x {th} | {dl} x {dh} | {c:.2f} | {v:.2f} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
