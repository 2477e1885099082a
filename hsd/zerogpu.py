"""ZeroGPU: run the app on a Hugging Face Space the way ZeroGPU expects (hub docs ``spaces-zerogpu.md``, 2026).

On ZeroGPU (``SPACES_ZERO_GPU`` set) a GPU is attached only while a function decorated with
``@spaces.GPU`` runs, in a worker process forked from the app's main process. Outside such a function
``spaces`` emulates CUDA: a model moved to ``cuda`` at start-up stays in host memory until each fresh worker
copies *every* tensor so placed onto its GPU. Hence:

* **Presets are loaded at start-up, in the main process** (:func:`preload`), never lazily inside a GPU
  function; a model a visitor types in is loaded the same way before the GPU function is called
  (:func:`missing_models`, :func:`load_steps`), so only generation runs on the GPU.
* **Durations are computed from the request** (:func:`run_duration`, :func:`compare_duration`,
  :func:`advise_duration`, each with its handler's signature, as ``spaces.GPU(duration=callable)`` calls it
  with the handler's arguments): a small model of seconds per forward on the ZeroGPU slice, summed over the
  tokens, rounds and algorithms the request asks for, plus the worker's start (which copies every preloaded
  tensor to the GPU), capped.
* **ZeroGPU's own failures** (quota exceeded, task aborted, no GPU available, duration too long) are raised by
  the ``spaces`` wrapper around the handler, before or after the handler's own ``try``; :func:`gpu` with
  ``on_error`` catches them outside and :func:`explain_gpu_error` turns each into a sentence that says what to
  do.

Neither ``spaces`` nor ``gradio`` is imported by this module: ``spaces`` is imported when :func:`gpu` or
:func:`preload` needs it (elsewhere the decorator is the identity), gradio's error type is only recognised.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import json
import logging
import math
import os
import re
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path

from . import catalogue, emulation, loading, marks, planning
from .advise import DRAFT_THRESHOLDS, DYNAMIC_LOOKAHEAD
from .algorithms import ALGORITHMS
from .catalogue import HUB_MODELS, preload_hub_ids
from .errors import HsdError, ResourceLimitError

log = logging.getLogger("hsd.zerogpu")

# ----------------------------------------------------------------------------- what ZeroGPU supports

#: torch versions ZeroGPU supports (hub docs, "Supported Versions"); the Space pins :data:`SPACE_TORCH`
SUPPORTED_TORCH = ("2.8.0", "2.9.1", "2.10.0", "2.11.0")
SPACE_TORCH = "2.11.0"
#: the spaces package the Space's requirements pin (requirements.txt) and ``hsd space rehearse`` runs
SPACES_VERSION = "0.51.3"
#: Python versions ZeroGPU supports; README.md's front matter names :data:`SPACE_PYTHON`
SUPPORTED_PYTHON = ("3.10.13", "3.12.12")
SPACE_PYTHON = "3.12.12"
#: GPU memory of the default ``large`` size (half an NVIDIA RTX Pro 6000 Blackwell)
GPU_BYTES = 48e9
#: ``spaces`` makes every call ``xlarge`` (2x quota) when the tensors placed on cuda at start-up exceed this
#: (spaces/zero/configs.json, RTX Pro 6000 Blackwell); hsd keeps its resident weights under :data:`WEIGHTS_BUDGET`
XLARGE_THRESHOLD_BYTES = 45_097_156_608
#: weights kept on (emulated) cuda at once: the 48 GB less room for KV caches and activations
WEIGHTS_BUDGET = 40e9
#: the duration a ``large`` call asks the scheduler for is the decorator's duration times the GPU's factor:
#: 1.0 on the H200 slice the durations below are modelled on, 1.5 on half an RTX Pro 6000 Blackwell (the
#: hardware since May 2026, spaces/zero/configs.json); the quota check compares that product with the quota left
DURATION_FACTOR = 1.5
#: daily ZeroGPU quota in seconds by visitor tier (hub docs, "Usage Tiers"); resets 24 h after first use
QUOTAS = {"unauthenticated": 120, "free account": 300, "PRO": 2400, "Team": 2400, "Enterprise": 3600}


def on_zerogpu() -> bool:
    """Whether this process runs on a ZeroGPU Space (``SPACES_ZERO_GPU``, read as ``spaces`` reads it)."""
    return os.environ.get("SPACES_ZERO_GPU", "").lower() in ("1", "t", "true")


def _spaces():
    """The ``spaces`` package, or ``None`` where it does not import (not installed; or on ZeroGPU without
    the variables the platform sets, where its import asserts)."""
    try:
        return importlib.import_module("spaces")
    except ImportError:
        if on_zerogpu():
            log.error("this is a ZeroGPU Space but the spaces package is not installed: its GPU functions run "
                      "undecorated and never get a GPU; add spaces==%s to the Space's requirements.txt (hsd space "
                      "push writes it)", SPACES_VERSION)
        return None
    except Exception as exc:  # noqa: BLE001 - spaces asserts SPACES_ZERO_DEVICE_API_URL at import on ZeroGPU
        log.warning("the spaces package did not import (%s: %s); GPU functions run undecorated",
                    type(exc).__name__, exc)
        return None


# ----------------------------------------------------------------------------- sizes

@dataclass(frozen=True)
class Size:
    """What the duration model needs of a model: parameters, decoder layers, bytes per parameter."""

    params: float
    layers: int
    width: int = 2


UNKNOWN = (8e9, 32)  # a model whose size cannot be found: assume an 8B one
_LAYER_KEYS = ("num_hidden_layers", "n_layer", "num_layers", "n_layers")


def _zerogpu(zerogpu: bool | None) -> bool:
    return on_zerogpu() if zerogpu is None else zerogpu


def _width(dtype: str = "auto", device: str = "auto", zerogpu: bool | None = None) -> int:
    """Bytes per parameter as loaded: float32 4, half types 2; ``auto`` is bfloat16 on a GPU (ZeroGPU)."""
    if dtype in ("bfloat16", "float16"):
        return 2
    if dtype == "float32":
        return 4
    return 2 if _zerogpu(zerogpu) or str(device).startswith("cuda") else 4


def _layers(config) -> int:
    get = config.get if isinstance(config, dict) else lambda k: getattr(config, k, None)
    for key in _LAYER_KEYS:
        if isinstance(get(key), int):
            return get(key)
    text = get("text_config")
    return _layers(text) if text else UNKNOWN[1]


@functools.lru_cache(maxsize=64)
def _hub_params(name: str) -> float | None:
    return planning.hub_params(name)[0]


def model_size(name: str, device: str = "auto", dtype: str = "auto", zerogpu: bool | None = None) -> Size:
    """A model's :class:`Size`: from the loaded model if the cache holds it; else a local directory's config and
    weights, :data:`hsd.catalogue.HUB_MODELS`, the Hub's metadata, or :data:`UNKNOWN`. Never raises."""
    width = _width(dtype, device, zerogpu)
    try:
        for m in list(loading._CACHE.values()):  # noqa: SLF001 - the cache is the one place models live
            if m.name == name:
                return Size(m.n_params, _layers(getattr(m.model, "config", {})), m.dtype.itemsize)
        path = Path(name).expanduser()
        if path.is_dir():
            config = json.loads((path / "config.json").read_text())
            stored = 2 if str(config.get("torch_dtype", config.get("dtype", "float32"))).endswith("16") else 4
            weights = sum(p.stat().st_size for p in path.glob("*.safetensors"))
            return Size(weights / stored, _layers(config), width)
        if name in HUB_MODELS:
            return Size(HUB_MODELS[name].params, HUB_MODELS[name].layers, width)
        params = _hub_params(name)
        if params:
            return Size(params, UNKNOWN[1], width)
    except Exception:  # noqa: BLE001 - a duration is an estimate: fall back to the assumption
        log.debug("size of %s unknown", name, exc_info=True)
    return Size(*UNKNOWN, width)


