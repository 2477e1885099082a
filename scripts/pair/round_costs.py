"""What a speculative round costs inside the loop, beside what the cost table says (asserts nothing).

``hsd.costs.measure_costs`` (the cost table of ``pair_goals.py --costs`` and the model cards) times single
forwards back to back, with the weights hot in the caches. Inside a round the drafter's first step follows a
target forward that has streamed the target's weights through the caches, and the engine's own work (the
sampler, the field's walk for shared noise, re-tokenizing the draft) sits between the forwards. This runs the
algorithm and AR alternately on held-out prompts and prints, per round: the time split the engine records
(draft / convert / verify / other), the drafter's forwards by their place in the round (the first one, fed one
token or several to catch up with the corrected text, and the later ones), and the shared field's draws; then
the same drafter step measured back to back, and the cost ratio each implies.

    OMP_WAIT_POLICY=PASSIVE python scripts/pair/round_costs.py --preset tiny-code-sampling --temperature 0.7 \\
        --noise shared --lookahead 3
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

import hsd  # noqa: E402
import hsd.lean  # noqa: E402
import hsd.runner  # noqa: E402
import hsd.sampling  # noqa: E402
import hsd.session  # noqa: E402
from hsd.bench import load_prompts, machine_info, machine_line  # noqa: E402
from hsd.costs import measure_costs  # noqa: E402


@contextlib.contextmanager
def instrumented(log: dict):
    """Time the drafter's forwards by their place in the round and the field's draws, restoring everything after."""
    place = [0]
    saved = [(hsd.session.DrafterContext, "draft"), (hsd.sampling, "noise_sample")]
    saved += [(cls, "forward") for cls in {hsd.lean.LeanRunner, hsd.runner.Runner}]
    originals = [(owner, name, getattr(owner, name)) for owner, name in saved]
    draft, draw = hsd.session.DrafterContext.draft, hsd.sampling.noise_sample

    def timed_draft(self, *a, **kw):
        place[0] = 0
        log["drafting"] = True
        try:
            return draft(self, *a, **kw)
        finally:
            log["drafting"] = False

    def forward_of(original):
        def timed_forward(self, ids, keep=1):
            if not log.get("drafting"):
                return original(self, ids, keep)
            started = time.perf_counter()
            out = original(self, ids, keep)
            key = ("first, 1 token" if len(ids) == 1 else "first, several tokens") if place[0] == 0 else "later"
            log["forward"][key].append(time.perf_counter() - started)
            place[0] += 1
            return out
        return timed_forward

    def timed_draw(*a, **kw):
        started = time.perf_counter()
        out = draw(*a, **kw)
        log["draws"].append(time.perf_counter() - started)
        return out

    hsd.session.DrafterContext.draft = timed_draft
    hsd.sampling.noise_sample = timed_draw
    for owner, name, original in originals[2:]:
        setattr(owner, name, forward_of(original))
    try:
        yield
    finally:
        for owner, name, original in originals:
            setattr(owner, name, original)


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", default="tiny-code-sampling")
    ap.add_argument("--pair", default=None,
                    help="a pair folder (target/ and drafter folders) instead of a preset; with --role")
    ap.add_argument("--role", default="drafter", help="the drafter folder of --pair")
    ap.add_argument("--prompt-set", default="code",
                    help="code (held-out files), code-packages (functions of the evaluation packages) or a file")
    ap.add_argument("--algorithm", default="slem", choices=["sd", "slem", "tli"])
    ap.add_argument("--temperature", type=float, default=0.7)
    ap.add_argument("--noise", default="shared", choices=["independent", "shared"])
    ap.add_argument("--lookahead", type=int, default=3)
    ap.add_argument("--threshold", type=float, default=0.0, help="draft_threshold (0: the whole lookahead)")
    ap.add_argument("--prompts", type=int, default=4, help="the first prompts of --prompt-set")
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--max-new-tokens", type=int, default=128)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    if args.pair:
        pair = hsd.load_pair(str(Path(args.pair) / "target"), str(Path(args.pair) / args.role), device="cpu")
        args.preset = f"{args.pair}: target + {args.role}"
    else:
        pair = hsd.load_pair(preset=args.preset, device="cpu")
    prompts = load_prompts(args.prompt_set)[:args.prompts]
    hsd.generate(pair, prompts[0], algorithm=args.algorithm, max_new_tokens=8, temperature=args.temperature)  # warm-up
    log = {"forward": defaultdict(list), "draws": []}
    totals = {"ar": [0, 0.0], "alg": [0, 0.0]}
    rounds, split = 0, defaultdict(float)
    with instrumented(log):
        for i, prompt in enumerate(prompts):
            for seed in range(args.seeds):
                common = dict(max_new_tokens=args.max_new_tokens, temperature=args.temperature, seed=1000 * seed + i)
                ar = hsd.generate(pair, prompt, algorithm="ar", **common)
                del log["draws"][:]  # AR draws with independent noise: only the algorithm's draws are counted
                res = hsd.generate(pair, prompt, algorithm=args.algorithm, lookahead=args.lookahead,
                                   draft_threshold=args.threshold, noise=args.noise, **common)
                for key, r in (("ar", ar), ("alg", res)):
                    totals[key][0] += r.metrics.new_tokens
                    totals[key][1] += r.metrics.total_s
                rounds += res.metrics.rounds
                for part, seconds in res.metrics.time_split_s.items():
                    split[part] += seconds
                log.setdefault("all_draws", []).extend(log["draws"])
    back_to_back = measure_costs(pair, 128, 4, 15)[0]
    ar_ms = 1e3 * totals["ar"][1] / totals["ar"][0]
    out = dict(
        settings=vars(args), machine=machine_info(pair), ar_ms_per_token=ar_ms,
        round_ms=1e3 * totals["alg"][1] / rounds, tokens_per_round=totals["alg"][0] / rounds,
        speedup=(totals["alg"][0] / totals["alg"][1]) / (totals["ar"][0] / totals["ar"][1]),
        split_ms={part: 1e3 * s / rounds for part, s in split.items()},
        drafter_forward_ms={key: dict(calls_per_round=len(v) / rounds, median=1e3 * statistics.median(v))
                            for key, v in sorted(log["forward"].items()) if v},
        draws_per_round=len(log.get("all_draws", [])) / rounds,
        draw_us=1e6 * statistics.median(log["all_draws"]) if log.get("all_draws") else None,
        back_to_back_ms=dict(drafter_step=1e3 * back_to_back.draft, target_step=1e3 * back_to_back.verify_cost(1),
                             verify_4=1e3 * back_to_back.verify_cost(4)))
    print(machine_line(out["machine"]) + f"; {args.preset}, {args.algorithm} at T={args.temperature:g}, "
          f"{args.noise} noise, lookahead {args.lookahead}" + (f" (stop below {args.threshold:g})" if args.threshold else "")
          + f"; {len(prompts)} prompts of {args.prompt_set} x {args.seeds} seeds x {args.max_new_tokens} tokens, AR alternating")
    print(f"AR: {ar_ms:.2f} ms a token; {args.algorithm}: {out['round_ms']:.2f} ms a round, "
          f"{out['tokens_per_round']:.3f} tokens a round, {out['speedup']:.2f}x AR")
    print("| per round | ms |\n|---|---|")
    for part, ms in out["split_ms"].items():
        print(f"| {part} | {ms:.2f} |")
    for key, rec in out["drafter_forward_ms"].items():
        print(f"| drafter forward, {key} ({rec['calls_per_round']:.2f} a round) | {rec['median']:.2f} each |")
    if out["draw_us"] is not None:
        print(f"| the field's draws ({out['draws_per_round']:.2f} a round) | {out['draw_us'] / 1e3:.2f} each |")
    b = out["back_to_back_ms"]
    later = out["drafter_forward_ms"].get("later", {}).get("median")
    print(f"back to back (the cost table's way): drafter step {b['drafter_step']:.2f} ms (c = "
          f"{b['drafter_step'] / b['target_step']:.3f}), target step {b['target_step']:.2f} ms, 4 tokens verified "
          f"{b['verify_4']:.2f} ms" + ("" if later is None else
                                        f"; in the loop a later drafter step is c = {later / ar_ms:.3f} of AR's token"))
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1) + "\n")
    return out


if __name__ == "__main__":
    main()
