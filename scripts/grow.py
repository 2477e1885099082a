"""Make a trained decoder deeper or its MLPs wider without changing what it computes, then keep training it.

    python scripts/train_pair.py grow --from assets/tiny-code/target --layers 16 --out /work/deep/target
    python scripts/train_pair.py grow --from assets/tiny-code/drafter --intermediate 1024 --out /work/wide/drafter

The embedded pair's shapes are chosen for the best speedup on a 2-core CPU. There a decoding step costs
about 1 ms per layer whatever the width (``scripts/pair/shapes.py``), so the target-to-drafter cost ratio is
set by depth: a 16-layer target makes a 2-layer drafter cost 0.12 of a target step, an 8-layer one 0.21.
Training a deep target from scratch takes many CPU hours; growing a trained shallower one does not start from
nothing.

``grow`` inserts, after layer ``i``, a copy of layer ``i`` whose two output projections (attention
``o_proj`` and MLP ``down_proj``) are zero. A pre-norm residual block with zero output projections adds
nothing to the residual stream, so the grown model's logits equal the original's exactly (checked on a
sample before writing). The copies keep the original's query, key, value, gate and up weights, so
their gradients are not zero and training makes them useful from the first step. Cache indices
(``self_attn.layer_idx``) and per-layer config lists (``layer_types``) are renumbered.

``--intermediate N`` widens every MLP instead (or as well): each layer gets ``N - n`` new hidden units
whose gate and up rows are drawn like the layer's own (normal, the standard deviation of its existing
rows; seeded) and whose ``down_proj`` columns are zero, so they add nothing until training moves those
columns, and the gradient reaches them from the first step (it is the new units' activations times the
gradient of the layer's output). It tests whether a drafter's agreement with the target is bounded by
its size at a smaller step cost than another layer (measured: ``docs/embedded-pair.md``, *Bigger drafters*).

The folder written is a complete model directory (weights in float16, like the shipped ones, config
dtype float32, the tokenizer) and a ``train_log.json`` beside it carrying the original's totals, so
``resume --role target --init FOLDER`` continues training it with the totals so far and ``export`` can
later ship it. The float16 rounding of the zero projections is exact, and the check is made on the
float16 weights.
"""

from __future__ import annotations

import argparse
import copy
import json
import shutil
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent


def decoder_layers(model):
    """The model's list of decoder layers (Llama, Mistral, Qwen2, Gemma and most causal LMs)."""
    layers = getattr(getattr(model, "model", None), "layers", None)
    if not isinstance(layers, torch.nn.ModuleList):
        raise SystemExit(f"grow: {type(model).__name__} has no model.layers list of decoder layers")
    return layers


def silent_copy(layer):
    """A copy of ``layer`` that adds nothing to the residual stream: its output projections are zero."""
    new = copy.deepcopy(layer)
    for name in ("self_attn.o_proj", "mlp.down_proj"):
        try:
            mod = new.get_submodule(name)
        except AttributeError:
            raise SystemExit(f"grow: a decoder layer without {name}; only Llama-style layers can be grown") from None
        with torch.no_grad():
            mod.weight.zero_()
            if getattr(mod, "bias", None) is not None:
                mod.bias.zero_()
    return new


