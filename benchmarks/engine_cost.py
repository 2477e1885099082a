"""The engine's own cost per round at real vocabulary sizes (asserts nothing).

A round's time is model forwards plus the engine's own work: warping and sampling, verification, re-tokenization,
vocabulary maps, ψ (SLRS), the trace. With the embedded pair's 4,096 and 1,024 entries that work hides; the models
users pick have 32k-256k. This runs tiny random-weight models of real architectures over real vocabularies, so that
forwards are cheap and the engine's work shows: the model shapes are the JSON files in ``benchmarks/engine_cost/``
(a Qwen2 target over Qwen2's 151,936 entries; a Llama drafter over DeepSeek-Coder's 32,259 and, for SD, a Qwen2
drafter over the target's own vocabulary), the vocabularies the GGUF files that ``tests/realtok.py`` converts
(``python scripts/fetch_vocabs.py`` fetches them). For every algorithm and temperature it prints the medians over
rounds of the target's forward, the drafter's forwards, the engine's own time and its parts, and the host-device
synchronisations per round (CUDA only). First it prints the floor: what one sampled token's distribution and draw
cost right after a forward of the model that made its logits, which every sampled position of a round pays.

    OMP_WAIT_POLICY=PASSIVE python benchmarks/engine_cost.py                        # every algorithm, T = 0 and 1
    python benchmarks/engine_cost.py --algorithms slem --temperatures 0 --profile   # where SLEM's time goes
    git archive HEAD hsd | tar -x -C /tmp/before                                    # the engine as committed ...
    python benchmarks/engine_cost.py --baseline /tmp/before/hsd                     # ... against the working tree
    python benchmarks/engine_cost.py --device cuda --dtype bfloat16 --target qwen2-7b-target \
        --drafter vicuna-68m-drafter --shared-drafter qwen2-0.5b-drafter            # real shapes on a GPU

The engine's own time is the round's time minus its forwards (``Round.seconds - Round.forward_seconds``), from runs
that time nothing else but the target's forwards. Its parts come from one more run per case with the functions that
do each part wrapped in timers (exclusive times: a part called inside another counts once); what no wrapped function
covers is ``rest`` (the trace, the loop). ``--baseline DIR`` imports another copy of the ``hsd`` package and runs it
and this one in turn, A/B/A/B in one process, on the same models, and says whether their token ids agree.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import importlib.util
import json
import pstats
import statistics
import sys
import time
import warnings
import zlib
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

import torch  # noqa: E402

import hsd  # noqa: E402
from hsd.layout import use_layout  # noqa: E402
from hsd.machine import machine_info, machine_line  # noqa: E402

SPECS = Path(__file__).resolve().parent / "engine_cost"
TARGET, DRAFTER, SHARED_DRAFTER = "qwen2-target", "deepseek-coder-drafter", "qwen2-drafter"
ALGORITHMS = ("ar", "sd", "slem", "tli", "slrs")
PROMPTS = [
    "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n",
    "The quick brown fox jumps over the lazy dog. Then",
    "import os\n\n\ndef list_files(path):\n",
]
FORWARD = ("target forward", "drafter forward")
# (module of the package, attribute, part): the functions whose exclusive time makes each part of the engine's
# time; an attribute a version of the package lacks is skipped.
PARTS = [
    ("runner", "Runner.forward", None), ("runner", "Runner.forward_paths", None),
    ("lean", "LeanRunner.forward", None), ("lean", "LeanRunner.forward_paths", None),
    ("sampling", "Sampling.probs", "warp"), ("sampling", "Sampling.rows", "warp"),
    ("sampling", "pick", "sample"), ("sampling", "pick_at", "sample"), ("sampling", "pick_one", "sample"),
    ("sampling", "Rng.sample", "sample"), ("sampling", "Rng.draw", "sample"),
    ("sampling", "Rng.uniform", "sample"), ("sampling", "Rng.draw_at", "sample"),
    ("verify", "rejection", "verify"), ("verify", "exact_match", "verify"),
    ("verify", "sequential_rejection", "verify"), ("verify", "residual_by_rejection", "verify"),
    ("algorithms.slrs", "_candidates", "verify"),
    ("retokenize", "Retokenizer.continue_ids", "retokenize"),
    ("session", "DrafterContext.sync", "sync"), ("runner", "Runner.sync_to", "sync"), ("runner", "Runner.crop", "sync"),
    ("lean", "LeanRunner.crop", "sync"),
    ("vocab", "PairVocab.intersection_maps", "maps"), ("algorithms.tli", "InTarget.of", "maps"),
    ("algorithms.tli", "InTarget.at", "maps"), ("algorithms.tli", "InTarget.row", "maps"),
    ("algorithms.sd", "in_target_vocabulary", "maps"),
    ("algorithms.slrs", "_Slot.psi", "psi"), ("algorithms.slrs", "_Slot.psi_under", "psi"),
    ("session", "DrafterContext.draft", "draft loop"), ("algorithms.slrs", "_draft", "draft loop"),
    ("algorithms.slrs", "_Rows.draft", "draft loop"), ("algorithms.slrs", "_Rows.__call__", "draft loop"),
    ("session", "Session.commit", "trace"), ("algorithms.common", "spans", "trace"),
    ("algorithms.common", "place_drafted", "trace"),
]
ENGINE_PARTS = ("warp", "sample", "verify", "retokenize", "sync", "maps", "psi", "draft loop", "trace", "rest")


# --------------------------------------------------------------------------------- the models

def load_spec(name: str) -> dict:
    path = Path(name) if name.endswith(".json") else SPECS / f"{name}.json"
    return json.loads(path.read_text())


def build_model(spec: dict, device: str, dtype: torch.dtype):
    """A random-weight model of ``spec``'s architecture and shape over its real vocabulary, and the tokenizer."""
    import realtok
    from transformers import AutoConfig, AutoModelForCausalLM, GenerationConfig

    tok = realtok.load_tokenizer(spec["vocabulary"])
    config = AutoConfig.for_model(spec["model_type"], vocab_size=len(tok), bos_token_id=tok.bos_token_id,
                                  eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id, **spec["config"])
    shape = {key: spec[key] for key in ("vocabulary", "model_type", "config")}
    gen = torch.Generator(device=device).manual_seed(zlib.crc32(json.dumps(shape, sort_keys=True).encode()))
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(config, dtype=dtype)
    realtok.init_random_weights(model, gen)  # the tests' real-vocabulary models' initialisation
    model.generation_config = GenerationConfig(bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id)
    model.eval()
    if torch.device(device).type == "cpu" and dtype == torch.float32:
        use_layout(model)  # as hsd.load_model lays out what it loads (hsd/layout.py)
    return model, tok


