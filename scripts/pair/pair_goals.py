"""The embedded pair's goals, measured on held-out prompts and printed (asserts nothing).

    OMP_WAIT_POLICY=PASSIVE python scripts/pair/pair_goals.py --work ~/.cache/hsd-train --lookahead auto
    OMP_WAIT_POLICY=PASSIVE python scripts/pair/pair_goals.py --skip-bpc --write-cards

``--prompt-set`` says what is measured (:data:`PROMPT_SETS`): ``packages`` (the default) measures on
``assets/prompts/code-packages.jsonl``, functions of the PyPI packages the corpus holds out whole for evaluation,
chooses settings on ``code-calibration.jsonl``, functions of the calibration packages, and scores bits per
character on the evaluation packages' text; ``files`` measures on ``code.jsonl``, functions of held-out
standard-library files, keeps its last ``--calibration-prompts`` for choosing settings, and scores the held-out
split training scores itself on. The output names the prompt files and the split.

1. Bits per character of the target on the set's corpus split (needs the work folder of
   ``scripts/train_pair.py resume``; ``evaluation`` is packed there on first use; cached by weights digest).
   Goal <= 1.2 on the evaluation packages (``--prompt-set packages``), <= 1.0 on the held-out files.
2. Greedy target text on the set's measured prompts (all of them unless ``--quality-prompts``), 96 new tokens:
   mean share of distinct 4-grams of target tokens, with its standard error. Goal >= 0.7.
3. Speed against hsd's AR in the same run, prompt by prompt (AR and the algorithm alternate, so a
   change in the machine's load hits both), on the evaluation packages: greedy SLEM >= 1.8x; TLI at T=1 >= 1.1x
   and SLEM at T=0.7 (shared noise) >= 1.2x, both with the drafter for sampling, ``drafter-sampling`` (the greedy
   drafter's rows beside them have no goal); SLRS with the byte drafter at T=0 >= 1.0x (``PROMPT_SETS`` holds
   each set's goals; on the held-out files greedy SLEM's is 2.0x and TLI's 1.0x). Speedup =
   (total tokens / total seconds) of the algorithm over the same for AR.

``--lookahead auto`` chooses each goal's lookahead by measurement on the set's first 4 calibration prompts (never
among the measured ones): the fastest of 1, 2, 3, 5 and 8, of a dynamic lookahead (up to 12, stopping after a
drafted token the drafter gives less than 0.5 or 0.7: ``draft_threshold``), and when sampling also whether the
drafter drafts at the target's temperature or greedily (``drafter_temperature=0``, lossless like any drafter
distribution). No goal fixes a lookahead, since a user would tune it (the app's Advise does); a fixed 5
under-states the algorithms that accept little per round.

``--write-cards`` puts the table into the target's model card (``hsd-engine`` block).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import sysconfig
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

import torch  # noqa: E402

import hsd  # noqa: E402
from hsd.bench import machine_info, machine_line  # noqa: E402

PROMPTS = ROOT / "assets" / "prompts"
#: --prompt-set: the measured prompts' file in assets/prompts, the calibration prompts' file (None: the last
#: --calibration-prompts of the measured file, then never measured), the corpus split bits/char is scored on
#: (WORK/corpus/SPLIT.jsonl), and what the prompts are, for the output
PROMPT_SETS = {
    # goals: bits/char at most, and speedup over AR at least by (algorithm, temperature); the packages' goals are
    # lower where code the pair never saw is harder to predict, the files' are those of the same-package split
    "packages": dict(measured="code-packages", calibration="code-calibration", split="evaluation", bpc_goal=1.2,
                     speed_goals={("slem", 0.0): 1.8, ("tli", 1.0): 1.1, ("slem", 0.7): 1.2, ("slrs", 0.0): 1.0},
                     about="functions of the evaluation packages, held out of training whole",
                     calibration_about="prompts of `code-calibration.jsonl` (functions of the calibration packages, "
                                       "never measured)"),
    "files": dict(measured="code", calibration=None, split="heldout", bpc_goal=1.0,
                  speed_goals={("slem", 0.0): 2.0, ("tli", 1.0): 1.0, ("slem", 0.7): 1.2, ("slrs", 0.0): 1.0},
                  about="functions of held-out standard-library files",
                  calibration_about="other held-out prompts"),
}

# (preset, algorithm, temperature, goal, noise): the speed goals, each measured with the drafter and the
# noise the demo uses for it (sampling: the drafter trained on the target's distribution, tiny-code-sampling;
# SLEM when sampling: shared noise, hsd/noise.py), and rows without a goal that show the other drafter or the
# other noise at the same setting. AR, the baseline, always draws with independent noise (its fastest sampler).
SPEED = [
    ("tiny-code", "slem", 0.0, 2.0, "independent"),
    ("tiny-code", "tli", 0.0, None, "independent"),
    ("tiny-code-sampling", "tli", 1.0, 1.0, "independent"),
    ("tiny-code", "tli", 1.0, None, "independent"),
    ("tiny-code-sampling", "slem", 1.0, None, "shared"),
    ("tiny-code-sampling", "slem", 0.7, 1.2, "shared"),
    ("tiny-code", "slem", 0.7, None, "shared"),
    ("tiny-code", "slem", 0.7, None, "independent"),
    ("tiny-code-bytes", "slrs", 0.0, 1.0, "independent"),
]


def distinct_4gram_share(ids: list[int]) -> float:
    grams = [tuple(ids[i:i + 4]) for i in range(len(ids) - 3)]
    return len(set(grams)) / len(grams) if grams else 0.0


def quality(pair, prompts, new_tokens: int):
    rows = []
    for prompt in prompts:
        res = hsd.generate(pair, prompt, algorithm="ar", max_new_tokens=new_tokens, temperature=0.0)
        rows.append(dict(prompt=prompt, text=res.text, share=distinct_4gram_share(res.token_ids)))
    return rows


AUTO_LOOKAHEADS = (1, 2, 3, 5, 8)
BYTES_PER_TOKEN = 3.6  # the target's characters (bytes) per token on held-out code: a byte drafter's cost per position
# dynamic lookaheads (lookahead, draft_threshold): draft up to 12 tokens, stopping after one the drafter doubts
AUTO_DYNAMIC = ((12, 0.5), (12, 0.7))
CALIBRATION = 4  # calibration prompts that choose the lookahead; never measured


def prompt_rows(name: str) -> list[dict]:
    """The rows of ``assets/prompts/NAME.jsonl``: each prompt with the file (``source``) it was cut from."""
    return [json.loads(line) for line in (PROMPTS / f"{name}.jsonl").read_text(encoding="utf-8").splitlines()
            if line.strip()]


def select_prompts(prompt_set: str, n_calibration: int) -> tuple[list[dict], list[dict]]:
    """(measurable, calibration) rows of a :data:`PROMPT_SETS` entry: ``n_calibration`` rows from its calibration
    file, or the measured file's last ones, which are then left out of the measurable."""
    spec = PROMPT_SETS[prompt_set]
    rows = prompt_rows(spec["measured"])
    own = spec["calibration"] is None
    others = rows if own else prompt_rows(spec["calibration"])
    if not 1 <= n_calibration <= len(others) - own:
        raise ValueError(f"--calibration-prompts: between 1 and {len(others) - own} with --prompt-set {prompt_set}, "
                         f"not {n_calibration}")
    if own:
        return rows[:-n_calibration], rows[-n_calibration:]
    return rows, others[:n_calibration]


