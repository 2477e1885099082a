"""ZeroGPU: run the app on a Hugging Face Space the way ZeroGPU expects (hub docs ``spaces-zerogpu.md``, 2026).

On ZeroGPU (``SPACES_ZERO_GPU`` set) a GPU is attached only while a function decorated with
``@spaces.GPU`` runs, in a worker process forked from the app's main process. Outside such a function
``spaces`` emulates CUDA: a model moved to ``cuda`` at start-up stays in host memory until each fresh worker
copies *every* tensor so placed onto its GPU. Hence:

* **Presets are loaded at start-up, in the main process** (:func:`preload`), never lazily inside a GPU
  function; a model a visitor types in is loaded the same way before the GPU function is called
  (:func:`missing_models`, :func:`load_steps`), so only generation runs on the GPU.
* **Durations are computed from the request** (:mod:`hsd.durations`): a small model of seconds per forward on
  the ZeroGPU slice, summed over what the request asks for.
* **ZeroGPU's own failures** (quota exceeded, task aborted, no GPU available, duration too long) are raised by
  the ``spaces`` wrapper around the handler, before or after the handler's own ``try``; :func:`gpu` with
  ``on_error`` catches them outside and :func:`hsd.refusals.explain_gpu_error` turns each into a sentence that
  says what to do.

Neither ``spaces`` nor ``gradio`` is imported by this module: ``spaces`` is imported when :func:`gpu` or
:func:`preload` needs it (elsewhere the decorator is the identity), gradio's error type is only recognised.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import logging
import os
import threading
from pathlib import Path

from . import catalogue, emulation, loading, marks, planning
from .durations import GPU_BYTES, MOVE_BANDWIDTH, WEIGHTS_BUDGET, is_loaded, model_size, resident_bytes
from .emulation import on_zerogpu
from .errors import ResourceLimitError
from .refusals import error_message, explain_gpu_error

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
                    log.warning("ZeroGPU refused or ended %s: %s", fn.__name__, error_message(exc))
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
                    log.warning("ZeroGPU refused or ended %s: %s", fn.__name__, error_message(exc))
                    return on_error(sentence)
        guarded.zerogpu_duration = duration
        return guarded
    return decorate


# ----------------------------------------------------------------------------- loading outside the GPU

def missing_models(target, drafter, device="auto", dtype="auto") -> list[str]:
    """The models of a pair (names as a form holds them) that are not loaded yet: what must be loaded, in the
    main process, before a GPU function runs. ``[]`` when the whole pair is in the cache."""
    out = []
    for given in (target, drafter):  # owner/name@revision pins a revision (planning.split_revision)
        name, revision = planning.split_revision(given)
        name = planning.resolve_name(name)
        if name and not is_loaded(name, device, dtype, revision):
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
            if name and not is_loaded(name, device, dtype)}
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
    keep = tuple(loading.cache_key(n, None, device, dtype) for n in (target, drafter) if n and is_loaded(n, device, dtype))
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
                           for n in (t, d) if n and not is_loaded(n, device, dtype))
                if resident_bytes() + need > WEIGHTS_BUDGET:
                    raise ResourceLimitError(f"it would take the resident weights past {WEIGHTS_BUDGET / 1e9:.0f} GB")
            planning.load_named_pair(target, drafter, device, dtype)
            loaded.append(label)
            out.info("preloaded %s on %s", label, device)
        except Exception as exc:  # noqa: BLE001 - the app starts anyway; a run of this pair will say why
            out.warning("could not preload %s: %s: %s", label, type(exc).__name__, str(exc).splitlines()[0][:300])
    return loaded
