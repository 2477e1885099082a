"""Weight layout on the CPU: linear layers multiply decoding's few rows in the layout oneMKL is fastest in.

A linear layer computes ``x @ W.T`` with ``W`` of shape ``[out, in]``, stored row by row. Decoding multiplies one
row (an AR step) or a handful (a verification of a few drafted tokens) by each weight, and on the CPU oneMKL's
speed for those few rows depends on how the operands are laid out, differently for one row and for several.
On a 2-core AMD EPYC (Zen 4), one thread, float32, for the embedded target's 112 matrices
(``scripts/pair/weight_layout.py`` measures it; docs/benchmarks.md):

- one row is fastest as ``F.linear`` with ``W`` stored column by column (``W.T`` contiguous);
- 2 to 5 rows are fastest as ``W @ x.T`` with ``W`` stored row by row, as loaded: with two rows even a little
  faster than one row in either layout (about 3.8 against 5.1 ms for the 112 matrices), where ``F.linear``
  takes 5.6 ms column-major and 6.8 ms row-major;
- 6 or more rows: ``F.linear`` column-major again.

So a model hsd loads on the CPU in float32 gets one of these layouts (``HSD_WEIGHT_LAYOUT``):

``dual``
    every ``nn.Linear`` keeps its weight as loaded and a column-major copy beside it, and multiplies by
    whichever the number of rows favours (:class:`DualLinear`): the embedded target's verification of 2 tokens
    then costs about one AR step instead of 1.2, and an AR step is what it is column-major. The copy costs the
    linear weights' memory once more.
``column``
    the weights re-strided column-major in place (the same ``Parameter`` objects): no extra memory; 2-5 rows
    cost more than in ``dual``.
``row``
    as loaded.
``auto`` (the default)
    ``dual`` when the copies take at most :data:`DUAL_LIMIT` bytes, else ``column``.

Only the kernels change: every weight keeps its values, so a forward computes the same function; its float32
rounding may differ in the last bits, as any change of matrix kernel does (AR and the speculative algorithms run
on the same weights, so each algorithm's output is still exactly AR's). hsd applies this to the models *it*
loads on the CPU in float32, before they are cached (:func:`hsd.loading.load_model`); a model object a user hands
to :meth:`hsd.loading.Model.wrap` is never touched.
"""

from __future__ import annotations

import os

import torch
import torch.nn.functional as F

LAYOUTS = ("auto", "dual", "column", "row")
#: the numbers of rows a :class:`DualLinear` multiplies by the row-major weight (``W @ x.T``); others column-major
DUAL_ROWS = range(2, 6)
#: ``auto`` keeps column-major copies of the linear weights when they take at most this many bytes (2 GiB: a
#: float32 model of about 500M parameters), otherwise re-strides the weights in place (``column``)
DUAL_LIMIT = 2 << 30


def layout_setting() -> str:
    value = os.environ.get("HSD_WEIGHT_LAYOUT", "auto").strip().lower()
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
    """Whether a layout other than ``row`` would change ``model``: on the CPU, in float32."""
    p = next(model.parameters(), None)
    return p is not None and p.device.type == "cpu" and p.dtype == torch.float32


def _linears(model: torch.nn.Module) -> list[torch.nn.Linear]:
    """Exact ``nn.Linear`` modules only: a quantised or otherwise special subclass may read its weight's memory
    itself."""
    return [m for m in model.modules() if type(m) is torch.nn.Linear and m.weight is not None]


class DualLinear:
    """The forward of one ``nn.Linear`` (set as the module's ``forward``) that multiplies :data:`DUAL_ROWS` rows by
    the weight as loaded (row-major, ``W @ x.T``) and any other number by a column-major copy of it.

    The copy follows the weight: it is taken again after any in-place change of the weight (a
    ``load_state_dict``, an optimizer step: the tensor's version counter moves) or a new ``.data``. When autograd
    records (the weight requires a gradient and grad mode is on) the layer computes ``F.linear`` with the weight
    itself, so gradients flow as they would without this. A weight moved off the CPU or cast from float32
    (``model.to(...)``) makes it the plain layer again, the copy dropped."""

    def __init__(self, module: torch.nn.Linear):
        self.weight, self.bias = module.weight, module.bias
        self._key = None
        self._refresh()

    def _refresh(self) -> None:
        w = self.weight
        self.columns = column_major(w.detach().contiguous())
        self._key = _identity(w)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        w = self.weight
        if w.device.type != "cpu" or w.dtype != torch.float32:  # moved or cast since: the plain layer, no copy
            self.columns, self._key = None, None
            return F.linear(x, w, self.bias)
        if w.requires_grad and torch.is_grad_enabled():
            return F.linear(x, w, self.bias)
        if _identity(w) != self._key:
            self._refresh()
        rows = x.numel() // x.shape[-1] if x.dim() else 0
        if rows in DUAL_ROWS and w.is_contiguous() and x.dtype == w.dtype:
            out = torch.mm(w, x.reshape(rows, -1).t()).t()
            if self.bias is not None:
                out = out + self.bias
            return out.contiguous().view(*x.shape[:-1], w.shape[0])
        return F.linear(x, self.columns, self.bias)


