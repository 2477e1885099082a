"""How well ``python -m hsd advise`` predicts full benchmark runs: advice first, then a bench run per lookahead.

    python benchmarks/advise_check.py --preset tiny-code --threads 1 --lookaheads 1 3 5 8 12

For each (algorithm, lookahead) it prints the predicted and the measured tokens/s and speedup over AR (the
bench's AR row of the same run) and the prediction error, and writes them to ``--out``/advise_check.{csv,md}.
Prints numbers; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402

from hsd.advise import advise, format_advice  # noqa: E402
from hsd.bench import BenchConfig, load_prompts, run_bench  # noqa: E402
from hsd.benchout import markdown_table, write_csv  # noqa: E402
from hsd.loading import load_pair  # noqa: E402
from hsd.machine import machine_info, machine_line  # noqa: E402


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--preset")
    p.add_argument("--target")
    p.add_argument("--drafter")
    p.add_argument("--device", default="auto")
    p.add_argument("--threads", type=int)
    p.add_argument("--prompts", default="code")
    p.add_argument("--calibration-prompts", type=int, default=4, help="advise uses the first N prompts")
    p.add_argument("--num-prompts", type=int, default=8, help="bench uses the N prompts after those")
    p.add_argument("--temperature", type=float, default=0.0)
    p.add_argument("--algorithms", nargs="+", default=["slem", "tli"])
    p.add_argument("--lookaheads", nargs="+", type=int, default=[1, 3, 5, 8, 12])
    p.add_argument("--max-new-tokens", type=int, default=128)
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--out", type=Path, default=Path("bench-out/advise-check"))
    args = p.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    pair = load_pair(args.target, args.drafter, preset=args.preset, device=args.device)
    prompts = load_prompts(args.prompts)
    calibration, held_out = prompts[:args.calibration_prompts], prompts[args.calibration_prompts:]
    held_out = held_out[:args.num_prompts] or calibration
    print(f"machine: {machine_line(machine_info(pair))}")
    advice = advise(pair, calibration, temperature=args.temperature, algorithms=args.algorithms,
                    max_new_tokens=args.max_new_tokens)
    print(format_advice(advice))
    predicted = {(q["algorithm"], q["lookahead"]): q for q in advice["predictions"]}
    rows = []
    for k in args.lookaheads:
        cfg = BenchConfig(["ar", *args.algorithms], [args.temperature], args.prompts, len(held_out),
                          args.max_new_tokens, k, 1, args.repeats, peer=False)
        report = run_bench(pair, held_out, cfg, log=lambda *_: None)
        by = {r["algorithm"]: r for r in report["rows"]}
        for a in args.algorithms:
            m, q = by[a], predicted[(a, k)]
            rows.append({"algorithm": a, "lookahead": k, "predicted_tokens_per_s": q["tokens_per_s"],
                         "measured_tokens_per_s": m["tokens_per_s"], "predicted_speedup": q["speedup"],
                         "measured_speedup": m["speedup"], "predicted_tau": q["tau"], "measured_tau": m["tau"],
                         "speedup_error": q["speedup"] / m["speedup"] - 1})
            print(f"{a:5s} k={k:2d}  speedup predicted {q['speedup']:.2f} measured {m['speedup']:.2f}  "
                  f"tau predicted {q['tau']:.2f} measured {m['tau']:.2f}")
    args.out.mkdir(parents=True, exist_ok=True)
    write_csv(rows, args.out / "advise_check.csv")
    (args.out / "advice.json").write_text(json.dumps(advice, indent=1, default=str), encoding="utf-8")
    cols = [("algorithm", "algorithm", "s"), ("lookahead", "k", "d"), ("predicted_speedup", "pred. speedup", ".2f"),
            ("measured_speedup", "meas. speedup", ".2f"), ("speedup_error", "error", "+.0%"),
            ("predicted_tau", "pred. τ", ".2f"), ("measured_tau", "meas. τ", ".2f"),
            ("predicted_tokens_per_s", "pred. tok/s", ".1f"), ("measured_tokens_per_s", "meas. tok/s", ".1f")]
    md = f"**Machine:** {machine_line(machine_info(pair))}\n\n{advice['recommendation']['text']}\n\n{markdown_table(rows, cols)}\n"
    (args.out / "advise_check.md").write_text(md, encoding="utf-8")
    print(md)


if __name__ == "__main__":
    main()