def choose_lookahead(pair, algorithm, temperature, prompts, max_new_tokens, noise="independent") -> tuple[tuple, dict]:
    """The (lookahead, drafter temperature, draft threshold) with the most tokens/s on ``prompts`` (calibration
    prompts, never the measured ones), measured directly: each candidate runs every prompt once.

    * Lookaheads :data:`AUTO_LOOKAHEADS`, and for the algorithms that draft token by token (SD, SLEM, TLI) the
      dynamic ones :data:`AUTO_DYNAMIC` (``draft_threshold``: a round stops drafting after a token the drafter
      doubts).
    * When sampling, the drafter may also draft greedily (drafter temperature 0): the drafter's distribution is
      a free choice that changes acceptance, never the output, and a greedy drafter maximises an exact match's
      chance (``Σ p·q`` is at most ``max p``, reached by drafting the argmax)."""
    shapes = [(k, 0.0) for k in AUTO_LOOKAHEADS] + (list(AUTO_DYNAMIC) if algorithm != "slrs" else [])
    rates = {}
    for drafter_t in ((None, 0.0) if temperature > 0 else (None,)):
        for k, threshold in shapes:
            tokens = seconds = 0
            for i, prompt in enumerate(prompts):
                res = hsd.generate(pair, prompt, algorithm=algorithm, max_new_tokens=max_new_tokens,
                                   temperature=temperature, lookahead=k, seed=1000 + i, drafter_temperature=drafter_t,
                                   draft_threshold=threshold, noise=noise)
                tokens, seconds = tokens + len(res.token_ids), seconds + res.metrics["total_s"]
            rates[k, drafter_t, threshold] = tokens / seconds
    return max(rates, key=rates.get), rates


