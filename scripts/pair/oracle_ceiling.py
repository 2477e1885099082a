"""How fast could each of the embedded pair's speed goals (``scripts/pair/pair_goals.py``) be with the best drafter
there is? Prints, asserts nothing.

    OMP_WAIT_POLICY=PASSIVE python scripts/pair/oracle_ceiling.py
    OMP_WAIT_POLICY=PASSIVE python scripts/pair/oracle_ceiling.py --prompts 22 --seeds 3 --json ceiling.json

A drafter can do no better than an *oracle* that knows the target: it proposes the target's own most probable
token at every position (SLEM; at T = 0 it is always accepted), or, for TLI, the target's distribution restricted
to the tokens the drafter's vocabulary shares with it, which accepts exactly the emitted tokens that lie in the
intersection (a token outside it can never be proposed). The text any lossless algorithm emits is the target's,
so the oracle's acceptance can be read off plain decoding: the target decodes each held-out prompt, and at every
position the script records whether the oracle's proposal would have matched. Rounds are then replayed from that
record for every lookahead, and for dynamic lookaheads that stop after a position where the oracle's proposal has
probability below 0.3, 0.5 or 0.7 (what ``draft_threshold`` does with the drafter's own probability).

Each round costs ``d`` drafter forwards and one target forward of ``m + 1`` tokens (``hsd.costs``, measured here
through hsd's runner: medians of single forwards with 128 tokens cached, in ``--rounds`` rounds that take every
measurement in turn, and the median of the rounds); AR costs one target forward of 1 token
per token. Engine overhead is left out of both, which only favours the speculative side. So the printed speedup
is an upper bound for the drafter's costs it assumes:

* ``free drafter``: drafting costs nothing. No drafter of any size beats this row on this machine with this
  target: a goal above it cannot be reached by training or choosing a drafter.
* ``smallest model``: each proposed token costs one forward of the smallest Llama there is (1 layer, width
  64, the drafter's vocabulary; built here, untrained: only its time is used): what transformers and hsd's
  runner spend on any forward at all. A goal above this row needs a drafter as good as the oracle that costs
  less than the smallest model: out of reach on this machine.
* ``shipped drafter's cost``: each proposed token costs one forward of the shipped drafter (SLEM, TLI; the
  byte drafter: one forward per byte of the token, SLRS): the bound for a drafter of its size.

The oracle's acceptance depends on the target's entropy: at T = 0.7 a small target's most probable token is also
its sample only so often, whatever the drafter. Measured on the same held-out prompts as ``pair_goals.py``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

import hsd  # noqa: E402
from hsd.bench import load_prompts, machine_info, machine_line  # noqa: E402
from hsd.costs import Costs, measure_costs  # noqa: E402
from hsd.generate import open_session  # noqa: E402
from hsd.trace import Round  # noqa: E402

# (algorithm, target temperature, goal, drafter role whose cost a proposed token carries)
GOALS = [
    ("slem", 0.0, 2.0, "drafter"),
    ("tli", 1.0, 1.0, "drafter"),
    ("slem", 0.7, 1.2, "drafter"),
    ("slrs", 0.0, 1.0, "drafter-bytes"),
]
THRESHOLDS = (0.0, 0.3, 0.5, 0.7)
CALIBRATION = 4  # pair_goals.py measures lookaheads on the last 4 code prompts and speed on the others


@dataclass
class Position:
    """One decoded position: did the oracle's proposal hold (``hit``), how sure was the oracle (``p_top``: the
    probability at temperature 1 of the token it proposes), and the emitted token's length in bytes."""

    hit: bool
    p_top: float
    n_bytes: int


def decode(pair, prompt: str, temperature: float, seed: int, new_tokens: int, shared: torch.Tensor | None,
           algorithm: str) -> list[Position]:
    """The target decodes ``prompt`` (hsd's AR: its session, cache and sampling); each position's oracle record."""
    s = open_session(pair, prompt, algorithm="ar", max_new_tokens=new_tokens, temperature=temperature, seed=seed)
    s.prefill()
    out = []
    while not s.done:
        logits = s.target.forward([s.ids[-1]], keep=1).float()
        p = s.settings.sampling.probs(logits)
        token = int(hsd.sampling.pick(p, s.settings.sampling, s.rng)[0])
        p1 = torch.softmax(logits[0], -1)
        top = int(p[0].argmax())
        if algorithm == "tli":  # proposes from p restricted to the intersection: accepted iff the token is in it
            hit, p_top = bool(shared[token]), float(p1[shared].sum())
        else:  # proposes the most probable token: accepted iff the target's own draw is that token
            hit, p_top = token == top, float(p1[top])
        out.append(Position(hit, p_top, len(s.vocab.tokens[token] or b"")))
        s.commit(Round(0), [], token, "target")
    return out