def grow_depth(model, layers: int):
    """A new model with ``layers`` decoder layers computing the same function as ``model`` (left as is).

    The ``layers - n`` new layers are spread evenly: new layer ``j`` follows original layer
    ``floor(j * n / (layers - n))``."""
    n = len(decoder_layers(model))
    if layers <= n:
        raise SystemExit(f"grow: the model already has {n} layers; ask for more than that")
    extra = layers - n
    after = [min(n - 1, (j * n) // extra) for j in range(extra)]
    grown = copy.deepcopy(model)
    old = decoder_layers(grown)
    new = torch.nn.ModuleList()
    for i, layer in enumerate(old):
        new.append(layer)
        new.extend(silent_copy(layer) for _ in range(after.count(i)))
    grown.model.layers = new
    for idx, layer in enumerate(new):
        attn = getattr(layer, "self_attn", None)
        if attn is not None and hasattr(attn, "layer_idx"):
            attn.layer_idx = idx
        if hasattr(layer, "layer_idx"):
            layer.layer_idx = idx
    cfg = grown.config
    types = getattr(cfg, "layer_types", None)
    if types:  # copies keep their original's attention type (sliding or full)
        cfg.layer_types = [typ for i, typ in enumerate(types) for _ in range(1 + after.count(i))]
    cfg.num_hidden_layers = layers
    return grown, after


@torch.no_grad()
def widen_mlp(model, intermediate: int, seed: int = 0):
    """A new model whose MLPs have ``intermediate`` hidden units, computing the same function as ``model``
    (left as is): new gate/up rows random, new down_proj columns zero."""
    old = model.config.intermediate_size
    if intermediate <= old:
        raise SystemExit(f"grow: the MLPs already have {old} hidden units; ask for more than that")
    gen = torch.Generator().manual_seed(seed)
    wide = copy.deepcopy(model)
    extra = intermediate - old
    for layer in decoder_layers(wide):
        mlp = getattr(layer, "mlp", None)
        if mlp is None or not all(hasattr(mlp, n) for n in ("gate_proj", "up_proj", "down_proj")):
            raise SystemExit("grow: --intermediate needs gated MLPs (gate_proj, up_proj, down_proj)")
        if any(getattr(getattr(mlp, n), "bias", None) is not None for n in ("gate_proj", "up_proj", "down_proj")):
            raise SystemExit("grow: --intermediate handles bias-free MLPs only")
        for name in ("gate_proj", "up_proj"):
            lin = getattr(mlp, name)
            w = lin.weight
            new = torch.randn(extra, w.shape[1], generator=gen, dtype=torch.float32) * w.float().std()
            lin.weight = torch.nn.Parameter(torch.cat([w, new.to(w.dtype)], 0))
            lin.out_features = intermediate
        down = mlp.down_proj
        w = down.weight
        down.weight = torch.nn.Parameter(torch.cat([w, w.new_zeros(w.shape[0], extra)], 1))
        down.in_features = intermediate
        if hasattr(mlp, "intermediate_size"):
            mlp.intermediate_size = intermediate
    wide.config.intermediate_size = intermediate
    return wide


@torch.no_grad()
def max_logit_difference(a, b, ids: torch.Tensor) -> float:
    return (a(input_ids=ids).logits - b(input_ids=ids).logits).abs().max().item()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="train_pair.py grow", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--from", dest="src", default=str(ROOT / "assets" / "tiny-code" / "target"),
                    help="the model folder to grow (default: the shipped target)")
    ap.add_argument("--layers", type=int, default=None, help="decoder layers of the grown model")
    ap.add_argument("--intermediate", type=int, default=None, help="hidden units of every MLP of the grown model")
    ap.add_argument("--seed", type=int, default=0, help="draws the new MLP units' gate and up rows")
    ap.add_argument("--out", required=True, help="folder to write the grown model into")
    args = ap.parse_args(argv)
    from transformers import AutoModelForCausalLM, AutoTokenizer

    sys.path.insert(0, str(ROOT / "scripts"))
    from train_common import save_model_dir

    if args.layers is None and args.intermediate is None:
        ap.error("say how to grow: --layers N (deeper), --intermediate N (wider MLPs), or both")
    src, out = Path(args.src), Path(args.out)
    if out.resolve() == src.resolve():
        raise SystemExit("grow: --out must differ from --from")
    tok = AutoTokenizer.from_pretrained(src)
    # the weights rounded to float16 first, as every shipped model's are, so that the check below compares like
    # with like; not the buffers: rotary frequencies are recomputed in float32 on loading, and rounding them
    # moved a 2-layer drafter's logits by 1.6e-3
    model = AutoModelForCausalLM.from_pretrained(src, dtype=torch.float32).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(p.half().float())
    grown, after = model, []
    if args.layers is not None:
        grown, after = grow_depth(grown, args.layers)
    if args.intermediate is not None:
        grown = widen_mlp(grown, args.intermediate, seed=args.seed)
    save_model_dir(grown, tok, out)
    check = AutoModelForCausalLM.from_pretrained(out, dtype=torch.float32).eval()
    ids = torch.randint(0, model.config.vocab_size, (2, 64), generator=torch.Generator().manual_seed(0))
    diff = max_logit_difference(model, check, ids)
    if diff > 1e-4:
        raise SystemExit(f"grow: the grown model's logits differ from the original's by {diff:.2e}")
    log = src.parent / "train_log.json"
    # totals so far (if the source has them), for resume --init, and the growth, for the model card
    run = json.loads(log.read_text()) if log.is_file() else {}
    before = run.get(src.name, {}).get("totals", {}).get("tokens")
    step = dict(source=str(src), layers_before=len(decoder_layers(model)), layers_after=len(decoder_layers(grown)),
                new_layer_after=after, tokens_before=before)
    if args.intermediate is not None:
        step.update(intermediate_before=model.config.intermediate_size, intermediate_after=args.intermediate,
                    seed=args.seed)
    run.setdefault("grown", []).append(step)
    (out.parent / "train_log.json").write_text(json.dumps(run, indent=1) + "\n")
    corpus = src.parent / "corpus.json"
    if corpus.is_file() and not (out.parent / "corpus.json").exists():
        shutil.copy(corpus, out.parent / "corpus.json")
    shape = lambda m: f"{len(decoder_layers(m))} layers, MLP {m.config.intermediate_size}"  # noqa: E731
    print(f"grew {src} from {shape(model)} to {shape(grown)} into {out}"
          + (f" (new layers after layers {after})" if after else "") + f"; max logit difference {diff:.1e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