def resident_bytes() -> int:
    """Bytes of the cached models placed on cuda: what a fresh ZeroGPU worker copies to its GPU."""
    total = 0
    with emulation.on_this_thread():  # a tensor on the emulated cuda says so only where the emulation's mode is
        for m in list(loading._CACHE.values()):  # noqa: SLF001
            try:
                if m.device.type == "cuda":
                    total += sum(t.numel() * t.element_size() for t in (*m.model.parameters(), *m.model.buffers()))
            except Exception:  # noqa: BLE001 - a model without parameters, a device that cannot be read
                continue
    return total


def preset_bytes() -> float:
    """Bytes in bf16 of the Hub models the ZeroGPU Space preloads (the embedded pairs add under 20 MB)."""
    return sum(HUB_MODELS[name].params * 2 for name in preload_hub_ids())


# ----------------------------------------------------------------------------- the duration model

#: seconds per forward on the ZeroGPU slice the ``spaces`` durations are written for (an H200 MIG slice, factor
#: 1.0): a fixed cost (embedding, head, sampling, synchronisation), a launch-bound cost per decoder layer (eager
#: PyTorch, batch 1), and the weights read once per forward from GPU memory at the bandwidth a decode reaches
FORWARD_FIXED_S = 0.003
LAYER_S = 0.0004
BANDWIDTH = 1.5e12  # bytes/s
FLOPS = 2e14  # prefill, compute-bound: 2 x parameters x prompt tokens
#: a fresh worker: fork, CUDA initialisation, then every tensor placed on cuda copied to the GPU
WORKER_START_S = 5.0
MOVE_BANDWIDTH = 4e9  # bytes/s, disk -> pinned memory -> GPU
#: the estimate is multiplied by this before it is asked for: a task that runs past its duration is aborted
MARGIN = 1.2
RUN_CAP_S, COMPARE_CAP_S, ADVISE_CAP_S = 240, 300, 300
#: the app's Advise: tokens per calibration run, the lookaheads it calibrates, and the draft thresholds of the
#: dynamic lookaheads it calibrates too (at :data:`hsd.advise.DYNAMIC_LOOKAHEAD`, where they apply)
ADVISE_TOKENS, ADVISE_LOOKAHEADS, ADVISE_DRAFT_THRESHOLDS = 64, (1, 2, 3, 5, 8), DRAFT_THRESHOLDS
CHARS_PER_TOKEN = 3.0  # a prompt's tokens, for the prefill, without a tokenizer
CHAT_TEMPLATE_TOKENS = 64


def forward_seconds(size: Size, tokens: int = 1) -> float:
    """Seconds of one forward of ``tokens`` positions with a KV cache (decode: the weights once)."""
    return (FORWARD_FIXED_S + size.layers * LAYER_S + size.params * size.width / BANDWIDTH
            + 2 * size.params * max(tokens - 1, 0) / FLOPS)


def prefill_seconds(size: Size, tokens: int) -> float:
    return FORWARD_FIXED_S + size.layers * LAYER_S + size.params * size.width / BANDWIDTH + 2 * size.params * tokens / FLOPS


