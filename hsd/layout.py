"""Weight layout on the CPU: linear layers multiply decoding's few rows in the layout oneMKL is fastest in.

A linear layer computes ``x @ W.T`` with ``W`` of shape ``[out, in]``, stored row by row. Decoding multiplies one
row (an AR step) or a handful (a verification of a few drafted tokens) by each weight, and on the CPU oneMKL's
speed for those few rows depends on how the operands are laid out, differently for one row and for several, and
differently from one processor to the next (``scripts/pair/weight_layout.py`` measures it; docs/benchmarks.md):

- one row: ``F.linear`` with ``W`` stored column by column (``W.T`` contiguous) is as fast as anything on every
  machine measured;
- 2 to 5 rows: on an AMD EPYC (Zen 4) ``W @ x.T`` with ``W`` row-major, as loaded, is fastest, two rows even a
  little faster than one (about 3.8 against 5.1 ms for the embedded target's 112 matrices), where ``F.linear`` takes
  5.6 ms; on an Intel Xeon (Sapphire Rapids) the same ``W @ x.T`` takes four times as long as ``F.linear``
  column-major (10.4 against 2.6 ms for two rows), and ``F.linear`` with ``W`` row-major, as loaded, is the
  fastest of the three for 2 and 3 rows;
- 6 or more rows: ``F.linear`` column-major again.

So which of the three kernels multiplies ``n`` rows is measured on the machine, for each model, not assumed
(:class:`KernelPlan`).
A model hsd loads on the CPU in float32 gets one of these layouts (``HSD_WEIGHT_LAYOUT``):

``dual``
    every ``nn.Linear`` keeps its weight as loaded and a column-major copy beside it, and multiplies by
    whichever kernel its model's plan measured fastest for that number of rows (:class:`DualLinear`). The copy
    costs the linear weights' memory once more.
``column``
    the weights re-strided column-major in place (the same ``Parameter`` objects): no extra memory; where
    ``W @ x.T`` is the faster kernel for a few rows, those cost more than in ``dual``.
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
import threading
import time

import torch
import torch.nn.functional as F

LAYOUTS = ("auto", "dual", "column", "row")
#: the numbers of rows a :class:`KernelPlan` times the kernels for: a verification of up to 15 proposals. A
#: :class:`DualLinear` multiplies one row column-major (fastest on every machine measured: one row's product streams
#: the weight from memory, which a plan's sample, mostly in the caches, does not show) and more than 16 too, where
#: the kernels are within a few percent
PLANNED_ROWS = range(2, 17)
#: the kernels a plan chooses from, the default first: ``F.linear`` with the column-major copy, ``F.linear`` with
#: the weight as loaded (row-major: oneMKL multiplies by its transpose), and ``W @ x.T`` with the weight as loaded
KERNELS = ("linear_columns", "linear_rows", "mm_rows")
#: a plan times the kernels on matrices of its model's shapes, at most this many bytes of them (from memory, not
#: from the core's own cache, as a forward of a model bigger than that reads them)
SAMPLE_BYTES = 12 << 20
#: another kernel must take at most this share of ``F.linear`` column-major's time to be chosen: a near tie is noise
MARGIN = 0.9
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


class KernelPlan:
    """Which kernel one model's linear layers multiply each number of rows by (:data:`KERNELS`), as measured on this
    machine.

    The plan times every kernel for every number of rows in :data:`PLANNED_ROWS` on fresh matrices of the model's
    weight shapes (values do not change a matrix product's speed), in the model's order, at most
    :data:`SAMPLE_BYTES` of them: one pass over them is one sample; the kernels alternate, the fastest of three
    passes counts, and a kernel other than ``F.linear`` column-major is chosen only where the fastest of them needs
    at most :data:`MARGIN` of its time. It measures once per intra-op thread count (the kernels' speed depends on
    it), when a generation starts (:func:`prepare`) or else on the first forward that runs with that count, and
    every model of the same shapes in the process shares the result: about 0.1-1 s, once."""

    def __init__(self, shapes: list[tuple[int, int]]):
        self.shapes = _sample(shapes)
        self._chosen: dict[int, dict[int, str]] = {}  # per thread count: what measure() chose

    def kernel(self, rows: int) -> str:
        """The kernel (one of :data:`KERNELS`) that multiplies ``rows`` rows."""
        if rows not in PLANNED_ROWS:
            return KERNELS[0]
        threads = torch.get_num_threads()
        chosen = self._chosen.get(threads)
        if chosen is None:
            chosen = self._chosen[threads] = self.measure(threads)[0]
        return chosen.get(rows, KERNELS[0])

    def measure(self, threads: int | None = None) -> tuple[dict[int, str], dict[int, dict[str, float]]]:
        """({rows: kernel} where a kernel other than ``F.linear`` column-major was chosen, {rows: {kernel: seconds
        for one pass over the sample}}) at ``threads`` intra-op threads (default: this thread's)."""
        key = (tuple(self.shapes), threads or torch.get_num_threads())
        found = _MEASURED.get(key)
        if found is None:
            with _LOCK:
                found = _MEASURED.get(key)
                if found is None:
                    seconds = _time_kernels(self.shapes, key[1])
                    found = _MEASURED[key] = (choose(seconds), seconds)
        return found


def choose(seconds: dict[int, dict[str, float]]) -> dict[int, str]:
    """{rows: kernel} for the numbers of rows where the fastest kernel is not ``F.linear`` column-major and needs
    at most :data:`MARGIN` of its time."""
    chosen = {}
    for rows, by_kernel in seconds.items():
        default = by_kernel[KERNELS[0]]
        best = min((k for k in KERNELS[1:] if k in by_kernel), key=by_kernel.get, default=None)
        if best is not None and by_kernel[best] <= MARGIN * default:
            chosen[rows] = best
    return chosen


_MEASURED: dict[tuple, tuple[dict[int, str], dict[int, dict[str, float]]]] = {}
_LOCK = threading.Lock()


def _sample(shapes: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The first weight shapes in the model's order that together take at most :data:`SAMPLE_BYTES` in float32,
    skipping any bigger than that alone (the smallest shape where every one is)."""
    out, total = [], 0
    for shape in shapes:
        size = shape[0] * shape[1] * 4
        if size > SAMPLE_BYTES:
            continue
        if total + size > SAMPLE_BYTES:
            break
        out.append(shape)
        total += size
    return out or sorted(shapes, key=lambda s: s[0] * s[1])[:1]


def _linear(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return F.linear(x, w)


def _mm_rows(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return torch.mm(w, x.t())


@torch.inference_mode()
def _time_kernels(shapes: list[tuple[int, int]], threads: int) -> dict[int, dict[str, float]]:
    """{rows: {kernel: seconds for one pass over ``shapes``}} for every kernel of :data:`KERNELS`."""
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        rows_major = [torch.randn(shape) for shape in shapes]
        kernels = {"linear_columns": (_linear, [column_major(w) for w in rows_major]),
                   "linear_rows": (_linear, rows_major), "mm_rows": (_mm_rows, rows_major)}
        seconds = {}
        for rows in PLANNED_ROWS:
            xs = [torch.randn(rows, shape[1]) for shape in shapes]
            best = dict.fromkeys(kernels, float("inf"))
            for i in range(4):  # the first pass of each kernel warms it
                for name, (kernel, weights) in kernels.items():
                    start = time.perf_counter()
                    for x, w in zip(xs, weights):
                        kernel(x, w)
                    if i:
                        best[name] = min(best[name], time.perf_counter() - start)
            seconds[rows] = best
        return seconds
    finally:
        torch.set_num_threads(before)


class DualLinear:
    """The forward of one ``nn.Linear`` (set as the module's ``forward``) that multiplies a number of rows by the
    kernel its model's :class:`KernelPlan` measured fastest for it: by the weight as loaded (row-major), as
    ``F.linear`` or as ``W @ x.T``, or by a column-major copy of it (``F.linear``, the default).

    The copy follows the weight: it is taken again after any in-place change of the weight (a
    ``load_state_dict``, an optimizer step: the tensor's version counter moves) or a new ``.data``. When autograd
    records (the weight requires a gradient and grad mode is on) the layer computes ``F.linear`` with the weight
    itself, so gradients flow as they would without this. A weight moved off the CPU or cast from float32
    (``model.to(...)``) makes it the plain layer again, the copy dropped."""

    def __init__(self, module: torch.nn.Linear, plan: KernelPlan):
        self.weight, self.bias, self.plan = module.weight, module.bias, plan
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
        kernel = self.plan.kernel(rows)
        if kernel != KERNELS[0] and w.is_contiguous() and x.dtype == w.dtype:
            if kernel == "linear_rows":
                return F.linear(x, w, self.bias)
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
    and a column-major copy), all sharing one :class:`KernelPlan`; returns how many. A weight an embedding shares (tied input and output embeddings)
    is only read, so a tied head gets it too. On the CPU in float32 only (:func:`applies`)."""
    if not applies(model):
        return 0
    use_row_major(model)
    linears = _linears(model)
    plan = KernelPlan([tuple(m.weight.shape) for m in linears])
    for module in linears:
        module.forward = DualLinear(module, plan)
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


def kernel_plan(model: torch.nn.Module) -> KernelPlan | None:
    """The :class:`KernelPlan` of a ``dual`` model's linear layers (``None`` in another layout)."""
    for module in _linears(model):
        forward = module.__dict__.get("forward")
        if isinstance(forward, DualLinear):
            return forward.plan
    return None


def prepare(*models: torch.nn.Module | None) -> None:
    """Measure the kernel plans of those of ``models`` that are ``dual``, at this thread's intra-op count, unless
    measured already: a generation calls this before its clock starts, so the measurement (on the first forward
    otherwise, a speculative round's first verification) never counts in a generation's time."""
    for model in models:
        if model is not None and applies(model):
            plan = kernel_plan(model)
            if plan is not None:
                plan.kernel(PLANNED_ROWS[0])


def layout_of(model: torch.nn.Module) -> str:
    """``dual``, ``column`` or ``row``: how ``model``'s linear layers are laid out now (the first one decides)."""
    for module in _linears(model):
        if isinstance(module.__dict__.get("forward"), DualLinear):
            return "dual"
        if not module.weight.is_contiguous() and module.weight.t().is_contiguous():
            return "column"
    return "row"
