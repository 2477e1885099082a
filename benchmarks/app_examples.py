"""The app's examples on the embedded pairs: each example's algorithm against AR, alternating, seed by seed, at the
example's own settings (asserts nothing). Their labels quote the figures of ``--held-out 12`` (code the pair never
saw); hsd/lab.py's comment says so.

    OMP_WAIT_POLICY=PASSIVE python benchmarks/app_examples.py --threads auto --seeds 6   # as the app runs them
    OMP_WAIT_POLICY=PASSIVE python benchmarks/app_examples.py --threads 2 --seeds 6      # both cores, every pair
    OMP_WAIT_POLICY=PASSIVE python benchmarks/app_examples.py --held-out 12              # on code it never saw

``--held-out N`` runs each example's settings on N functions of the packages the pair's corpus holds out whole
(``assets/prompts/code-packages.jsonl``, one per package in turn), seed i on the i-th, instead of on the example's
own prompt: the figure an example's label quotes, since a visitor types code the pair never saw.

``--threads auto`` is the app's choice (:func:`hsd.threads.choose`: one thread for a target under 250M
parameters); a number fixes the count. The bad-drafter example needs a GPU and the Hub, and is skipped.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

import hsd  # noqa: E402
from hsd.bench import machine_info, machine_line  # noqa: E402
from hsd.lab import BAD_DRAFTER, EXAMPLES  # noqa: E402
from hsd.catalogue import GALLERY  # noqa: E402


def settings(example) -> dict:
    """The generation settings an example fills (hsd/lab.py's tuple), AR's left out."""
    label, preset, prompt, algorithm, temperature, lookahead, max_new_tokens, *rest = example
    drafter_t, threshold, shared = (list(rest) + [None, 0.0, False][len(rest):])[:3]
    return dict(algorithm=algorithm, temperature=temperature, lookahead=lookahead, max_new_tokens=max_new_tokens,
                drafter_temperature=drafter_t, draft_threshold=threshold or 0.0,
                noise="shared" if shared else "independent")


def held_out_prompts(n: int) -> list[str]:
    """``n`` functions of the held-out packages, one package after another (the set lists each package's in a row)."""
    from hsd.bench import load_prompts

    prompts = load_prompts("code-packages")
    per_package = 4
    order = [prompts[i + j] for j in range(per_package) for i in range(0, len(prompts), per_package)
             if i + j < len(prompts)]
    return order[:n]


def measure(example, seeds: int, max_new_tokens: int | None = None, prompts: list[str] | None = None) -> dict:
    """AR's and the example's tokens/s summed over ``seeds`` seeds (the order alternating), and how many texts
    were AR's; with ``prompts``, seed i on the i-th of them instead of every seed on the example's own prompt."""
    label, preset, own = example[:3]
    prompts = prompts or [own] * seeds
    kw = settings(example)
    if max_new_tokens:
        kw["max_new_tokens"] = max_new_tokens
    pair = hsd.load_pair(*GALLERY[preset], device="cpu")
    algorithm = kw.pop("algorithm")
    hsd.generate(pair, prompts[0], algorithm=algorithm, **{**kw, "max_new_tokens": 8})  # warm-up
    ar_kw = dict(temperature=kw["temperature"], max_new_tokens=kw["max_new_tokens"], noise=kw["noise"])
    sums = {"ar": [0, 0.0], algorithm: [0, 0.0]}
    same = 0
    for seed, prompt in enumerate(prompts):
        out = {}
        for name in (("ar", algorithm) if seed % 2 == 0 else (algorithm, "ar")):
            res = hsd.generate(pair, prompt, algorithm=name, seed=seed, **(ar_kw if name == "ar" else kw))
            sums[name][0] += len(res.token_ids)
            sums[name][1] += res.metrics["total_s"]
            out[name] = res.token_ids
        same += out["ar"] == out[algorithm]
    ar, sd = (sums[n][0] / sums[n][1] for n in ("ar", algorithm))
    return dict(label=label, algorithm=algorithm, ar_tps=ar, tps=sd, speedup=sd / ar, same=same, seeds=len(prompts))


def main(argv=None) -> list[dict]:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", default="auto", help="'auto' (the app's choice) or a count")
    ap.add_argument("--seeds", type=int, default=6)
    ap.add_argument("--max-new-tokens", type=int, default=None, help="override every example's (a quick check)")
    ap.add_argument("--only", nargs="+", type=int, default=None, help="example indexes (default: all but the GPU one)")
    ap.add_argument("--held-out", type=int, default=None, metavar="N",
                    help="on N functions of the held-out packages (seed i on the i-th) instead of each example's prompt")
    args = ap.parse_args(argv)
    if args.threads == "auto":
        hsd.threads.choose("auto")
    elif args.threads.isdigit() and int(args.threads) >= 1:
        hsd.threads.choose(int(args.threads))
        torch.set_num_threads(int(args.threads))
    else:
        ap.error(f"--threads: 'auto' or a positive count, not {args.threads!r}")
    chosen = [e for i, e in enumerate(EXAMPLES) if e[1] != BAD_DRAFTER and (args.only is None or i in args.only)]
    first = hsd.load_pair(*GALLERY[chosen[0][1]], device="cpu")
    hsd.threads.apply(hsd.threads.for_pair(first))  # the machine line names the threads the runs use
    prompts = held_out_prompts(args.held_out) if args.held_out else None
    where = (f"{len(prompts)} functions of the held-out packages, one seed each" if prompts else
             f"{args.seeds} seeds on each example's own prompt")
    print(machine_line(machine_info(first)) + f"; threads {args.threads}; {where}, AR and the example alternating")
    print("| example | AR tok/s | tok/s | speedup | AR's text |")
    print("|---|---|---|---|---|")
    rows = []
    for example in chosen:
        row = measure(example, args.seeds, args.max_new_tokens, prompts)
        print(f"| {row['label']} | {row['ar_tps']:.1f} | {row['tps']:.1f} | {row['speedup']:.2f}x | "
              f"{row['same']}/{row['seeds']} |", flush=True)
        rows.append(row)
    return rows


if __name__ == "__main__":
    main()