def token_seconds(algorithm: str, lookahead: int, target: Size, drafter: Size | None) -> float:
    """Seconds per emitted token in the worst case, one token per round (every draft rejected): a round's
    drafter forwards, one target forward over the proposals, and the round's own work (the algorithm's
    :attr:`~hsd.algorithms.contract.Algorithm.round_seconds` and ``drafts_per_position``; without a drafter, AR's)."""
    spec = ALGORITHMS[algorithm if drafter is not None else "ar"]
    if not spec.needs_drafter:
        return forward_seconds(target) + spec.round_seconds
    return (lookahead * spec.drafts_per_position * forward_seconds(drafter) + forward_seconds(target, lookahead + 1)
            + spec.round_seconds)


@dataclass
class Estimate:
    """Seconds a GPU call is expected to take at most, by part, and the duration to ask for."""

    parts: dict[str, float] = field(default_factory=dict)
    cap: int = RUN_CAP_S

    @property
    def seconds(self) -> float:
        return sum(self.parts.values())

    @property
    def duration(self) -> int:
        """What the decorator is given: the estimate with :data:`MARGIN`, whole seconds, at most the cap."""
        return int(min(self.cap, math.ceil(self.seconds * MARGIN)))

    @property
    def capped(self) -> bool:
        return math.ceil(self.seconds * MARGIN) > self.cap

    def requested(self, factor: float = DURATION_FACTOR) -> int:
        """The seconds the scheduler checks against the visitor's quota (``spaces`` rounds duration x factor)."""
        return round(self.duration * factor)


def _number(value, kind, default, low, high):
    try:
        return min(high, max(low, kind(float(value))))
    except (TypeError, ValueError, OverflowError):
        return default


def _names(target, drafter) -> tuple[str, str]:
    try:
        return planning.resolve_name(target), planning.resolve_name(drafter)
    except HsdError:  # the handler will refuse the name; the duration only has to be small
        return "", ""


#: quota_table's scenario: a Space just started (the presets resident, nothing else), whatever this process holds
_ASSUME_FRESH = False


def _start_seconds(names: tuple[str, ...], sizes: tuple[Size | None, ...], device, dtype,
                   zerogpu: bool | None) -> float:
    """A fresh worker's start, which copies every tensor on cuda to its GPU: what is there now (before the
    presets are loaded on ZeroGPU, what :func:`preload` will put there) and the models of this request that
    are not loaded yet."""
    resident, counted = (0, set()) if _ASSUME_FRESH else (resident_bytes(), set())
    if not resident and _zerogpu(zerogpu):
        resident, counted = preset_bytes(), set(preload_hub_ids())
    extra = sum(s.params * s.width for name, s in zip(names, sizes) if s is not None and name
                and name not in counted and (_ASSUME_FRESH or not _loaded(name, device, dtype)))
    if _zerogpu(zerogpu) and resident + extra > WEIGHTS_BUDGET:  # make_room evicts the others first
        resident, extra = 0, sum(s.params * s.width for name, s in zip(names, sizes) if s is not None and name)
    return WORKER_START_S + (resident + extra) / MOVE_BANDWIDTH


def _pair_sizes(target: str, drafter: str, device, dtype, zerogpu) -> tuple[Size, Size | None, float]:
    """Both models' sizes, and a fresh worker's start with this pair."""
    t = model_size(target, device, dtype, zerogpu)
    d = model_size(drafter, device, dtype, zerogpu) if drafter else None
    return t, d, _start_seconds((target, drafter), (t, d), device, dtype, zerogpu)


def _loaded(name: str, device="auto", dtype="auto", revision: str | None = None) -> bool:
    try:
        return loading.is_loaded(name, device=device, dtype=dtype, revision=revision)
    except Exception:  # noqa: BLE001 - an unknown device or dtype: the handler says why
        return False


def _prompt_tokens(prompt, mode) -> int:
    return int(len(str(prompt or "")) / CHARS_PER_TOKEN) + 1 + (CHAT_TEMPLATE_TOKENS if mode == "chat" else 0)


def estimate_run(target, drafter, algorithm, prompt, lookahead, max_new_tokens, mode="raw", device="auto",
                 dtype="auto", zerogpu: bool | None = None) -> Estimate:
    """A Run's worst case: the worker's start, both prefills, ``max_new_tokens`` at one token per round."""
    target, drafter = _names(target, drafter)
    algorithm = algorithm if algorithm in ALGORITHMS else "slrs"
    drafter = drafter if algorithm != "ar" else ""  # the app loads no drafter for AR
    k = _number(lookahead, int, 5, 1, 16)
    n = _number(max_new_tokens, int, 96, 1, 1024)
    t, d, start = _pair_sizes(target, drafter, device, dtype, zerogpu)
    p = _prompt_tokens(prompt, mode)
    return Estimate({"worker start": start,
                     "prefill": prefill_seconds(t, p) + (prefill_seconds(d, p) if d else 0.0),
                     "tokens": n * token_seconds(algorithm, k, t, d)}, RUN_CAP_S)


def _algorithms(target: str, drafter: str, device, dtype, drafting_only=False) -> list[str]:
    """The algorithms a comparison or advice will run: the pair's usable ones when its Pair is built already
    (the app's pair check builds it), else every registered one; AR alone without a drafter."""
    if not drafter:
        return [] if drafting_only else ["ar"]
    names = list(ALGORITHMS)
    try:
        key = (loading.cache_key(target, None, device, dtype), loading.cache_key(drafter, None, device, dtype))
        pair = None if _ASSUME_FRESH else loading._PAIRS.get(key)  # noqa: SLF001 - looked up, never loaded
        if pair is not None:
            from .algorithms import usable_algorithms
            names = usable_algorithms(pair)
    except Exception:  # noqa: BLE001
        pass
    return [a for a in names if a != "ar"] if drafting_only else list(dict.fromkeys(["ar", *names]))