def pairs_for(package, models: dict) -> dict:
    """``{"hetero": Pair, "shared": Pair}`` of ``package`` (hsd or a baseline copy) on the models built once."""
    wrapped = {name: package.Model.wrap(model, tok, name) for name, (model, tok) in models.items()}
    return {"hetero": package.Pair(wrapped["target"], wrapped["drafter"]),
            "shared": package.Pair(wrapped["target"], wrapped["shared"])}


def pair_of(algorithm: str) -> str:
    return "shared" if algorithm == "sd" else "hetero"


def import_baseline(path: str):
    """Another copy of the hsd package (its ``__init__.py`` folder), imported as ``hsd_baseline``."""
    folder = Path(path).resolve()
    spec = importlib.util.spec_from_file_location("hsd_baseline", folder / "__init__.py",
                                                  submodule_search_locations=[str(folder)])
    module = importlib.util.module_from_spec(spec)
    sys.modules["hsd_baseline"] = module
    spec.loader.exec_module(module)
    return module


# --------------------------------------------------------------------------------- timing the parts

class Parts:
    """Exclusive wall time per part of a round, by wrapping the functions of :data:`PARTS` (while installed)."""

    def __init__(self, package, target_module, parts=PARTS):
        self.package, self.target_module = package, target_module
        self.spent: dict[str, float] = defaultdict(float)
        self.stack: list[float] = []
        self.saved: list[tuple[object, str, object]] = []
        self.parts = parts

    def _wrap(self, fn, part):
        def timed(*args, **kwargs):
            self.stack.append(0.0)
            start = time.perf_counter()
            counted = args[0].seconds if part is None else 0.0
            try:
                return fn(*args, **kwargs)
            finally:
                spent = time.perf_counter() - start
                inner = self.stack.pop()
                if part is None:  # a forward: the time its runner counts, as Round.forward_seconds does
                    name = FORWARD[0] if args[0].model.model is self.target_module else FORWARD[1]
                    self.spent[name] += args[0].seconds - counted
                else:
                    self.spent[part] += spent - inner
                if self.stack:
                    self.stack[-1] += spent
        return timed

    def __enter__(self):
        pkg = self.package.__name__
        modules = [m for name, m in list(sys.modules.items()) if m is not None and (name == pkg or
                                                                                   name.startswith(pkg + "."))]
        for module_name, attribute, part in self.parts:
            module = sys.modules.get(f"{pkg}.{module_name}")
            owner_name, _, name = attribute.rpartition(".")
            owner = getattr(module, owner_name, None) if owner_name else module
            original = getattr(owner, name, None) if owner is not None else None
            if original is None:
                continue
            if owner_name:  # a method: patch the class
                self.saved.append((owner, name, owner.__dict__[name]))
                setattr(owner, name, self._wrap(original, part))
                continue
            timed = self._wrap(original, part)  # a function: every module that imported it by name
            for m in modules:
                for key, value in list(vars(m).items()):
                    if value is original:
                        self.saved.append((m, key, value))
                        setattr(m, key, timed)
        return self

    def __exit__(self, *exc):
        for owner, name, value in reversed(self.saved):
            setattr(owner, name, value)
        self.saved.clear()

    def take(self) -> dict[str, float]:
        out, self.spent = dict(self.spent), defaultdict(float)
        return out


