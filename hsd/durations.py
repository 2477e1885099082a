"""How long a ZeroGPU call asks for: the models' sizes, a model of seconds per forward on the ZeroGPU slice, and
the ``@spaces.GPU`` duration of each of the app's handlers (:func:`run_duration`, :func:`compare_duration`,
:func:`drafters_duration`, :func:`advise_duration`), each with its handler's signature, as
``spaces.GPU(duration=callable)`` calls it with the handler's arguments: the tokens, rounds and algorithms the
request asks for, plus the worker's start (which copies every preloaded tensor to the GPU), capped.
"""

from __future__ import annotations

import functools
import inspect
import json
import logging
import math
from dataclasses import dataclass, field
from pathlib import Path

from . import emulation, loading, planning
from .advise import DRAFT_THRESHOLDS, DYNAMIC_LOOKAHEAD
from .algorithms import ALGORITHMS
from .catalogue import HUB_MODELS, preload_hub_ids
from .emulation import on_zerogpu
from .errors import HsdError

log = logging.getLogger("hsd.durations")

# ----------------------------------------------------------------------------- the slice

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
                and name not in counted and (_ASSUME_FRESH or not is_loaded(name, device, dtype)))
    if _zerogpu(zerogpu) and resident + extra > WEIGHTS_BUDGET:  # make_room evicts the others first
        resident, extra = 0, sum(s.params * s.width for name, s in zip(names, sizes) if s is not None and name)
    return WORKER_START_S + (resident + extra) / MOVE_BANDWIDTH


def _pair_sizes(target: str, drafter: str, device, dtype, zerogpu) -> tuple[Size, Size | None, float]:
    """Both models' sizes, and a fresh worker's start with this pair."""
    t = model_size(target, device, dtype, zerogpu)
    d = model_size(drafter, device, dtype, zerogpu) if drafter else None
    return t, d, _start_seconds((target, drafter), (t, d), device, dtype, zerogpu)


def is_loaded(name: str, device="auto", dtype="auto", revision: str | None = None) -> bool:
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