#: a Compare on ZeroGPU spends the visitor's quota: fewer repeats and a shorter time budget than
#: :func:`hsd.bench.run_each`'s defaults (3..9 repeats, 45 s), so the default comparison fits an unauthenticated
#: visitor's 2 minutes
ZEROGPU_COMPARE = {"min_repeats": 2, "max_repeats": 5, "budget_s": 10.0}


def compare_settings(zerogpu: bool | None = None) -> dict:
    """Keyword arguments for :func:`hsd.bench.run_each` in the app's Compare: :data:`ZEROGPU_COMPARE` on
    ZeroGPU, none (its defaults) elsewhere. :func:`compare_duration` assumes the same."""
    return dict(ZEROGPU_COMPARE) if _zerogpu(zerogpu) else {}


def _run_each_defaults() -> dict:
    from .bench import run_each
    return {k: v.default for k, v in inspect.signature(run_each).parameters.items()
            if v.default is not inspect.Parameter.empty}


def estimate_compare(target, drafter, prompt, lookahead, max_new_tokens, mode="raw", device="auto",
                     dtype="auto", zerogpu: bool | None = None) -> Estimate:
    """A Compare's worst case (:func:`hsd.bench.run_each` with its defaults): a warm-up of each algorithm,
    then sweeps of every algorithm until the spread settles, ``max_repeats`` sweeps, or ``budget_s`` seconds
    after at least ``min_repeats`` sweeps; the worst case is the longest of those stopping rules."""
    target, drafter = _names(target, drafter)
    k = _number(lookahead, int, 5, 1, 16)
    n = _number(max_new_tokens, int, 96, 1, 1024)
    t, d, start = _pair_sizes(target, drafter, device, dtype, zerogpu)
    p = _prompt_tokens(prompt, mode)
    cfg = {**_run_each_defaults(), **compare_settings(zerogpu)}
    names = _algorithms(target, drafter, device, dtype)
    prefill = prefill_seconds(t, p) + (prefill_seconds(d, p) if d else 0.0)
    per_token = sum(token_seconds(a, k, t, d) for a in names)
    sweep = len(names) * prefill + n * per_token
    warmup = len(names) * prefill + min(cfg["warmup_tokens"], n) * per_token
    repeats = max(cfg["min_repeats"] * sweep, min(cfg["max_repeats"] * sweep, cfg["budget_s"] + sweep))
    return Estimate({"worker start": start, "warm-up": warmup, "repeats": repeats}, COMPARE_CAP_S)


def estimate_advise(target, drafter, prompt, device="auto", dtype="auto", zerogpu: bool | None = None) -> Estimate:
    """The app's Advise (:func:`hsd.advise.advise_steps` at :data:`ADVISE_TOKENS`, :data:`ADVISE_LOOKAHEADS`
    and :data:`ADVISE_DRAFT_THRESHOLDS`): the forward costs (15 timed forwards of the target at each size up to
    2 x the largest lookahead + 2, and of the drafter), AR, then a warm-up and one calibration run per
    lookahead for each drafting algorithm, and one per draft threshold at the dynamic lookahead for each that
    takes one (its worst case: every draft as long as the lookahead)."""
    target, drafter = _names(target, drafter)
    t, d, start = _pair_sizes(target, drafter, device, dtype, zerogpu)
    p = _prompt_tokens(prompt, "raw")
    algorithms = _algorithms(target, drafter, device, dtype, drafting_only=True)
    dynamic = [a for a in algorithms if ALGORITHMS[a].dynamic_lookahead] if ADVISE_DRAFT_THRESHOLDS else []
    sizes = 2 * max(ADVISE_LOOKAHEADS + ((DYNAMIC_LOOKAHEAD,) if dynamic else ())) + 2
    costs = 16 * sum(forward_seconds(t, n) for n in range(1, sizes + 1)) + 3 * prefill_seconds(t, p)
    if d is not None:
        costs += 32 * forward_seconds(d) + 3 * prefill_seconds(d, p)
    prefill = prefill_seconds(t, p) + (prefill_seconds(d, p) if d else 0.0)
    ar = 2 * prefill + (16 + ADVISE_TOKENS) * token_seconds("ar", 1, t, None)
    calibration = sum(prefill * (1 + len(ADVISE_LOOKAHEADS)) + 16 * token_seconds(a, 5, t, d)
                      + sum(ADVISE_TOKENS * token_seconds(a, k, t, d) for k in ADVISE_LOOKAHEADS)
                      for a in algorithms)
    per_threshold = sum(prefill + ADVISE_TOKENS * token_seconds(a, DYNAMIC_LOOKAHEAD, t, d) for a in dynamic)
    return Estimate({"worker start": start, "forward costs": costs, "AR": ar, "calibration": calibration,
                     "dynamic lookahead": len(ADVISE_DRAFT_THRESHOLDS) * per_threshold}, ADVISE_CAP_S)


def _safe(estimate, fallback: int, *args) -> int:
    try:
        return estimate(*args).duration
    except Exception:  # noqa: BLE001 - a duration must never stop the call; the handler reports bad input
        log.exception("duration estimate failed; asking for %d s", fallback)
        return fallback