# The plain runs time only the target's forwards (the drafter's are the rest of Round.forward_seconds): a timer
# per drafted token would add its own cost to the engine's time.
TARGET_FORWARDS = [p for p in PARTS if p[0] == "runner" and p[2] is None]


class Syncs:
    """Host-device synchronisations per round on CUDA: the ones torch's sync debug mode reports (``.item()``,
    ``.tolist()``, copies to the host, ...) and the explicit ``torch.cuda.synchronize()`` calls (hsd's timers)."""

    def __init__(self, device: torch.device):
        self.cuda = device.type == "cuda"
        self.count = 0

    @contextlib.contextmanager
    def counting(self):
        if not self.cuda:
            yield
            return
        original = torch.cuda.synchronize

        def counted(*args, **kwargs):
            self.count += 1
            return original(*args, **kwargs)

        torch.cuda.synchronize = counted
        torch.cuda.set_sync_debug_mode("warn")
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                self.caught = caught
                yield
        finally:
            torch.cuda.set_sync_debug_mode("default")
            torch.cuda.synchronize = original

    def take(self) -> int | None:
        if not self.cuda:
            return None
        n = self.count + sum("synchronizing" in str(w.message) for w in self.caught)
        self.count = 0
        self.caught.clear()
        return n


# --------------------------------------------------------------------------------- running

