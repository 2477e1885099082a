"""The paper's pairs, predicted: what hsd's cost model says of Timor et al.'s heterogeneous pairs (asserts nothing).

For every model of the paper's pairs (``benchmarks/paper_pairs/models.json``: their real shapes) it measures a forward
on this machine as hsd runs it (float32, hsd's weight layout on a CPU, ``hsd/layout.py``): the model is built with
random weights and none, then one, of its decoder layers; the first is the embedding, the final norm and the head
over the real vocabulary, the difference one layer, and the whole model's forward is ``rest + layers x layer``
(the largest layer, Mixtral-8x22B's, is 10 GB in float32). Both get the weight layout hsd would give the whole model
(``auto``: ``dual`` up to 2 GiB of linear weights, else ``column``), not the one the small copy would get. Each is
timed after a 256-token context for 1 token (a drafter's step, an AR step) and for ``lookahead + 1`` tokens (a
verification).

With those costs and hsd's own cost per round (``--engine``: the JSON of ``benchmarks/engine_cost.py``, greedy SLEM
for T = 0, TLI at T = 1; without it none), advise's model (``hsd/advise.py``) gives the speedup over AR at a
per-position acceptance ``α``, lookahead ``k`` (the best of 1-12) and one proposal per drafted token:

    τ(α, k) = 1 + α + ... + α^k          T(k) = k·drafter(1) + target(k + 1) + engine        AR: target(1) + engine_AR
    speedup = τ(α, k) / T(k) × (target(1) + engine_AR)

The paper logged no acceptance rates, so no speedup can be predicted from its tables alone. Instead each row says
what acceptance hsd needs on these costs: to break even with AR, and to reach the speedup the paper measured, and
the speedup at α = 0.5, 0.7 and 0.9.

    OMP_WAIT_POLICY=PASSIVE python benchmarks/paper_pairs.py --engine cost.json --markdown
    python benchmarks/paper_pairs.py --models vicuna-68m gemma-2-9b-it          # measure only these (and print)
    python benchmarks/paper_pairs.py --device cuda --dtype bfloat16 --json gpu.json --markdown   # a GPU's forwards
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from hsd.machine import machine_info, machine_line  # noqa: E402
from hsd.layout import DUAL_LIMIT, dual_bytes, layout_setting, use_layout  # noqa: E402
from hsd.runner import _cache_kwarg  # noqa: E402

SPECS = Path(__file__).resolve().parent / "paper_pairs" / "models.json"
CONTEXT = 256
LOOKAHEADS = range(1, 13)
ALPHAS = (0.5, 0.7, 0.9)


def load_specs(path: Path = SPECS) -> dict:
    data = json.loads(path.read_text())
    models = data["models"]
    for name, spec in models.items():
        if "same_as" in spec:
            models[name] = {**models[spec["same_as"]], "shape_of": spec["same_as"]}
    return data


def _config(spec: dict, layers: int):
    from transformers import AutoConfig

    key = "n_layer" if spec["model_type"] == "gpt_bigcode" else "num_hidden_layers"
    return AutoConfig.for_model(spec["model_type"], **{**spec["config"], key: layers, "bos_token_id": 0,
                                                        "eos_token_id": 0, "pad_token_id": 0})


def full_layout(spec: dict, dtype: torch.dtype) -> str:
    """The layout hsd would give the whole model (``auto`` decides by its size, not by the one layer built here)."""
    from transformers import AutoModelForCausalLM

    if dtype != torch.float32:
        return "row"
    layout = layout_setting()
    if layout != "auto":
        return layout
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(_config(spec, spec["layers"]), dtype=dtype)
    return "dual" if dual_bytes(model) <= DUAL_LIMIT else "column"


def build(spec: dict, layers: int, dtype: torch.dtype, layout: str = "row", device: str = "cpu"):
    """``spec``'s architecture with ``layers`` decoder layers and random weights (their values do not change the time
    of a forward: no kernel here skips zeros or small numbers, and the router of a mixture of experts gets random
    weights so that its tokens spread over the experts)."""
    from transformers import AutoModelForCausalLM

    config = _config(spec, layers)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config, dtype=dtype)
    model.to_empty(device=device)
    gen = torch.Generator(device=device).manual_seed(0)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 1:
                p.fill_(1.0 if "norm" in name or "ln" in name else 0.0)
            else:
                p.uniform_(-0.02, 0.02, generator=gen)
    for module in list(model.modules()):  # buffers computed at construction (rotary tables) are empty after to_empty
        for child_name, child in list(module.named_children()):
            if "Rotary" in type(child).__name__:
                with torch.device(device):
                    setattr(module, child_name, type(child)(config=child.config))
    model.eval()
    use_layout(model, layout)  # as hsd.load_model lays out what it loads on a CPU (row where it does not apply)
    return model


@torch.inference_mode()
def forward_ms(model, n_tokens: int, repeats: int) -> float:
    """Median milliseconds of a forward of ``n_tokens`` after :data:`CONTEXT` cached tokens."""
    from transformers import DynamicCache

    vocab, device = model.config.vocab_size, next(model.parameters()).device
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    gen = torch.Generator().manual_seed(1)
    cache = DynamicCache(config=model.config)
    kw = {_cache_kwarg(model): cache}  # transformers' name for it, as hsd's runner passes it
    model(input_ids=torch.randint(vocab, (1, CONTEXT), generator=gen).to(device), use_cache=True, logits_to_keep=1,
          **kw)
    times = []
    for _ in range(repeats + 1):
        ids = torch.randint(vocab, (1, n_tokens), generator=gen).to(device)
        sync()
        start = time.perf_counter()
        model(input_ids=ids, use_cache=True, logits_to_keep=n_tokens, **kw)
        sync()
        times.append(time.perf_counter() - start)
        cache.crop(-n_tokens)  # back to the context
    return 1e3 * statistics.median(times[1:])  # the first is a warm-up


def measure(name: str, spec: dict, dtype: torch.dtype, verify_tokens: int, repeats: int, device: str = "cpu") -> dict:
    """One model's forward costs for 1 and ``verify_tokens`` tokens, scaled from none and one of its layers."""
    out = {"layers": spec["layers"], "layout": full_layout(spec, dtype) if device == "cpu" else "row"}
    timed = {}
    for layers in (0, 1):
        model = build(spec, layers, dtype, out["layout"], device)
        for n in (1, verify_tokens):
            timed[layers, n] = forward_ms(model, n, repeats)
        del model
        if device.startswith("cuda"):
            torch.cuda.empty_cache()
    for n in (1, verify_tokens):
        layer = max(timed[1, n] - timed[0, n], 0.0)
        out[f"fwd_{n}_ms"] = timed[0, n] + spec["layers"] * layer
        out[f"layer_{n}_ms"], out[f"rest_{n}_ms"] = layer, timed[0, n]
    print(f"  {name:32s} {spec['layers']:3d} layers  1 token {out['fwd_1_ms']:9.1f} ms   {verify_tokens} tokens "
          f"{out[f'fwd_{verify_tokens}_ms']:9.1f} ms   (a layer {out['layer_1_ms']:.2f} ms; {out['layout']})",
          flush=True)
    return out