def setting_text(k, drafter_t, threshold=0.0) -> str:
    return (f"{k}" + ("" if not threshold else f" (stop below {threshold:g})")
            + ("" if drafter_t is None else f", drafter T={drafter_t:g}"))


def source_texts(rows: list[dict], corpus_split: Path) -> dict[str, str]:
    """The files the prompt rows were cut from (``source``: ``path:line``), by path: a held-out package's file
    from ``corpus_split`` (a split file of the corpus, e.g. ``WORK/corpus/evaluation.jsonl``) or a
    standard-library file; those not on this machine are missing."""
    paths = {row["source"].rsplit(":", 1)[0] for row in rows}
    if any("package" in row for row in rows):
        if not corpus_split.is_file():
            return {}
        with corpus_split.open(encoding="utf-8") as f:
            docs = (json.loads(line) for line in f)
            return {d["path"]: d["text"] for d in docs if d["path"] in paths}
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    return {p: (stdlib / p).read_text(encoding="utf-8", errors="replace") for p in paths if (stdlib / p).is_file()}


def human_share(tokenizer, rows: list[dict], new_tokens: int, texts: dict[str, str]) -> float | None:
    """The same measure on what the source files themselves write after each prompt (``texts``:
    :func:`source_texts`), tokenized by the target: the share a model that wrote like the corpus would get.
    None unless every prompt's file is there."""
    shares = []
    for row in rows:
        text = texts.get(row["source"].rsplit(":", 1)[0], "")
        if row["prompt"] in text:
            rest = text[text.index(row["prompt"]) + len(row["prompt"]):]
            shares.append(distinct_4gram_share(tokenizer.encode(rest[:1500], add_special_tokens=False)[:new_tokens]))
    return statistics.mean(shares) if rows and len(shares) == len(rows) else None


def requirement(goal: float, c: float, verify_steps, per_draft: float, k_max: int = 12) -> dict:
    """What a goal asks of the drafter in the i.i.d. model with these forward costs and no engine overhead: the
    smallest per-proposal acceptance ``a`` for which some number of proposals ``m`` reaches ``goal``, with
    ``speedup = tau / ((m / per_draft) c + v(m + 1))`` (``m / per_draft`` drafter steps make ``m`` target
    proposals) and ``tau = (1 - a^(m+1)) / (1 - a)``; and the ceiling at ``a = 1``. ``verify_steps(n)``: a target
    forward of ``n`` tokens in target steps."""
    def best(a):
        out = (0.0, 1)
        for m in range(1, k_max + 1):
            tau = m + 1 if a >= 1 else (1 - a ** (m + 1)) / (1 - a)
            out = max(out, (tau / (m / per_draft * c + verify_steps(m + 1)), m))
        return out
    ceiling, k_ceiling = best(1.0)
    need = next(((a / 100, best(a / 100)[1]) for a in range(0, 101) if best(a / 100)[0] >= goal), (None, None))
    return dict(needed_acceptance=need[0], needed_at_k=need[1], ceiling=ceiling, ceiling_k=k_ceiling)