def run_duration(target, drafter, algorithm, form, device="auto", dtype="auto", show_rejected=True,
                 progress=None) -> int:
    """``@spaces.GPU`` duration of the app's ``run`` (same signature; ``form``: an :class:`hsd.forms.Form`):
    :func:`estimate_run` with a margin, at most :data:`RUN_CAP_S`.

    The default run (the embedded pair, SLEM, 96 new tokens, lookahead 5, the ZeroGPU presets resident) asks
    for 21 s, checked against the quota as 32 s on today's hardware (duration x 1.5) and charged the GPU time
    it holds, at most that: a day's quota allows at least 3 default runs unauthenticated (2 min), 9 with a
    free account (5 min), 75 with PRO or Team (40 min) and 112 with Enterprise (60 min). Runs and
    comparisons share the quota. :func:`quota_table` computes these numbers; a test keeps them here.
    """
    return _safe(estimate_run, RUN_CAP_S, target, drafter, algorithm, form.prompt, form.lookahead,
                 form.max_new_tokens, form.mode, device, dtype)


def compare_duration(target, drafter, form, device="auto", dtype="auto", progress=None) -> int:
    """``@spaces.GPU`` duration of the app's ``compare`` (same signature): :func:`estimate_compare` with a
    margin, at most :data:`COMPARE_CAP_S`.

    The default comparison (the embedded pair: AR, SLEM, TLI and SLRS, 96 new tokens, lookahead 5, with
    :func:`compare_settings`) asks for 67 s, checked as 100 s: at least 1 a day unauthenticated, 3 with a free
    account, 24 with PRO or Team and 36 with Enterprise (:func:`quota_table`).
    """
    return _safe(estimate_compare, COMPARE_CAP_S, target, drafter, form.prompt, form.lookahead, form.max_new_tokens,
                 form.mode, device, dtype)


def drafters_duration(target, drafter_names, algorithm, num_prompts, form, device="auto", dtype="auto",
                      progress=None) -> int:
    """``@spaces.GPU`` duration of the app's drafter comparison (same signature): one comparison's estimate
    (:func:`estimate_compare`, all of the pair's algorithms, for ``best``) per drafter and prompt, at most
    :data:`COMPARE_CAP_S`. It rarely fits an unauthenticated visitor's quota: the Drafters tab is for
    logged-in visitors and dedicated hardware."""
    names = [line.strip() for line in str(drafter_names or "").splitlines() if line.strip()]
    try:
        prompts = max(1, int(num_prompts))
    except (TypeError, ValueError):
        prompts = 1
    total = sum(_safe(estimate_compare, COMPARE_CAP_S, target, name, "x" * 200, form.lookahead, form.max_new_tokens,
                      "raw", device, dtype) for name in names[:8])
    return int(min(COMPARE_CAP_S, max(total * prompts, 10)))


def advise_duration(target, drafter, form, device="auto", dtype="auto") -> int:
    """``@spaces.GPU`` duration of the app's ``advise_live`` (same signature): :func:`estimate_advise` with a
    margin, at most :data:`ADVISE_CAP_S`."""
    return _safe(estimate_advise, ADVISE_CAP_S, target, drafter, form.prompt, device, dtype)


#: the app's default request (its form's initial values), which the quota sentences above are computed for
DEFAULT_REQUEST = dict(target=loading.EMBEDDED["tiny-code"][0], drafter=loading.EMBEDDED["tiny-code"][1],
                       algorithm="slem",
                       prompt="def fibonacci(n):", temperature=0, top_k=0, top_p=1.0, lookahead=5,
                       max_new_tokens=96, seed=0, mode="raw", device="auto", dtype="auto")


def quota_table(factor: float = DURATION_FACTOR) -> dict[str, dict[str, int]]:
    """How many default runs and default comparisons each tier's daily quota allows at least (each call is
    admitted while the quota left covers its requested duration and is charged at most that), from the
    durations of :data:`DEFAULT_REQUEST` with the ZeroGPU presets resident."""
    global _ASSUME_FRESH
    r = DEFAULT_REQUEST
    _ASSUME_FRESH = True  # the numbers of a started Space, not of whatever this process has loaded
    try:
        run = estimate_run(r["target"], r["drafter"], r["algorithm"], r["prompt"], r["lookahead"],
                           r["max_new_tokens"], zerogpu=True)
        cmp = estimate_compare(r["target"], r["drafter"], r["prompt"], r["lookahead"], r["max_new_tokens"],
                               zerogpu=True)
    finally:
        _ASSUME_FRESH = False
    return {tier: {"runs": quota // max(1, run.requested(factor)), "compares": quota // max(1, cmp.requested(factor)),
                   "run_s": run.duration, "compare_s": cmp.duration}
            for tier, quota in QUOTAS.items()}


# ----------------------------------------------------------------------------- the decorator

def _emulated(fn):
    """``fn`` with its body under :func:`hsd.emulation.on_this_thread`: a no-op in a real GPU worker (``spaces``
    has removed its emulation there) and off ZeroGPU; where the body runs in an emulating process (the
    rehearsal's GPU worker, which has no GPU to switch to), its models compute through the emulation."""
    if inspect.isgeneratorfunction(fn):
        @functools.wraps(fn)
        def body(*args, **kwargs):
            with emulation.on_this_thread():
                yield from fn(*args, **kwargs)
    else:
        @functools.wraps(fn)
        def body(*args, **kwargs):
            with emulation.on_this_thread():
                return fn(*args, **kwargs)
    return body