def verify_cost(costs: dict, n: int, verify_tokens: int) -> float:
    """A forward of ``n`` tokens: measured at 1 and ``verify_tokens``, linear between them (a memory-bound forward's
    cost grows slowly with the tokens it computes)."""
    a, b = costs["fwd_1_ms"], costs[f"fwd_{verify_tokens}_ms"]
    return a + (b - a) * (n - 1) / max(verify_tokens - 1, 1)


def speedup(alpha: float, k: int, target: dict, drafter: dict, engine: float, engine_ar: float, vt: int) -> float:
    tau = sum(alpha ** j for j in range(k + 1))
    round_ms = k * drafter["fwd_1_ms"] + verify_cost(target, k + 1, vt) + engine
    return tau / round_ms * (target["fwd_1_ms"] + engine_ar)


def best(alpha: float, *args) -> tuple[float, int]:
    return max((speedup(alpha, k, *args), k) for k in LOOKAHEADS)


def alpha_for(goal: float, *args) -> float | None:
    """The least per-position acceptance at which the best lookahead reaches ``goal`` (bisection; None if even
    α = 0.999 does not, 0 if α = 0 does)."""
    lo, hi = 0.0, 0.999
    if best(hi, *args)[0] < goal:
        return None
    if best(lo, *args)[0] >= goal:
        return 0.0
    for _ in range(40):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if best(mid, *args)[0] < goal else (lo, mid)
    return hi


def engine_costs(path: str | None) -> dict:
    """hsd's own ms per round from engine_cost.py's JSON (which holds seconds): {(algorithm, T): ms}; empty without
    one."""
    if not path:
        return {}
    data = json.loads(Path(path).read_text())
    rows = data["cases"] if isinstance(data, dict) else data
    return {(r["algorithm"], float(r["temperature"])): 1e3 * r["current"]["engine"] for r in rows}


def predict(data: dict, costs: dict, engine: dict, vt: int) -> list[dict]:
    rows = []
    for target, drafter, task, hw, *paper in data["pairs"]:
        if target not in costs or drafter not in costs:
            continue
        for temperature, algorithm, measured in ((0.0, "slem", paper[0]), (1.0, "tli", paper[1])):
            e, e_ar = engine.get((algorithm, temperature), 0.0), engine.get(("ar", temperature), 0.0)
            args = (costs[target], costs[drafter], e, e_ar, vt)
            at = {a: best(a, *args) for a in ALPHAS}
            rows.append({"target": target, "drafter": drafter, "data": task, "hw": hw, "T": temperature,
                         "algorithm": algorithm, "paper": measured, "engine_ms": e,
                         "cost_ratio": costs[drafter]["fwd_1_ms"] / costs[target]["fwd_1_ms"],
                         "alpha_break_even": alpha_for(1.0, *args), "alpha_paper": alpha_for(measured, *args),
                         **{f"speedup_at_{a}": s for a, (s, _) in at.items()},
                         **{f"k_at_{a}": k for a, (_, k) in at.items()}})
    return rows