def replay(record: list[Position], k: int, threshold: float) -> list[tuple[int, int, int]]:
    """The rounds an oracle with lookahead ``k`` (stopping after a position with ``p_top < threshold``) makes
    along ``record``: (tokens emitted, tokens proposed, bytes proposed) per round."""
    rounds, t, n = [], 0, len(record)
    while t < n:
        m = 0
        while m < k and t + m < n:
            m += 1
            if threshold and record[t + m - 1].p_top < threshold:
                break
        j = 0
        while j < m and record[t + j].hit:
            j += 1
        emitted = min(j + 1, n - t)
        rounds.append((emitted, m, sum(r.n_bytes for r in record[t:t + m])))
        t += emitted
    return rounds


def ceiling(records: list[list[Position]], costs: Costs, draft_cost: float, per_byte: bool, k_max: int = 12) -> dict:
    """The best (speedup, setting, τ) over lookaheads 1..k_max and the thresholds, at ``draft_cost`` per drafter
    forward (a forward per proposed token, or per proposed byte)."""
    best = None
    for k in range(1, k_max + 1):
        for threshold in THRESHOLDS if k == k_max else (0.0,):
            tokens = ar = spec = 0.0
            n_rounds = 0
            for record in records:
                for emitted, m, n_bytes in replay(record, k, threshold):
                    tokens += emitted
                    n_rounds += 1
                    spec += (n_bytes if per_byte else m) * draft_cost + costs.verify_cost(m + 1)
            ar = tokens * costs.verify_cost(1)
            row = dict(speedup=ar / spec, lookahead=k, threshold=threshold, tau=tokens / n_rounds)
            if best is None or row["speedup"] > best["speedup"]:
                best = row
    return best


def smallest_model(drafter: Path, out: Path) -> Path:
    """A 1-layer, 64-wide Llama with ``drafter``'s tokenizer and vocabulary size, saved in ``out`` (untrained)."""
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    config = json.loads((drafter / "config.json").read_text())
    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(
        vocab_size=config["vocab_size"], hidden_size=64, intermediate_size=128, num_hidden_layers=1,
        num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=config.get("max_position_embeddings", 2048),
        bos_token_id=config.get("bos_token_id"), eos_token_id=config.get("eos_token_id"), tie_word_embeddings=True))
    model.save_pretrained(out)
    AutoTokenizer.from_pretrained(drafter).save_pretrained(out)
    return out


def measure_and_decode(args) -> tuple[dict, float, dict]:
    """The forward costs (interleaved rounds), the smallest model's, and each goal's oracle records."""
    folder = Path(args.pair)
    pairs = {role: hsd.load_pair(str(folder / "target"), str(folder / role), device="cpu")
             for role in ("drafter", "drafter-bytes")}
    every = load_prompts("code")
    prompts = every[:len(every) - CALIBRATION][:args.prompts]
    with tempfile.TemporaryDirectory() as tmp:
        floor = smallest_model(folder / "drafter", Path(tmp))
        pairs["smallest"] = hsd.load_pair(str(folder / "target"), str(floor), device="cpu")
        # rounds of every measurement in turn, then the median of the rounds: a shared machine's speed moves from
        # minute to minute, and a cost measured in one stretch would carry that minute's speed into the ratios
        samples = {role: [] for role in pairs}
        for _ in range(args.rounds):
            for role, pair in pairs.items():
                samples[role].append(measure_costs(pair, 128, 13, args.repeats)[0])
        costs = {role: Costs.median(s) for role, s in samples.items()}
        floor_cost = costs.pop("smallest").draft
        del pairs["smallest"]
    records_of = {}
    for algorithm, temperature, _, role in GOALS:
        pair = pairs[role]
        shared = None
        if algorithm == "tli":
            d2t = pair.vocab.drafter_to_target
            shared = torch.zeros(pair.target.n_logits, dtype=torch.bool)
            shared[d2t[(d2t >= 0) & (d2t < pair.target.n_logits)]] = True
        seeds = range(args.seeds if temperature > 0 else 1)
        records_of[(algorithm, temperature)] = [decode(pair, p, temperature, seed, args.new_tokens, shared, algorithm)
                                                for p in prompts for seed in seeds]
    return costs, floor_cost, records_of