def run_case(package, pair, algorithm: str, prompt: str, settings: dict, parts: Parts | None, syncs: Syncs):
    """One generation; per round its time, forwards and (with ``parts``) the parts of the engine's own time."""
    rounds = []
    session_cls = package.session.Session
    original_prefill = session_cls.prefill

    def prefill(self):  # the prefill's forwards are no round's
        original_prefill(self)
        if parts is not None:
            parts.take()
        syncs.take()

    session_cls.prefill = prefill
    try:
        with syncs.counting():
            result = None
            for item in package.stream(pair, prompt, algorithm=algorithm, **settings):
                if not isinstance(item, package.Round):
                    result = item
                    continue
                spent = parts.take() if parts is not None else {}
                target = spent.pop(FORWARD[0], 0.0)
                spent.pop(FORWARD[1], 0.0)
                row = {"round": item.seconds, "forwards": item.forward_seconds, "target forward": target,
                       "drafter forward": item.forward_seconds - target, "engine": item.seconds - item.forward_seconds,
                       "emitted": len(item.emitted), "syncs": syncs.take()}
                if parts is not None and parts.parts is PARTS:
                    row.update({k: spent.get(k, 0.0) for k in ENGINE_PARTS[:-1]})
                    row["rest"] = row["engine"] - sum(row[k] for k in ENGINE_PARTS[:-1])
                rounds.append(row)
    finally:
        session_cls.prefill = original_prefill
    return rounds, result.token_ids


def median(rows: list[dict], key: str) -> float | None:
    values = [r[key] for r in rows if r.get(key) is not None]
    return statistics.median(values) if values else None


def summary(rows: list[dict]) -> dict:
    keys = ["round", "target forward", "drafter forward", "engine", *ENGINE_PARTS, "syncs"]
    out = {k: median(rows, k) for k in keys if any(k in r for r in rows)}
    out["rounds"] = len(rows)
    out["tokens_per_round"] = sum(r["emitted"] for r in rows) / max(1, len(rows))
    return out


def settings_for(args, temperature: float, seed: int) -> dict:
    return dict(temperature=temperature, lookahead=args.lookahead, max_new_tokens=args.max_new_tokens, seed=seed)


def measure(args, models, packages: dict) -> list[dict]:
    """Every case: plain runs of each package in turn (A/B/A/B), then one run of the working tree with its parts
    timed."""
    pairs = {label: pairs_for(pkg, models) for label, pkg in packages.items()}
    target_module = models["target"][0]
    device = next(target_module.parameters()).device
    syncs = Syncs(device)
    cases = []
    for algorithm in args.algorithms:
        for temperature in args.temperatures:
            rows = {label: [] for label in packages}
            ids = {label: [] for label in packages}
            for label, pkg in packages.items():  # warm-up: tables, tries and path counts are built once
                pair = pairs[label][pair_of(algorithm)]
                run_case(pkg, pair, algorithm, PROMPTS[0], settings_for(args, temperature, 0), None, syncs)
            for repeat in range(args.repeats):
                for i, prompt in enumerate(PROMPTS[:args.prompts]):
                    for label, pkg in packages.items():
                        pair = pairs[label][pair_of(algorithm)]
                        with Parts(pkg, target_module, TARGET_FORWARDS) as parts:
                            got, token_ids = run_case(pkg, pair, algorithm, prompt,
                                                      settings_for(args, temperature, i), parts, syncs)
                        rows[label] += got
                        if repeat == 0:
                            ids[label].append(token_ids)
            split = []
            for i, prompt in enumerate(PROMPTS[:args.prompts]):
                with Parts(hsd, target_module) as parts:
                    got, _ = run_case(hsd, pairs["current"][pair_of(algorithm)], algorithm, prompt,
                                      settings_for(args, temperature, i), parts, syncs)
                split += got
            case = {"algorithm": algorithm, "temperature": temperature, "pair": pair_of(algorithm),
                    "current": summary(rows["current"]), "parts": summary(split)}
            if "baseline" in packages:
                case["baseline"] = summary(rows["baseline"])
                case["same_token_ids"] = ids["baseline"] == ids["current"]
            cases.append(case)
            print(line(case), flush=True)
    return cases


