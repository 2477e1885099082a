"""How the drafter's context follows the emitted text, and what that does to acceptance (issue 16, part 4).

After each round the drafter's context must spell the emitted text. ``canonical`` re-encodes the text around
the round's end with the drafter's tokenizer (so accepted drafted tokens may be rewritten, and on a shared
vocabulary the target's own ids are replaced by the drafter's re-encoding); ``own`` (the default) uses the
target's ids where the vocabulary is the same and re-encodes otherwise; ``fixed`` never rewrites a kept token
(the drafter's accepted drafts stay as drafted; only new text is spelled). See hsd/algorithms/common.py,
``DRAFTER_CONTEXT``. All are lossless (docs/design.md, Drafter context); this prints what each does to
acceptance on the same prompts, seeds and settings, in one run:

    OMP_WAIT_POLICY=PASSIVE python benchmarks/drafter_context.py --prompts 8

Acceptance is per verified position (accepted / (accepted + rejected)); τ is tokens emitted per round.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import hsd  # noqa: E402
from hsd.algorithms import common  # noqa: E402
from hsd.machine import machine_info, machine_line  # noqa: E402

PAIRS = {  # label -> (target, drafter)
    "tiny-code (BPE 4096 <- SentencePiece-style)": ("assets/tiny-code/target", "assets/tiny-code/drafter"),
    "tiny-code-bytes (<- byte-level)": ("assets/tiny-code/target", "assets/tiny-code/drafter-bytes"),
    "target as its own drafter (shared vocabulary)": ("assets/tiny-code/target", "assets/tiny-code/target"),
}
SETTINGS = [("slem", 0.7), ("tli", 0.7), ("tli", 1.0)]
POLICIES = ("canonical", "own", "fixed")
DEFAULT = common.DRAFTER_CONTEXT


def measure(pair, algorithm, temperature, prompts, max_new_tokens, lookahead):
    verified = accepted = emitted = rounds = 0
    for i, prompt in enumerate(prompts):
        res = hsd.generate(pair, prompt, algorithm=algorithm, temperature=temperature, lookahead=lookahead,
                           max_new_tokens=max_new_tokens, seed=1000 + i)
        for r in res.rounds:
            outcomes = [p.outcome for p in r.positions]
            verified += sum(o in ("accepted", "rejected") for o in outcomes)
            accepted += outcomes.count("accepted")
            emitted += len(r.emitted)
            rounds += 1
    return accepted / max(verified, 1), emitted / max(rounds, 1)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--prompts", type=int, default=8, help="held-out code prompts (assets/prompts/code.jsonl)")
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--lookahead", type=int, default=5)
    ap.add_argument("--json", help="also write the numbers here")
    args = ap.parse_args(argv)
    lines = (ROOT / "assets/prompts/code.jsonl").read_text(encoding="utf-8").splitlines()
    prompts = [json.loads(line)["prompt"] for line in lines[:args.prompts]]
    print(machine_line(machine_info()))
    print(f"{len(prompts)} prompts, {args.max_new_tokens} new tokens, lookahead {args.lookahead}\n")
    print(f"{'pair':46} {'algorithm':9} {'T':>4}  " + "  ".join(f"{p + ': acc':>14} {'τ':>5}" for p in POLICIES))
    rows = []
    for label, (target, drafter) in PAIRS.items():
        pair = hsd.load_pair(str(ROOT / target), str(ROOT / drafter), device="cpu", dtype="float32")
        for algorithm, temperature in SETTINGS:
            if algorithm not in hsd.usable_algorithms(pair):
                continue
            row = dict(pair=label, algorithm=algorithm, temperature=temperature)
            for policy in POLICIES:
                common.DRAFTER_CONTEXT = policy
                row[policy] = measure(pair, algorithm, temperature, prompts, args.max_new_tokens, args.lookahead)
            common.DRAFTER_CONTEXT = DEFAULT
            print(f"{label:46} {algorithm:9} {temperature:4g}  "
                  + "  ".join(f"{row[p][0]:14.3f} {row[p][1]:5.2f}" for p in POLICIES), flush=True)
            rows.append(row)
    if args.json:
        Path(args.json).write_text(json.dumps({"machine": machine_line(machine_info()), "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