def gpu(duration, *, on_error=None):
    """``@spaces.GPU(duration=duration)`` where the ``spaces`` package imports (it is itself the identity off
    ZeroGPU), the identity where it does not.

    ``on_error(sentence) -> output``: ZeroGPU's own failures, which the ``spaces`` wrapper raises around the
    handler (before it runs, for a quota or a queue; after, for an aborted task) and so past the handler's own
    ``try``, are caught outside the wrapper and become that output (yielded, for a generator handler), with
    the sentence from :func:`explain_gpu_error`; any other exception propagates."""
    def decorate(fn):
        spaces = _spaces()
        inner = spaces.GPU(duration=duration)(_emulated(fn)) if spaces is not None else fn
        if on_error is None:
            return inner
        if inspect.isgeneratorfunction(fn):
            @functools.wraps(fn)
            def guarded(*args, **kwargs):
                try:
                    yield from inner(*args, **kwargs)
                except Exception as exc:
                    sentence = explain_gpu_error(exc)
                    if sentence is None:
                        raise
                    log.warning("ZeroGPU refused or ended %s: %s", fn.__name__, _message(exc))
                    yield on_error(sentence)
        else:
            @functools.wraps(fn)
            def guarded(*args, **kwargs):
                try:
                    return inner(*args, **kwargs)
                except Exception as exc:
                    sentence = explain_gpu_error(exc)
                    if sentence is None:
                        raise
                    log.warning("ZeroGPU refused or ended %s: %s", fn.__name__, _message(exc))
                    return on_error(sentence)
        guarded.zerogpu_duration = duration
        return guarded
    return decorate


# ----------------------------------------------------------------------------- ZeroGPU's failures

#: the CPU Space to send visitors to when ZeroGPU cannot serve them (``HSD_CPU_SPACE``, e.g. someone/hsd-cpu)
CPU_SPACE_ENV = "HSD_CPU_SPACE"


def _cpu_space() -> str:
    space = os.environ.get(CPU_SPACE_ENV, "").strip()
    if space:
        return f"the CPU Space (https://huggingface.co/spaces/{space}), which has no quota"
    return "the app on a CPU (`python app.py` from the repository)"


def _is_gradio_error(exc: BaseException) -> bool:
    """``gr.Error`` (``spaces`` raises ZeroGPU's failures as one, or as its subclass ``HTMLError``), recognised
    without importing gradio: by the class, where gradio is imported, else by the class's module."""
    gradio = sys.modules.get("gradio")
    error = getattr(gradio, "Error", None) if gradio is not None else None
    if isinstance(error, type) and isinstance(exc, error):
        return True
    return any(c.__name__ == "Error" and c.__module__.split(".")[0] == "gradio" for c in type(exc).__mro__)


def _message(exc: BaseException) -> str:
    return str(getattr(exc, "message", None) or exc)


@dataclass(frozen=True)
class GpuFailure:
    """A ZeroGPU failure, classified: ``kind`` and what its message says."""

    kind: str  # quota, runs-limit, space-limit, duration, aborted, no-gpu, credits, session, worker
    requested: int | None = None
    left: int | None = None
    wait: str | None = None
    tier: str | None = None  # unauthenticated, free, pro (quota only)
    detail: str = ""


#: ``spaces`` (0.51, spaces/zero/client.py and wrappers.py) raises ZeroGPU's failures as ``gr.Error`` with
#: one of these titles: the title is the structured field, the class being the same for all of them
TITLES = {"ZeroGPU quota exceeded": "quota", "ZeroGPU illegal duration": "duration", "ZeroGPU worker error": "worker",
          "ZeroGPU queue timeout": "no-gpu", "ZeroGPU client error": "client",
          "ZeroGPU pending credits exceeded": "credits"}
_REQUESTED = re.compile(r"\((\d+)s requested vs\. (\d+)s left\)")
#: the messages ``spaces`` 0.51 writes, most specific first: (kind, pattern)
PATTERNS = (
    ("no-gpu", re.compile(r"No GPU was available")),
    ("aborted", re.compile(r"GPU task aborted")),
    ("runs-limit", re.compile(r"exceeded your ZeroGPU runs limit")),
    ("space-limit", re.compile(r"reached its GPU limit")),
    ("credits", re.compile(r"ZeroGPU credits allocated to running tasks")),
    ("duration", re.compile(r"requested GPU duration \(\d+s\) is larger than the maximum")),
    ("quota", re.compile(r"exceeded your (?:\w+ )?ZeroGPU quota|\(\d+s requested vs\. \d+s left\)")),
    ("session", re.compile(r"Expired ZeroGPU proxy token")),
)
_DURATION = re.compile(r"requested GPU duration \((\d+)s\)")
_WAIT = re.compile(r"Try again in ([\d:]+)")


def classify_gpu_error(exc: BaseException) -> GpuFailure | None:
    """Which ZeroGPU failure ``exc`` is, or ``None`` if it is not one of ZeroGPU's.

    By type first: ZeroGPU's failures are ``gr.Error``s whose ``title`` starts with "ZeroGPU" (:data:`TITLES`).
    The title leaves some cases together (a quota exceeded, the daily runs limit, a Space's limit for requests
    without a visitor token and, without a token, no GPU after 60 s all carry "ZeroGPU quota exceeded"); within
    a title they are told apart by the message text ``spaces`` writes (:data:`PATTERNS`). Message patterns
    alone are the fallback for a ``gr.Error`` without a ZeroGPU title (a gradio without ``title``), and for the
    one failure ``spaces`` raises as a plain ``RuntimeError`` (the visitor left while queueing)."""
    message = _message(exc)
    if not _is_gradio_error(exc):
        if isinstance(exc, RuntimeError) and "closed by visitor" in message:
            return GpuFailure("left", detail=message)
        return None
    title = str(getattr(exc, "title", "") or "")
    kind = TITLES.get(title, "client" if title.startswith("ZeroGPU") else None)
    found = next((k for k, pattern in PATTERNS if pattern.search(message)), None)
    if kind is None and found is None:
        return None  # a gr.Error of the app's own
    kind = found or kind
    if kind == "quota":
        m = _REQUESTED.search(message)
        tier = "pro" if "Pro ZeroGPU" in message else "free" if "free ZeroGPU" in message else "unauthenticated"
        return GpuFailure("quota", requested=int(m.group(1)) if m else None, left=int(m.group(2)) if m else None,
                          wait=_group(_WAIT, message), tier=tier, detail=message)
    if kind == "duration":
        return GpuFailure("duration", requested=int(_group(_DURATION, message) or 0) or None, detail=message)
    return GpuFailure(kind, wait=_group(_WAIT, message), detail=message)