def speed(pair, algorithm, temperature, prompts, args, lookahead, drafter_t=None, threshold=0.0, noise="independent"):
    totals = {"ar": [0, 0.0], algorithm: [0, 0.0]}
    taus, accepts, verified = [], [], []
    drafted = proposed = 0
    for i, prompt in enumerate(prompts):
        for name in ("ar", algorithm):
            res = hsd.generate(pair, prompt, algorithm=name, max_new_tokens=args.max_new_tokens,
                               temperature=temperature, lookahead=lookahead, seed=i,
                               drafter_temperature=None if name == "ar" else drafter_t,
                               draft_threshold=0.0 if name == "ar" else threshold,
                               noise="independent" if name == "ar" else noise)
            totals[name][0] += len(res.token_ids)
            totals[name][1] += res.metrics["total_s"]
            if name != "ar":
                taus.append(res.metrics["mean_accepted_length"] or 0.0)
                accepts.append(res.metrics["draft_acceptance_rate"] or 0.0)
                verified.append(res.metrics["verified_acceptance_rate"] or 0.0)
                drafted += sum(len(r.drafted) for r in res.rounds)
                proposed += sum(r.n_proposed for r in res.rounds)
    ar_tps = totals["ar"][0] / totals["ar"][1]
    alg_tps = totals[algorithm][0] / totals[algorithm][1]
    return dict(ar_tps=ar_tps, tps=alg_tps, speedup=alg_tps / ar_tps, tau=statistics.mean(taus),
                acceptance=statistics.mean(accepts), lookahead=setting_text(lookahead, drafter_t, threshold),
                proposals_per_drafted=proposed / drafted if drafted else None,
                verified_acceptance=statistics.mean(verified))


def bits_per_char(work: Path, target: Path, split: str) -> dict | None:
    """Bits/char of the target in ``target`` (the one whose speed is measured, not always the shipped) on a split
    of the corpus in ``work``: ``heldout`` as training packed it, or another split file (``evaluation``: the
    evaluation packages), packed on first use by ``resumable.pack_split``. None if ``work`` has no such split."""
    import resumable

    packed = work / "packed" / "target-heldout.u16"
    if not (packed if split == "heldout" else work / "corpus" / f"{split}.jsonl").is_file():
        return None
    model, tok = resumable.load_init(Path(target))
    if split == "heldout":
        chars = resumable.prepare_data(work, "target", tok)["heldout"]["chars"]
    else:
        meta = resumable.pack_split(work, "target", tok, split)
        packed, chars = meta["path"], meta["chars"]
    held = resumable.load_stream(packed)
    return dict(resumable.cached_heldout(work, "target", model.eval(), held, chars, 256, split), split=split)


def cost_table(pairs: dict, machine: str) -> tuple[str, dict]:
    """The forward costs behind the speedups, through hsd's runner, for the model cards' Measurements block:
    the target's step and verification of n tokens, and each drafter's step, with 128 tokens cached."""
    from hsd.costs import measure_costs

    costs = {name: measure_costs(pair, 128, 9, 15)[0] for name, pair in pairs.items()}
    first = next(iter(costs.values()))
    step = first.verify_cost(1)
    lines = [f"Measured with `python scripts/pair/pair_goals.py --write-cards` on {time.strftime('%Y-%m-%d')}: {machine}; "
             "hsd's runner, batch 1, 128 tokens in the KV cache, the median of 15 forwards.", "",
             f"- Target decoding step (AR's cost per token): **{step * 1e3:.2f} ms**"]
    for name, c in costs.items():
        lines.append(f"- Drafter step, {name}: {c.draft * 1e3:.2f} ms (cost ratio c = {c.draft / step:.3f})")
    lines += ["", "| tokens verified at once | target forward (ms) | in target steps |", "|---|---|---|"]
    lines += [f"| {n} | {first.verify_cost(n) * 1e3:.2f} | {first.verify_cost(n) / step:.2f} |" for n in range(1, 10)]
    data = {name: c.to_dict() for name, c in costs.items()}
    return "\n".join(lines), data