def _identity(w: torch.Tensor) -> tuple:
    """What changes when the weight's values may have: its storage and, for a normal tensor, its version counter
    (an in-place write bumps it). An inference tensor (a copy made under ``torch.inference_mode``) has no
    version counter and cannot be written in place outside that mode: its storage identifies it."""
    return (w.data_ptr(), None if w.is_inference() else w._version)


def dual_bytes(model: torch.nn.Module) -> int:
    """What :func:`use_dual` would add: the bytes of the model's linear weights, each shared weight once."""
    seen = {id(m.weight): m.weight for m in _linears(model)}
    return sum(w.numel() * w.element_size() for w in seen.values())


def planned_copy_bytes(weight_bytes: int, device: torch.device, dtype: torch.dtype) -> int:
    """The memory the layout setting will add to a model of ``weight_bytes`` loaded on ``device`` in ``dtype``:
    its weights once more where it will be ``dual`` (an upper bound: the copies are of the linear weights only),
    else 0. :func:`hsd.planning.plan_load` counts it before loading."""
    if device.type != "cpu" or dtype != torch.float32:
        return 0
    setting = layout_setting()
    return weight_bytes if setting == "dual" or (setting == "auto" and weight_bytes <= DUAL_LIMIT) else 0


@torch.no_grad()
def use_dual(model: torch.nn.Module) -> int:
    """Give every exact ``nn.Linear`` of ``model`` a :class:`DualLinear` forward (its weight row-major, as loaded,
    and a column-major copy); returns how many. A weight an embedding shares (tied input and output embeddings)
    is only read, so a tied head gets it too. On the CPU in float32 only (:func:`applies`)."""
    if not applies(model):
        return 0
    use_row_major(model)
    linears = _linears(model)
    for module in linears:
        module.forward = DualLinear(module)
    return len(linears)


@torch.no_grad()
def use_column_major(model: torch.nn.Module) -> int:
    """Store the weight of every exact ``torch.nn.Linear`` of ``model`` column-major (in place: the same
    ``Parameter`` objects, their values unchanged); returns how many. Not a weight an embedding shares (tied input
    and output embeddings: the lookup reads rows). On the CPU in float32 only (:func:`applies`)."""
    if not applies(model):
        return 0
    _plain(model)
    shared = {id(m.weight) for m in model.modules() if isinstance(m, torch.nn.Embedding)}
    n = 0
    for module in _linears(model):
        w = module.weight
        if id(w) not in shared and not w.t().is_contiguous():
            w.data = column_major(w.data)
            n += 1
    return n


@torch.no_grad()
def use_row_major(model: torch.nn.Module) -> int:
    """Every linear weight row-major and plain ``nn.Linear`` forwards (undoes the other layouts; benchmarks compare
    them); returns how many weights moved."""
    _plain(model)
    n = 0
    for module in _linears(model):
        w = module.weight
        if not w.is_contiguous():
            w.data = row_major(w.data)
            n += 1
    return n


def _plain(model: torch.nn.Module) -> None:
    for module in _linears(model):
        if isinstance(module.__dict__.get("forward"), DualLinear):
            del module.forward


def use_layout(model: torch.nn.Module, layout: str | None = None) -> str:
    """Lay ``model`` out as ``layout`` (default: :func:`layout_setting`; ``auto`` decided by :data:`DUAL_LIMIT`);
    returns the layout it now has (``row`` where none applies: not on the CPU in float32)."""
    layout = layout or layout_setting()
    if layout not in LAYOUTS:
        from .errors import InvalidSettingError

        raise InvalidSettingError(f"layout must be one of {', '.join(LAYOUTS)}, got {layout!r}.")
    if not applies(model):
        return "row"
    if layout == "auto":
        layout = "dual" if dual_bytes(model) <= DUAL_LIMIT else "column"
    {"dual": use_dual, "column": use_column_major, "row": use_row_major}[layout](model)
    return layout


def layout_of(model: torch.nn.Module) -> str:
    """``dual``, ``column`` or ``row``: how ``model``'s linear layers are laid out now (the first one decides)."""
    for module in _linears(model):
        if isinstance(module.__dict__.get("forward"), DualLinear):
            return "dual"
        if not module.weight.is_contiguous() and module.weight.t().is_contiguous():
            return "column"
    return "row"