def _group(pattern: re.Pattern, text: str) -> str | None:
    m = pattern.search(text)
    return m.group(1) if m else None


def explain_gpu_error(exc: BaseException) -> str | None:
    """ZeroGPU's own failure as one plain sentence that says what to do (for the status line), or ``None`` if
    ``exc`` is not one of ZeroGPU's (:func:`classify_gpu_error`)."""
    f = classify_gpu_error(exc)
    if f is None:
        return None
    cpu = _cpu_space()
    if f.kind == "quota":
        numbers = (f" (this request needs {f.requested} s of GPU time and {f.left} s are left)"
                   if f.requested is not None else "")
        more = {"unauthenticated": "log in to Hugging Face for more (5 min a day free, 40 min with PRO)",
                "free": "get PRO for 40 min a day",
                "pro": "add credits ($1 per 10 min of GPU)"}[f.tier or "unauthenticated"]
        steps = ["lower max new tokens so the request fits"] if f.left is None or f.left > 0 else []
        steps += [more, f"wait until it resets in {f.wait}" if f.wait and f.wait.strip("0:") else
                  "wait until it resets", f"use {cpu}"]
        return f"Your daily ZeroGPU quota is used up{numbers}: {', '.join(steps[:-1])}, or {steps[-1]}."
    if f.kind == "runs-limit":
        return (f"You have reached ZeroGPU's daily limit on runs: wait until your quota resets"
                f"{f' in {f.wait}' if f.wait else ''}, or use {cpu}.")
    if f.kind == "space-limit":
        return ("This Space has used up ZeroGPU's quota for requests that carry no Hugging Face identity (API "
                "calls without a token): use the web page, log in or pass a token (gradio_client's hf_token), "
                f"or use {cpu}.")
    if f.kind == "duration":
        asked = f" ({f.requested} s)" if f.requested else ""
        return (f"This request needs more GPU time{asked} than one ZeroGPU call may take: lower max new tokens, "
                f"compare or advise on a smaller pair, or use {cpu}.")
    if f.kind == "aborted":
        return ("ZeroGPU aborted the GPU task before it finished (it ran past its requested time, or the GPU "
                "worker stopped): press the button again, with fewer max new tokens if it happens again.")
    if f.kind == "no-gpu":
        return ("No ZeroGPU GPU became free in time (the GPUs are busy): try again in a minute; logged-in "
                f"visitors wait in a faster queue, PRO in the fastest; or use {cpu}.")
    if f.kind == "credits":
        return "Too much of your ZeroGPU credit is held by tasks still running: try again when they have finished."
    if f.kind == "session":
        return "ZeroGPU's session for this page expired: reload the page and try again."
    if f.kind == "left":
        return "The page disconnected while waiting for a GPU: reload it and try again."
    if f.kind == "worker":
        return (f"The ZeroGPU worker failed ({f.detail}): press the button again; if it keeps failing, lower max "
                f"new tokens or use {cpu}.")
    return f"ZeroGPU could not run the task ({f.detail}): reload the page and try again, or use {cpu}."


# ----------------------------------------------------------------------------- loading outside the GPU

def missing_models(target, drafter, device="auto", dtype="auto") -> list[str]:
    """The models of a pair (names as a form holds them) that are not loaded yet: what must be loaded, in the
    main process, before a GPU function runs. ``[]`` when the whole pair is in the cache."""
    out = []
    for given in (target, drafter):  # owner/name@revision pins a revision (planning.split_revision)
        name, revision = planning.split_revision(given)
        name = planning.resolve_name(name)
        if name and not _loaded(name, device, dtype, revision):
            out.append(f"{name}@{revision}" if revision else name)
    return out


def pair_loaded(target, drafter, device="auto", dtype="auto") -> bool:
    """Whether the whole pair is loaded already (a GPU function would then load nothing)."""
    return not missing_models(target, drafter, device, dtype)


def make_room(target: str, drafter: str, device="auto", dtype="auto") -> int:
    """On ZeroGPU: keep the weights on (emulated) cuda within :data:`WEIGHTS_BUDGET`, since a fresh worker copies
    all of them to its 48 GB GPU. Refuses a pair that alone exceeds it; evicts the other cached models when the
    pair would not fit beside them. Returns how many were evicted. Names are resolved ones."""
    need = {name: model_size(name, device, dtype) for name in (target, drafter)
            if name and not _loaded(name, device, dtype)}
    new = sum(s.params * s.width for s in need.values())
    if not new:
        return 0
    total = sum(model_size(n, device, dtype).params * model_size(n, device, dtype).width
                for n in dict.fromkeys((target, drafter)) if n)
    if total > WEIGHTS_BUDGET:
        raise ResourceLimitError(
            f"This pair needs about {total / 1e9:.0f} GB of weights, more than a ZeroGPU call's "
            f"{GPU_BYTES / 1e9:.0f} GB GPU holds with room to run ({WEIGHTS_BUDGET / 1e9:.0f} GB): choose a smaller "
            "pair, or run it on a dedicated GPU.")
    if resident_bytes() + new <= WEIGHTS_BUDGET:
        return 0
    keep = tuple(loading.cache_key(n, None, device, dtype) for n in (target, drafter) if n and _loaded(n, device, dtype))
    evicted = loading.release_models(keep=keep)
    log.info("evicted %d cached model(s) to keep ZeroGPU's weights within %.0f GB", evicted, WEIGHTS_BUDGET / 1e9)
    return evicted