def main(argv=None) -> list[dict]:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pair", default=str(ROOT / "assets" / "tiny-code"), help="folder with target/ and drafters")
    ap.add_argument("--prompts", type=int, default=22, help="held-out code prompts (at most 22: 4 calibrate)")
    ap.add_argument("--seeds", type=int, default=2, help="decodings per prompt when sampling")
    ap.add_argument("--new-tokens", type=int, default=128)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=9, help="timed forwards per cost and round (their median)")
    ap.add_argument("--rounds", type=int, default=5, help="rounds of all the cost measurements (the median of rounds)")
    ap.add_argument("--json", default=None, help="also write the results here")
    ap.add_argument("--replay", default=None, metavar="JSON",
                    help="replay the decodings saved by an earlier --json run instead of decoding and measuring again")
    ap.add_argument("--costs-from", default=None, metavar="JSON",
                    help="charge the rounds with the forward costs of a `pair_goals.py --costs --json` run (its "
                         "1-9 token verification costs; the smallest model's cost stays this run's)")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    if args.replay:
        saved = json.loads(Path(args.replay).read_text())
        costs = {role: Costs(c["draft"], {int(n): v for n, v in c["verify"].items()}, 128)
                 for role, c in saved["costs_seconds"].items()}
        floor_cost, machine = saved["smallest_model_seconds"], saved["machine_line"]
        records_of = {(r["algorithm"], r["temperature"]): [[Position(bool(h), p, b) for h, p, b in rec]
                                                          for rec in r["records"]] for r in saved["rows"]}
    else:
        costs, floor_cost, records_of = measure_and_decode(args)
        machine = machine_line(machine_info())
    if args.costs_from:
        run = json.loads(Path(args.costs_from).read_text())["costs"]
        for role, preset in (("drafter", "tiny-code"), ("drafter-bytes", "tiny-code-bytes")):
            c = run[preset]
            costs[role] = Costs(c["draft_ms"] / 1e3, {n: c[f"verify_{n}_ms"] / 1e3 for n in range(1, 10)
                                                        if f"verify_{n}_ms" in c}, c.get("context", 128))
        print(f"forward costs from {args.costs_from}")
    print(f"{machine}; {args.new_tokens} new tokens, torch threads {args.threads}")
    c = costs["drafter"]
    print("target forward of n tokens, 128 cached (ms): "
          + ", ".join(f"{n}: {c.verify[n] * 1e3:.2f}" for n in sorted(c.verify))
          + f"; drafter forward {c.draft * 1e3:.2f} ms, byte drafter {costs['drafter-bytes'].draft * 1e3:.2f} ms, "
          f"smallest model {floor_cost * 1e3:.2f} ms")
    rows = []
    for algorithm, temperature, goal, role in GOALS:
        records = records_of[(algorithm, temperature)]
        hits = [r.hit for rec in records for r in rec]
        per_byte = role == "drafter-bytes"
        row = dict(algorithm=algorithm, temperature=temperature, goal=goal, drafter=role,
                   oracle_acceptance=statistics.mean(hits), positions=len(hits),
                   free=ceiling(records, costs[role], 0.0, per_byte),
                   smallest=ceiling(records, costs[role], floor_cost, per_byte),
                   drafter_cost=ceiling(records, costs[role], costs[role].draft, per_byte),
                   records=[[[int(r.hit), round(r.p_top, 5), r.n_bytes] for r in rec] for rec in records])
        rows.append(row)
    print()
    print("| algorithm | T | goal | oracle acceptance per position | bound, free drafter | bound, smallest model's "
          "cost | bound, shipped drafter's cost |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        def cell(b):
            th = f", stop below {b['threshold']}" if b["threshold"] else ""
            return f"{b['speedup']:.2f}x (k={b['lookahead']}{th}, tau {b['tau']:.2f})"
        print(f"| {r['algorithm']} | {r['temperature']:g} | >= {r['goal']}x | {r['oracle_acceptance']:.3f} "
              f"({r['positions']} positions) | {cell(r['free'])} | {cell(r['smallest'])} | {cell(r['drafter_cost'])} |")
    if args.json:
        Path(args.json).write_text(json.dumps(dict(
            machine_line=machine, settings=vars(args), rows=rows, costs={k: v.to_dict() for k, v in costs.items()},
            costs_seconds={k: dict(draft=v.draft, verify=v.verify) for k, v in costs.items()},
            smallest_model_seconds=floor_cost)) + "\n")
    return rows


if __name__ == "__main__":
    main()