def floor(models: dict, device: torch.device, repeats: int = 30) -> dict:
    """What one sampled token costs at least: right after a forward of the model whose logits they are (the caches
    as a round leaves them), its distribution (``Sampling.probs`` at T = 1: one softmax) and its draw
    (``Rng.draw``), medians of ``repeats``. Every sampled position of a round pays one distribution at least (the
    drafter's draw needs its normaliser, verification the target's), so these bound the engine's time from below."""
    sampling, rng = hsd.sampling.Sampling(1.0), hsd.sampling.Rng(0)
    out = {}
    for role in ("target", "drafter", "shared"):
        model, tok = models[role]
        ids = torch.tensor([[tok.bos_token_id or 0]], device=device)
        spent = {"distribution": [], "draw": []}
        for _ in range(repeats):
            with torch.no_grad():
                logits = model(ids).logits[0, -1]
            _sync(device)
            start = time.perf_counter()
            q = sampling.probs(logits.unsqueeze(0))[0]
            _sync(device)
            mid = time.perf_counter()
            rng.draw(q)
            spent["distribution"].append(mid - start)
            spent["draw"].append(time.perf_counter() - mid)
        out[role] = {"entries": int(logits.shape[-1]), **{k: statistics.median(v) for k, v in spent.items()}}
    return out


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def floor_line(costs: dict) -> str:
    return "one sampled token after its model's forward: " + "; ".join(
        f"{role} ({c['entries']:,} entries) distribution {ms(c['distribution'])} + draw {ms(c['draw'])} ms"
        for role, c in costs.items())


def ms(x: float | None) -> str:
    return "n/a" if x is None else f"{1e3 * x:.2f}"


def line(case: dict) -> str:
    cur, parts = case["current"], case["parts"]
    text = (f"{case['algorithm']:>5} T={case['temperature']:g}  rounds {cur['rounds']:4d}  tokens/round "
            f"{cur['tokens_per_round']:.2f}  ms/round: round {ms(cur['round'])}  target fwd {ms(cur['target forward'])}"
            f"  drafter fwd {ms(cur['drafter forward'])}  engine {ms(cur['engine'])}")
    if "baseline" in case:
        text += (f"  (baseline engine {ms(case['baseline']['engine'])}, round {ms(case['baseline']['round'])}; "
                 f"token ids {'identical' if case['same_token_ids'] else 'DIFFER'})")
    text += "\n        engine parts: " + "  ".join(f"{k} {ms(parts.get(k))}" for k in ENGINE_PARTS)
    syncs = parts.get("syncs")
    text += f"  syncs/round {'n/a (CPU)' if syncs is None else f'{syncs:g}'}"
    return text