def load_steps(target, drafter, device="auto", dtype="auto"):
    """Load a pair (names as a form holds them) in the main process, outside any GPU function: yields status
    lines, then the :class:`~hsd.loading.Pair`. A loaded pair yields at once. On ZeroGPU the weights go to the
    emulated cuda (host memory) and :func:`make_room` keeps them within the budget; a download shows in a
    ``gr.Progress(track_tqdm=True)`` of the calling handler, since huggingface_hub reports through tqdm."""
    missing = missing_models(target, drafter, device, dtype)
    if missing:
        plan = planning.plan_named(target, drafter, device, dtype)  # refuses a pair that cannot fit, before any download
        if on_zerogpu():
            evicted = make_room(*(planning.resolve_name(planning.split_revision(n)[0]) for n in (target, drafter)),
                                device, dtype)
            if evicted:
                plan += f"\n- evicted {evicted} cached model{'s' * (evicted > 1)} to stay within ZeroGPU's memory"
            moved = sum(model_size(planning.split_revision(m)[0], device, dtype).params
                        * model_size(planning.split_revision(m)[0], device, dtype).width for m in missing)
            plan += (f"\n- the next GPU call copies these ≈{moved / 1e9:.1f} GB onto its GPU (≈{moved / MOVE_BANDWIDTH:.0f} s,"
                     " within the GPU time it asks for; a GPU worker started before this load reads them from disk instead)")
        names = ", ".join(f"`{m}`" for m in missing)
        hub = [m for m in missing if not Path(planning.split_revision(m)[0]).expanduser().is_dir()]
        if hub and not loading.offline():
            yield (f"{marks.BUSY} Downloading {', '.join(f'`{m}`' for m in hub)} (first time only; progress below; other "
                   f"visitors keep running meanwhile)…\n{plan}")
            for m in hub:
                loading.prefetch(*planning.split_revision(m))
        yield f"{marks.BUSY} Loading {names} into memory, outside the GPU queue (first time only)…\n{plan}"
    yield planning.load_named_pair(target, drafter, device, dtype)


_FORK_HOOK: list = []


def fork_safe_locks() -> None:
    """Give a forked process fresh copies of hsd's loading locks (once per process; ``preload`` does it on
    ZeroGPU). ``spaces`` forks its GPU worker from the main process, where another visitor's model may be
    loading on another thread at that moment: the worker would inherit that thread's lock held, with no thread
    to release it, and hang on its first look at the cache."""
    if _FORK_HOOK or not hasattr(os, "register_at_fork"):
        return

    def fresh():
        loading._LOCK = threading.RLock()  # noqa: SLF001
        planning._LOAD_LOCK = threading.Lock()  # noqa: SLF001
        planning._DEVICE_LOCKS.clear()  # noqa: SLF001

    os.register_at_fork(after_in_child=fresh)
    _FORK_HOOK.append(fresh)


def preload_device() -> str:
    """Where :func:`preload` places the presets: ``cuda`` on ZeroGPU (emulated in the main process, as ZeroGPU
    expects), ``auto`` elsewhere."""
    return "cuda" if on_zerogpu() else "auto"


def preload(presets: dict[str, tuple[str, str]] | None = None, *, device: str | None = None, dtype: str = "auto",
            log_to: logging.Logger | None = None) -> list[str]:
    """Load presets (label -> (target, drafter); default :func:`hsd.catalogue.startup_pairs`) at start-up, in the
    main process, through :mod:`hsd.planning` and :mod:`hsd.loading`'s cache, onto ``device`` (default
    :func:`preload_device`: ``cuda`` on ZeroGPU, which ``spaces`` emulates outside GPU functions, so ``spaces``
    is imported first). The cache's cap is raised to hold them all and one more pair. A preset that
    fails (not downloadable, too large for this machine) is logged and skipped; returns the labels loaded."""
    out = log_to or log
    presets = catalogue.startup_pairs(on_zerogpu()) if presets is None else dict(presets)
    device = device or preload_device()
    if on_zerogpu():
        _spaces()  # its CUDA emulation must be in place before anything is placed on cuda
        fork_safe_locks()
    models = {planning.resolve_name(n) for pair in presets.values() for n in pair if n}
    if loading.MAX_CACHED_MODELS < len(models) + 2:
        out.info("raising the model cache from %d to %d models to hold the presets", loading.MAX_CACHED_MODELS,
                 len(models) + 2)
        loading.MAX_CACHED_MODELS = len(models) + 2
    loaded = []
    for label, (target, drafter) in presets.items():
        try:
            planning.plan_named(target, drafter, device, dtype)  # refuses what does not fit this machine
            if on_zerogpu():
                t, d = planning.resolve_name(target), planning.resolve_name(drafter)
                need = sum(model_size(n, device, dtype).params * model_size(n, device, dtype).width
                           for n in (t, d) if n and not _loaded(n, device, dtype))
                if resident_bytes() + need > WEIGHTS_BUDGET:
                    raise ResourceLimitError(f"it would take the resident weights past {WEIGHTS_BUDGET / 1e9:.0f} GB")
            planning.load_named_pair(target, drafter, device, dtype)
            loaded.append(label)
            out.info("preloaded %s on %s", label, device)
        except Exception as exc:  # noqa: BLE001 - the app starts anyway; a run of this pair will say why
            out.warning("could not preload %s: %s: %s", label, type(exc).__name__, str(exc).splitlines()[0][:300])
    return loaded