def table(rows, machine: str, args) -> str:
    spec = PROMPT_SETS[args.prompt_set]
    lines = [f"Measured with `python scripts/pair/pair_goals.py --prompt-set {args.prompt_set}` on "
             f"{time.strftime('%Y-%m-%d')}: {machine}; {args.prompts} prompts of `{spec['measured']}.jsonl` "
             f"({spec['about']}) x {args.max_new_tokens} new tokens, "
             + ("the lookahead of each row (and, when sampling, whether the drafter drafts greedily) chosen on "
                f"{args.calibration_prompts} {spec['calibration_about']}, the fastest of k = "
                f"{', '.join(map(str, AUTO_LOOKAHEADS))} and up to 12 "
                "stopping after a drafted token the drafter gives less than 0.5 or 0.7 (SD, SLEM, TLI), "
                if args.lookahead == "auto" else f"lookahead {args.lookahead}, ")
             + "AR and the algorithm alternating prompt by prompt in one run.", "",
             "| drafter | algorithm | T | noise | k | AR tok/s | tok/s | speedup vs AR | goal | τ | acceptance |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        goal = f"≥ {r['goal']}×" if r["goal"] else "—"
        lines.append(f"| {r['preset']} | {r['algorithm']} | {r['temperature']} | {r.get('noise', 'independent')} | {r['lookahead']} | {r['ar_tps']:.1f} | {r['tps']:.1f} | "
                     f"**{r['speedup']:.2f}×** | {goal} | {r['tau']:.2f} | {r['acceptance']:.1%} |")
    missed = missed_lines(rows)
    if missed:
        lines += ["", "Goals missed, in numbers (the i.i.d. model with the forward costs above; the engine's own work per "
                  "round comes on top; what would close them: hsd's `docs/embedded-pair.md`):", ""] + missed
    return "\n".join(lines)


def missed_lines(rows) -> list[str]:
    """One Markdown bullet per missed speed goal: by how much, its τ and acceptance against what the goal needs,
    the drafter's cost ratio and the ceiling at acceptance 1 (rows measured with ``--costs``)."""
    out = []
    for r in rows:
        req = r.get("requirement")
        if not r.get("goal") or r["speedup"] >= r["goal"] or not req:
            continue
        need = ("no acceptance reaches it" if req["needed_acceptance"] is None else
                f"needs {req['needed_acceptance']:.2f} accepted per verified proposal, has "
                f"{r['verified_acceptance']:.2f}")
        shared = " with shared noise" if r.get("noise") == "shared" else ""
        line = (f"- {r['preset']} {r['algorithm']} at T={r['temperature']}{shared}: **{r['speedup']:.2f}×** against "
                f"{r['goal']}× ({1 - r['speedup'] / r['goal']:.0%} short); τ {r['tau']:.2f}; {need}; drafter cost "
                f"ratio c = {req.get('cost_ratio', float('nan')):.3f}; ceiling at acceptance 1: {req['ceiling']:.2f}×.")
        o = r.get("oracle")
        if o:
            reach = ("out of reach for any drafter as cheap as the smallest model" if o["smallest"] < r["goal"] else
                     "within reach of a better drafter")
            line += (f" An oracle drafter (the target's own best proposal, `scripts/pair/oracle_ceiling.py`) is accepted "
                     f"at {o['acceptance']:.2f} of positions and would reach at most {o['free']:.2f}× if drafting were "
                     f"free, {o['smallest']:.2f}× at the smallest model's cost: {reach}.")
        out.append(line)
    return out


def attach_oracle(rows, path: str) -> None:
    """Give each row with a goal the bounds ``scripts/pair/oracle_ceiling.py --json`` measured for its setting."""
    saved = json.loads(Path(path).read_text())
    bounds = {(o["algorithm"], o["temperature"]): dict(acceptance=o["oracle_acceptance"], free=o["free"]["speedup"],
                                                         smallest=o["smallest"]["speedup"])
              for o in saved["rows"]}
    for r in rows:  # the oracle bounds independent noise (an exact match at most max p); shared noise is not bound
        if (r["algorithm"], r["temperature"]) in bounds and r.get("noise", "independent") == "independent":
            r["oracle"] = bounds[(r["algorithm"], r["temperature"])]


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", default="~/.cache/hsd-train", help="resume's work folder (corpus, packed held-out)")
    ap.add_argument("--skip-bpc", action="store_true")
    ap.add_argument("--prompt-set", choices=sorted(PROMPT_SETS), default="packages",
                    help="packages: measure on functions of the evaluation packages, calibrate on the calibration "
                         "packages', bits/char on the evaluation packages; files: the held-out standard-library "
                         "files' prompts (code.jsonl), its last prompts calibrating (default: packages)")
    ap.add_argument("--prompts", type=int, default=12)
    ap.add_argument("--quality-prompts", type=int, default=None,
                    help="prompts for the greedy-text measure (default: every measurable prompt of the set; the share "
                         "varies a lot from prompt to prompt, so a handful is a noisy estimate)")
    ap.add_argument("--quality-tokens", type=int, default=96)
    ap.add_argument("--max-new-tokens", type=int, default=128)
    ap.add_argument("--lookahead", default="5",
                    help="drafted tokens per round (SLRS: target positions), or 'auto': for each goal the fastest of "
                         f"{AUTO_LOOKAHEADS} on --calibration-prompts calibration prompts of the set, which are never "
                         "measured")
    ap.add_argument("--calibration-prompts", type=int, default=CALIBRATION,
                    help=f"--lookahead auto: how many calibration prompts (default {CALIBRATION}; more is slower and "
                         "closer to the measured prompts' mix of easy and hard code); with --prompt-set files, the "
                         "last ones of code.jsonl, left out of the measured ones")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--write-cards", action="store_true", help="fill the target card's hsd-engine block")
    ap.add_argument("--json", default=None, help="also write every number here")
    ap.add_argument("--pair", default=str(ROOT / "assets" / "tiny-code"),
                    help="folder with target/, drafter/, drafter-bytes/ and drafter-sampling/ (default: the embedded "
                         "pair)")
    ap.add_argument("--target", default=None, help="override the pair's target folder")
    ap.add_argument("--drafter", default=None, help="override the pair's drafter folder")
    ap.add_argument("--drafter-bytes", default=None, help="override the pair's byte-level drafter folder")
    ap.add_argument("--drafter-sampling", default=None,
                    help="override the pair's drafter for sampling (drafter-sampling/, TLI at T=1)")
    ap.add_argument("--only", default=None, help="measure only these goals, e.g. slem@0,tli@1 (algorithm@T)")
    ap.add_argument("--skip-quality", action="store_true", help="skip the greedy-text quality measurement")
    ap.add_argument("--skip-speed", action="store_true", help="skip the speed goals (bits/char and text quality only)")
    ap.add_argument("--costs", action="store_true", help="also measure and print the forward costs (--write-cards does)")
    ap.add_argument("--cards-from", default=None, metavar="JSON",
                    help="fill the target card from a run saved with --json (and --costs), measuring nothing: for "
                         "when the run measured a candidate before it was shipped")
    ap.add_argument("--oracle", default=None, metavar="JSON",
                    help="the bounds `scripts/pair/oracle_ceiling.py --json` wrote: each missed goal says whether any "
                         "drafter could reach it")
    return ap


def measure_quality(pair, measurable: list[dict], args, work: Path, spec: dict, out: dict) -> None:
    """The greedy text's distinct 4-gram share on the set's measurable prompts (and the source files' own, for
    comparison), into ``out``."""
    quality_rows = measurable[:args.quality_prompts or len(measurable)]
    q = quality(pair, [r["prompt"] for r in quality_rows], args.quality_tokens)
    shares = [r["share"] for r in q]
    out["distinct_4gram_share"] = statistics.mean(shares)
    out["distinct_4gram_stderr"] = statistics.stdev(shares) / len(shares) ** 0.5 if len(shares) > 1 else None
    out["quality_prompts"] = len(q)
    out["samples"] = q[:3]
    print(f"greedy distinct 4-gram share over {len(q)} held-out prompts: {out['distinct_4gram_share']:.3f}"
          + (f" +- {out['distinct_4gram_stderr']:.3f} (standard error)" if out["distinct_4gram_stderr"] else "")
          + " (goal >= 0.7)")
    texts = source_texts(quality_rows, work / "corpus" / f"{spec['split']}.jsonl")
    out["human_4gram_share"] = human_share(pair.target.tokenizer, quality_rows,
                                           args.quality_tokens, texts)
    if out["human_4gram_share"] is not None:
        print(f"  the source files' own continuations of the same prompts: {out['human_4gram_share']:.3f}")
    for r in q[:3]:
        print("---\n" + r["prompt"] + r["text"])


def measure_speed(pairs: dict, wanted: list, spec: dict, prompts: list[str], calibration: list[str], args) -> list[dict]:
    """Each wanted goal against AR, its lookahead chosen on the calibration prompts when ``--lookahead auto``."""
    rows = []
    for preset, algorithm, temperature, goal, noise in wanted:
        goal = spec["speed_goals"].get((algorithm, temperature)) if goal is not None else None
        pair = pairs[preset]
        hsd.generate(pair, prompts[0], algorithm=algorithm, max_new_tokens=8, temperature=temperature)  # warm-up
        (k, drafter_t, threshold), rates = (args.lookahead, None, 0.0), None
        if k == "auto":
            (k, drafter_t, threshold), rates = choose_lookahead(pair, algorithm, temperature, calibration,
                                                                args.max_new_tokens, noise)
            print(f"{preset:16s} {algorithm:5s} T={temperature:<4} lookahead {setting_text(k, drafter_t, threshold)} "
                  "(calibration tok/s: " + ", ".join(f"k={setting_text(*kk)} {v:.1f}" for kk, v in rates.items()) + ")")
            rates = {setting_text(*kk): v for kk, v in rates.items()}
        row = dict(preset=preset, algorithm=algorithm, temperature=temperature, goal=goal, noise=noise,
                   **speed(pair, algorithm, temperature, prompts, args, k, drafter_t, threshold, noise),
                   calibration=rates)
        rows.append(row)
        verdict = "" if goal is None else ("  met" if row["speedup"] >= goal else f"  MISSED (goal {goal}x)")
        print(f"{preset:16s} {algorithm:5s} T={temperature:<4} {noise:11s} AR {row['ar_tps']:7.1f} tok/s  {row['tps']:7.1f} tok/s  "
              f"{row['speedup']:.2f}x  k {row['lookahead']}  tau {row['tau']:.2f}  acceptance {row['acceptance']:.1%}{verdict}")
    return rows


def print_requirements(rows: list[dict], costs: dict) -> None:
    """What acceptance each goal asks of its drafter at the measured costs (i.i.d. model), into each row."""
    print("What each goal asks of its drafter (i.i.d. model, the costs above, no engine overhead):")
    for row in rows:
        c = costs[row["preset"]]
        step = c["verify_1_ms"]
        v = lambda n, c=c, step=step: c.get(f"verify_{min(n, 9)}_ms", c["verify_9_ms"]) / step  # noqa: E731
        per_draft = row["proposals_per_drafted"] or 1.0
        if row["algorithm"] == "slrs":  # one target position costs bytes-per-token drafter steps
            per_draft = 1.0 / BYTES_PER_TOKEN
        if row["goal"]:
            row["requirement"] = requirement(row["goal"], c["draft_ms"] / step, v, per_draft)
            r = row["requirement"]
            r["cost_ratio"] = c["draft_ms"] / step
            need = ("unreachable at any acceptance" if r["needed_acceptance"] is None else
                    f"needs acceptance >= {r['needed_acceptance']:.2f} per proposal (at {r['needed_at_k']} proposals)")
            print(f"  {row['preset']} {row['algorithm']} T={row['temperature']}: goal {row['goal']}x {need}; "
                  f"measured {row['verified_acceptance']:.2f} (accepted/verified); ceiling at acceptance 1: {r['ceiling']:.2f}x ({r['ceiling_k']} "
                  "proposals), "
                  f"c = {c['draft_ms'] / step:.3f}, {per_draft:.2f} target proposals per drafter token")


def choose_prompts(ap, args, spec: dict) -> tuple[list[dict], list[str], list[str], str]:
    """The set's measurable rows, the measured prompts, the calibration prompts and the calibration file's name."""
    try:
        measurable, calibration_rows = select_prompts(args.prompt_set, args.calibration_prompts)
    except ValueError as exc:
        ap.error(str(exc))
    if args.prompts > len(measurable):
        ap.error(f"--prompts: at most {len(measurable)} with --prompt-set {args.prompt_set} (its calibration prompts "
                 "are never measured)")
    prompts, calibration = [r["prompt"] for r in measurable[:args.prompts]], [r["prompt"] for r in calibration_rows]
    calibration_file = f"{spec['calibration'] or spec['measured']}.jsonl"
    print(f"prompt set {args.prompt_set}: measured on assets/prompts/{spec['measured']}.jsonl ({spec['about']}); "
          f"--lookahead auto calibrates on {len(calibration)} prompts of {calibration_file}"
          + ("" if spec["calibration"] else " (its last ones)") + f"; bits/char on the corpus split {spec['split']}")
    return measurable, prompts, calibration, calibration_file


def main(argv=None) -> int:
    ap = build_parser()
    args = ap.parse_args(argv)
    if args.cards_from:
        saved = json.loads(Path(args.cards_from).read_text())
        if "costs_text" not in saved:
            ap.error(f"--cards-from: {args.cards_from} has no forward costs; save the run with --costs")
        vars(args).update({"prompt_set": "files", **saved["settings"]})  # a saved run naming no set measured code.jsonl
        if args.oracle:
            attach_oracle(saved["speed"], args.oracle)
        write_cards(Path(args.pair), saved["speed"], saved["machine"], args, saved["costs_text"])
        return 0
    if args.lookahead != "auto":
        if not args.lookahead.isdigit() or int(args.lookahead) < 1:
            ap.error(f"--lookahead: a positive integer or 'auto', not {args.lookahead!r}")
        args.lookahead = int(args.lookahead)
    torch.set_num_threads(args.threads)
    spec, work = PROMPT_SETS[args.prompt_set], Path(args.work).expanduser()
    measurable, prompts, calibration, calibration_file = choose_prompts(ap, args, spec)
    out = {}
    folder = Path(args.pair)
    target = args.target or folder / "target"
    if not args.skip_bpc:
        out["bpc"] = bits_per_char(work, target, spec["split"])
        bpc = out["bpc"] and out["bpc"]["bits_per_char"]
        print(f"bits/char of {target} on {work / 'corpus' / spec['split']}.jsonl: "
              f"{bpc if bpc is not None else 'n/a (not in --work)'}  (goal <= {spec['bpc_goal']})")
    drafters = {"tiny-code": args.drafter or folder / "drafter",
                "tiny-code-bytes": args.drafter_bytes or folder / "drafter-bytes",
                "tiny-code-sampling": args.drafter_sampling or folder / "drafter-sampling"}
    names = {f"{g[1]}@{g[2]:g}" for g in SPEED}
    if args.only is not None and set(args.only.split(",")) - names:
        ap.error(f"--only: unknown goal(s) {', '.join(sorted(set(args.only.split(',')) - names))}; "
                 f"the goals are {', '.join(sorted(names))} (or --skip-speed for none)")
    wanted = [] if args.skip_speed else [g for g in SPEED if args.only is None or f"{g[1]}@{g[2]:g}" in args.only.split(",")]
    pairs = {preset: hsd.load_pair(str(target), str(drafters[preset]), device="cpu")
             for preset in dict.fromkeys([g[0] for g in wanted] or ["tiny-code"])}  # quality needs a target too
    print(f"pair: target {target}; drafters {', '.join(f'{k}: {v}' for k, v in drafters.items())}")
    machine = machine_line(machine_info(next(iter(pairs.values()))))
    print(f"machine: {machine}")
    if not args.skip_quality:
        measure_quality(next(iter(pairs.values())), measurable, args, work, spec, out)
    rows = measure_speed(pairs, wanted, spec, prompts, calibration, args)
    if args.oracle:
        attach_oracle(rows, args.oracle)
    out["speed"] = rows
    out["machine"] = machine
    out["settings"] = dict(prompt_set=args.prompt_set, prompt_file=f"{spec['measured']}.jsonl",
                           calibration_file=calibration_file, bpc_split=spec["split"], prompts=args.prompts,
                           quality_prompts=out.get("quality_prompts"), max_new_tokens=args.max_new_tokens,
                           lookahead=args.lookahead, calibration_prompts=args.calibration_prompts, target=str(target))
    if args.write_cards or args.costs:
        out["costs_text"], out["costs"] = cost_table(pairs, machine)
        print(out["costs_text"])
        print_requirements(rows, out["costs"])
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1) + "\n")
    if args.write_cards:
        write_cards(Path(args.target).parent if args.target else folder, rows, machine, args, out["costs_text"])
    return 0


CARD_FOLDERS = {"tiny-code": "drafter", "tiny-code-bytes": "drafter-bytes", "tiny-code-sampling": "drafter-sampling"}


def write_cards(folder: Path, rows, machine: str, args, costs_text: str) -> None:
    """The target's card gets every row and the forward costs; each drafter's card the rows measured with it."""
    import model_card

    cards = [(folder / "target" / "README.md", rows)]
    cards += [(folder / sub / "README.md", [r for r in rows if r["preset"] == preset])
              for preset, sub in CARD_FOLDERS.items()]
    for card, own in cards:
        if not own or not card.is_file():
            continue
        text = model_card.replace_block(card.read_text(), model_card.ENGINE, table(own, machine, args))
        card.write_text(model_card.replace_block(text, model_card.MEAS, costs_text))
        print(f"wrote the speed table ({len(own)} rows) and the forward costs into {card}")


if __name__ == "__main__":
    sys.exit(main())