def _a(x: float | None) -> str:
    return "never" if x is None else "any" if x == 0 else f"{x:.2f}"


def markdown(rows: list[dict]) -> str:
    head = ("| target | drafter | data | paper's GPU | T | paper | drafter/target cost | α to break even | "
            "α for the paper's speedup | " + " | ".join(f"hsd at α {a}" for a in ALPHAS) + " |")
    lines = [head, "|" + "---|" * (9 + len(ALPHAS))]
    for r in rows:
        lines.append(f"| {r['target']} | {r['drafter']} | {r['data']} | {r['hw']} | {r['T']:g} | {r['paper']:.2f}x | "
                     f"{r['cost_ratio']:.3f} | {_a(r['alpha_break_even'])} | {_a(r['alpha_paper'])} | "
                     + " | ".join(f"{r[f'speedup_at_{a}']:.2f}x (k {r[f'k_at_{a}']})" for a in ALPHAS) + " |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", nargs="+", help="measure only these (names in models.json)")
    ap.add_argument("--engine", help="engine_cost.py --json output: hsd's own ms per round (else 0)")
    ap.add_argument("--device", default="cpu", help="cpu, or cuda: the forwards a GPU runs (use --dtype bfloat16)")
    ap.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32",
                    help="hsd runs float32 on a CPU; bfloat16 (the paper's GPUs') halves the memory, but a CPU's "
                         "bfloat16 products of one row can be slower than of six")
    ap.add_argument("--lookahead", type=int, default=5, help="verifications are timed at lookahead + 1 tokens")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--json", help="write the costs and the rows here")
    ap.add_argument("--reuse", help="an earlier --json: take its costs for the models not named by --models "
                                    "(to measure one model again, e.g. after a noisy run)")
    ap.add_argument("--markdown", action="store_true")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    dtype = getattr(torch, args.dtype)
    data = load_specs()
    names = args.models or list(data["models"])
    unknown = [n for n in names if n not in data["models"]]
    if unknown:
        ap.error(f"unknown model(s) {', '.join(unknown)}; known: {', '.join(data['models'])}")
    info = machine_info()
    info.update(dtype=args.dtype, device=args.device)
    if args.device.startswith("cuda"):
        info["gpu"] = torch.cuda.get_device_name(args.device)
    print(machine_line(info))
    print(f"forwards after a {CONTEXT}-token context, 1 and {args.lookahead + 1} tokens, median of {args.repeats}:")
    costs, vt = {}, args.lookahead + 1
    if args.reuse:
        earlier = json.loads(Path(args.reuse).read_text())
        if earlier.get("machine", {}).get("device", "cpu") != args.device:
            ap.error(f"{args.reuse} was measured on {earlier['machine']['device']}, not {args.device}")
        if earlier["verify_tokens"] != vt or earlier["dtype"] != args.dtype:
            ap.error(f"{args.reuse} was measured at {earlier['verify_tokens']} tokens in {earlier['dtype']}; "
                     f"pass --lookahead {earlier['verify_tokens'] - 1} --dtype {earlier['dtype']} to reuse it")
        remeasure = set(args.models or ())
        costs = {n: c for n, c in earlier["costs"].items() if n in data["models"] and n not in remeasure}
        names = [n for n in names if n not in costs]
    for name in names:
        spec = data["models"][name]
        shape = spec.get("shape_of")
        costs[name] = (dict(costs[shape]) if shape in costs
                       else measure(name, spec, dtype, vt, args.repeats, args.device))
    engine = engine_costs(args.engine)
    rows = predict(data, costs, engine, vt)
    print("\nhsd's own cost per round: " + (", ".join(f"{a} T={t:g} {ms:.2f} ms" for (a, t), ms in engine.items())
                                           if engine else "none given (--engine)"))
    for r in rows:
        print(f"  {r['target']} <- {r['drafter']} ({r['data']}, {r['hw']}) T={r['T']:g}: paper {r['paper']:.2f}x; "
              f"cost ratio {r['cost_ratio']:.3f}; α to break even {_a(r['alpha_break_even'])}, for the paper's "
              f"speedup {_a(r['alpha_paper'])}; at α 0.7: {r['speedup_at_0.7']:.2f}x")
    if args.markdown:
        print("\n" + markdown(rows))
    if args.json:
        Path(args.json).write_text(json.dumps({"machine": info, "dtype": args.dtype, "context": CONTEXT,
                                               "verify_tokens": vt, "costs": costs,
                                               "engine_ms": {f"{a}@{t:g}": v for (a, t), v in engine.items()},
                                               "rows": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
