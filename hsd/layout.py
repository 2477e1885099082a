"""Weight layout on the CPU: linear layers' weights stored column-major, for decoding's few rows.

A linear layer computes ``x @ W.T`` with ``W`` of shape ``[out, in]``, stored row by row. Decoding
multiplies one row (an AR step) or a handful (a verification of a few drafted tokens) by each weight,
and on the CPU oneMKL's matrix product for 2 to 16 rows is markedly slower with ``W`` in that layout
than with the same values stored column by column (``W.T`` contiguous), where no transpose is
implied. Measured on the 2-core AMD EPYC (Zen 4) of the brief, one thread, float32, the embedded target's
forward after 150 cached tokens (``benchmarks/weight_layout.py``, docs/benchmarks.md): one token 12.0 ->
11.4 ms, four tokens 15.0 -> 13.1 ms; with the shapes of a 0.5B Qwen2 one token 157 -> 134 ms.
So a verification costs fewer target steps, and an AR step is a little cheaper too.

Only the layout changes: every weight keeps its values (the same ``Parameter`` object, its ``.data``
re-strided), so a forward computes the same function; its float32 rounding may differ in the last bits,
as any change of matrix kernel does (AR and the speculative algorithms run on the same weights, so each
algorithm's output is still exactly AR's). hsd applies it to the models *it* loads on the CPU in
float32, before they are cached (:func:`hsd.loading.load_model`); a model object a user hands to
:meth:`hsd.loading.Model.wrap` is never touched. ``HSD_WEIGHT_LAYOUT=row`` keeps the layout as loaded.
"""

from __future__ import annotations

import os

import torch

LAYOUTS = ("column", "row")


def layout_setting() -> str:
    value = os.environ.get("HSD_WEIGHT_LAYOUT", "column").strip().lower()
    if value not in LAYOUTS:
        from .errors import InvalidSettingError

        raise InvalidSettingError(f"HSD_WEIGHT_LAYOUT must be one of {', '.join(LAYOUTS)}, got {value!r}.")
    return value


def column_major(w: torch.Tensor) -> torch.Tensor:
    """``w`` (``[out, in]``) with the same values, stored column by column (``w.T`` contiguous); ``w`` itself
    when it already is."""
    return w if w.dim() != 2 or w.t().is_contiguous() else w.t().contiguous().t()


def row_major(w: torch.Tensor) -> torch.Tensor:
    return w if w.is_contiguous() else w.contiguous()


def applies(model: torch.nn.Module) -> bool:
    """Whether :func:`use_column_major` would change ``model``: on the CPU, in float32."""
    p = next(model.parameters(), None)
    return p is not None and p.device.type == "cpu" and p.dtype == torch.float32


@torch.no_grad()
def use_column_major(model: torch.nn.Module) -> int:
    """Store the weight of every ``torch.nn.Linear`` of ``model`` column-major (in place: the same ``Parameter``
    objects, their values unchanged); returns how many. Only exact ``nn.Linear`` modules (a quantised or
    otherwise special subclass may read its weight's memory directly), and not a weight an embedding shares
    (tied input and output embeddings: the lookup reads rows). On the CPU in float32 only (:func:`applies`)."""
    if not applies(model):
        return 0
    shared = {id(m.weight) for m in model.modules() if isinstance(m, torch.nn.Embedding)}
    n = 0
    for module in model.modules():
        w = getattr(module, "weight", None)
        if type(module) is torch.nn.Linear and w is not None and id(w) not in shared and not w.t().is_contiguous():
            w.data = column_major(w.data)
            n += 1
    return n


@torch.no_grad()
def use_row_major(model: torch.nn.Module) -> int:
    """Undo :func:`use_column_major` (benchmarks compare the two layouts); returns how many weights moved."""
    n = 0
    for module in model.modules():
        w = getattr(module, "weight", None)
        if type(module) is torch.nn.Linear and w is not None and not w.is_contiguous():
            w.data = row_major(w.data)
            n += 1
    return n