def markdown(cases: list[dict]) -> str:
    """The table of docs/benchmarks.md: medians over rounds, milliseconds."""
    baseline = any("baseline" in c for c in cases)
    head = "| algorithm | T | tokens/round | target fwd | drafter fwd | engine |"
    head += " engine before |" if baseline else ""
    head += " " + " | ".join(ENGINE_PARTS) + " |"
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for c in cases:
        cur, parts = c["current"], c["parts"]
        cells = [c["algorithm"], f"{c['temperature']:g}", f"{cur['tokens_per_round']:.2f}", ms(cur["target forward"]),
                 ms(cur["drafter forward"]), ms(cur["engine"])]
        if baseline:
            cells.append(ms(c["baseline"]["engine"]) if "baseline" in c else "")
        cells += [ms(parts.get(k)) for k in ENGINE_PARTS]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def profile(args, models, package, algorithm: str, temperature: float, top: int = 25) -> None:
    """cProfile of one generation: the functions with the most time of their own, and their calls per round."""
    pair = pairs_for(package, models)[pair_of(algorithm)]
    settings = settings_for(args, temperature, 0)
    package.generate(pair, PROMPTS[0], algorithm=algorithm, **settings)  # warm-up
    prof = cProfile.Profile()
    prof.enable()
    res = package.generate(pair, PROMPTS[0], algorithm=algorithm, **settings)
    prof.disable()
    n = len(res.rounds)
    stats = pstats.Stats(prof)
    rows = sorted(stats.stats.items(), key=lambda kv: -kv[1][2])[:top]
    print(f"\ncProfile of {package.__name__}: {algorithm} at T={temperature:g}, {n} rounds; functions by own time")
    print(f"{'own ms/round':>12} {'calls/round':>11} {'ms/call':>8}  function")
    for (file, lineno, name), (cc, nc, tt, ct, callers) in rows:
        where = name if file == "~" else f"{Path(file).name}:{lineno}({name})"
        print(f"{1e3 * tt / n:12.3f} {nc / n:11.1f} {1e3 * tt / max(nc, 1):8.4f}  {where}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--algorithms", nargs="+", default=list(ALGORITHMS), choices=ALGORITHMS)
    ap.add_argument("--temperatures", nargs="+", type=float, default=[0.0, 1.0])
    ap.add_argument("--max-new-tokens", type=int, default=48)
    ap.add_argument("--lookahead", type=int, default=5)
    ap.add_argument("--prompts", type=int, default=len(PROMPTS), help="how many of the built-in prompts")
    ap.add_argument("--repeats", type=int, default=2, help="plain runs of each prompt (A/B/A/B with --baseline)")
    ap.add_argument("--target", default=TARGET, help="model spec: a name in benchmarks/engine_cost/ or a .json path")
    ap.add_argument("--drafter", default=DRAFTER, help="the drafter of SLEM, TLI and SLRS (another vocabulary)")
    ap.add_argument("--shared-drafter", default=SHARED_DRAFTER, help="SD's drafter (the target's vocabulary)")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"])
    ap.add_argument("--threads", type=int, default=1, help="torch intra-op threads on a CPU")
    ap.add_argument("--baseline", help="another copy of the hsd package folder, run in turn with this one")
    ap.add_argument("--profile", action="store_true",
                    help="then cProfile the first algorithm at the first temperature (each package)")
    ap.add_argument("--json", help="write every case's medians here")
    ap.add_argument("--markdown", action="store_true", help="also print the table as Markdown")
    args = ap.parse_args(argv)

    torch.set_num_threads(args.threads)
    dtype = getattr(torch, args.dtype)
    specs = {"target": args.target, "drafter": args.drafter, "shared": args.shared_drafter}
    started = time.perf_counter()
    models = {role: build_model(load_spec(name), args.device, dtype) for role, name in specs.items()}
    pair = pairs_for(hsd, models)["hetero"]
    info = machine_info(pair)
    print(machine_line(info))
    print(f"target {args.target}: {len(pair.target.vocab):,} entries; drafter {args.drafter}: "
          f"{len(pair.drafter.vocab):,} entries; SD's drafter {args.shared_drafter}; lookahead {args.lookahead}, "
          f"{args.max_new_tokens} new tokens, {args.prompts} prompts x {args.repeats}; models built in "
          f"{time.perf_counter() - started:.1f} s")
    packages = {"current": hsd}
    if args.baseline:
        packages = {"baseline": import_baseline(args.baseline), "current": hsd}
    costs = floor(models, torch.device(args.device))
    print(floor_line(costs), flush=True)
    cases = measure(args, models, packages)
    if args.markdown:
        print(markdown(cases))
    if args.json:
        Path(args.json).write_text(json.dumps({"machine": info, "settings": vars(args), "specs": specs,
                                               "floor": costs, "cases": cases}, indent=1))
    if args.profile:
        for package in packages.values():
            profile(args, models, package, args.algorithms[0], args.temperatures[0])
    return 0


if __name__ == "__main__":
    sys.exit(main())
