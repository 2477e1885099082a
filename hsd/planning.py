"""Before loading: what a target and a drafter name, how large they are, and whether they fit.

Interactive front ends (the app) name models by Hub id, local directory, or a path relative to the
repository (the embedded pair); :func:`resolve_name` checks the name without touching the network,
:func:`plan_load` says what will be loaded from the Hub's metadata and refuses a pair that cannot fit in
the device's free memory, before anything is downloaded; when cached models are what is in the way, it evicts
them from :mod:`hsd.loading`'s cache first and refuses only if the pair still does not fit.
"""

from __future__ import annotations

import re
import threading
from contextlib import contextmanager
from pathlib import Path

import torch
from huggingface_hub import errors as hub_errors

from . import emulation, policy
from .catalogue import HUB_MODELS
from .errors import HsdError, InvalidSettingError, ModelNotFoundError, RemoteCodeError, ResourceLimitError
from .loading import (cache_key, embedded_path, is_loaded, load_pair, offline, release_models, resolve_device,
                      resolve_dtype)
from .layout import planned_copy_bytes
from .machine import device_name
from .policy import is_public

HUB_ID = re.compile(r"^[\w.-]+(/[\w.-]+)?$")


def resolve_name(name: str | None, public: bool | None = None) -> str:
    """A model name as :func:`hsd.load_pair` takes it: ``assets/...`` names the embedded pair wherever hsd is
    installed; anything else must be a Hub id (owner/name) or an existing directory. ``""`` stays ``""``.

    In a public app (``public``, or :func:`hsd.policy.is_public` when ``None``) a directory must lie under the
    operator's allow-list, and a path outside it is refused the same way whether it exists or not."""
    name = (name or "").strip()
    embedded = embedded_path(name)
    if is_public(public):
        return policy.check_name(name, str(embedded) if embedded is not None else None)
    if embedded is not None:
        return str(embedded)
    if name and not policy.is_dir(name) and not HUB_ID.match(name):
        hint = (" The embedded pair is made by scripts/train_pair.py (see docs/embedded-pair.md)."
                if "tiny-code" in name else "")
        raise ModelNotFoundError(f"{name!r} is neither a local model directory nor a Hub id (owner/name).{hint}")
    return name


def available_bytes(device: torch.device) -> int | None:
    """Free memory on ``device`` (a GPU's free memory, or the host's available memory); ``None`` if unknown."""
    try:
        if device.type == "cuda":
            return torch.cuda.mem_get_info(device)[0]
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, RuntimeError):  # RuntimeError: CUDA not usable here (ZeroGPU outside a GPU call)
        pass
    return None


def hub_params(name: str, revision: str | None = None) -> tuple[int | None, str]:
    """Parameter count from the Hub's safetensors metadata (at ``revision``), and a note; never raises."""
    if Path(name).is_dir():
        size = sum(p.stat().st_size for p in Path(name).glob("*.safetensors"))
        return None, f"local directory, {size / 1e6:.1f} MB of weights"
    if offline():
        return None, "Hub offline (HF_HUB_OFFLINE or TRANSFORMERS_OFFLINE): will use the local Hugging Face cache"
    try:
        from huggingface_hub import model_info

        info = model_info(name, revision=revision, timeout=6)
    except hub_errors.GatedRepoError:  # a subclass of RepositoryNotFoundError: first
        return None, "gated: needs an accepted licence and HF_TOKEN"
    except hub_errors.RevisionNotFoundError:
        return None, f"no revision {revision!r} on the Hub"
    except hub_errors.RepositoryNotFoundError:
        return None, "not found on the Hub (or private: log in)"
    except Exception as exc:  # noqa: BLE001 - unreachable Hub, a refused token, rate limits...
        status = getattr(getattr(exc, "response", None), "status_code", None)
        if status in (401, 403):
            return None, f"the Hub refused the access token ({status}): check HF_TOKEN"
        return None, f"Hub not reachable ({type(exc).__name__}): will try the local Hugging Face cache"
    params = getattr(getattr(info, "safetensors", None), "total", None)
    gated = " · gated: needs an accepted licence and HF_TOKEN" if getattr(info, "gated", False) else ""
    return params, (f"{params / 1e9:.2f} B parameters" if params else "parameter count unknown") + gated


def pair_bytes(params: tuple[float, ...], device: str = "auto", dtype: str = "auto") -> tuple[float, int | None]:
    """Bytes that models of these parameter counts take once loaded on ``device`` (the weights, and on the CPU the
    copies hsd/layout.py makes), and the bytes free there (``None`` if unknown): what :func:`plan_load` compares."""
    dev = resolve_device(device)
    torch_dtype = resolve_dtype(dtype, dev)
    width = torch.finfo(torch_dtype).bits // 8
    return sum(p * width + planned_copy_bytes(p * width, dev, torch_dtype) for p in params), available_bytes(dev)


def memory_note(target: str, drafter: str, device: str = "auto", dtype: str = "auto") -> str:
    """On a CPU (a laptop, a CPU Space): whether a catalogued Hub pair fits this machine's free memory, from
    :data:`hsd.catalogue.HUB_MODELS`' sizes, as :func:`plan_load` will judge it before any download; ``""`` on a
    GPU (ZeroGPU sizes its pairs in :mod:`hsd.zerogpu`), for a model not catalogued, or where the memory is
    unknown."""
    try:
        if resolve_device(device).type != "cpu":
            return ""
        need, free = pair_bytes(tuple(HUB_MODELS[n].params for n in (target, drafter) if n), device, dtype)
    except Exception:  # noqa: BLE001 - a note: no note rather than a wrong one
        return ""
    if not free:
        return ""
    if need <= 0.9 * free:
        return f"Fits this machine: about {need / 1e9:.1f} GB on the CPU, {free / 1e9:.1f} GB free."
    return (f"**Too large for this machine**: about {need / 1e9:.1f} GB on the CPU, {free / 1e9:.1f} GB free; a run "
            "is refused before anything downloads. Pick an embedded pair or the CPU classroom pair.")


def plan_load(target: str, drafter: str, device: str = "auto", dtype: str = "auto", *,
              target_revision: str | None = None, drafter_revision: str | None = None) -> str:
    """What will be loaded (from the Hub's metadata when reachable), as Markdown; refuses what cannot fit.

    ``target`` and ``drafter`` are resolved names (:func:`resolve_name`); a model already in
    :mod:`hsd.loading`'s cache is neither looked up nor counted again. If the pair does not fit the free
    memory, the other cached models are evicted first; only a pair that still does not fit is refused.
    """
    dev = resolve_device(device)
    torch_dtype = resolve_dtype(dtype, dev)
    width = torch.finfo(torch_dtype).bits // 8
    lines, total, keep = [], 0, []
    for role, name, revision in (("target", target, target_revision), ("drafter", drafter, drafter_revision)):
        if not name:
            continue
        keep.append(cache_key(name, revision, device, dtype, what=f"{role}_revision"))
        if is_loaded(name, device=device, dtype=dtype, revision=revision):
            lines.append(f"- **{role}** `{name}`: already loaded")
            continue
        params, note = hub_params(name, revision) if revision else hub_params(name)  # unpinned: the call as before
        if not params and name in HUB_MODELS and not revision:  # a catalogued model is refused offline too
            params, note = HUB_MODELS[name].params, f"{note}; {HUB_MODELS[name].params / 1e9:.2f} B parameters (hsd's catalogue)"
        if params:
            copies = planned_copy_bytes(params * width, dev, torch_dtype)  # hsd/layout.py: dual on the CPU
            total += params * width + copies
            note += f", ≈{params * width / 1e9:.1f} GB in {str(torch_dtype).replace('torch.', '')}"
            note += f" (+{copies / 1e9:.1f} GB of column-major copies for the CPU)" if copies else ""
        lines.append(f"- **{role}** `{name}`{f' @ `{revision}`' if revision else ''}: {note}")
    free = available_bytes(dev)
    if free and total > 0.9 * free:
        evicted = release_models(keep=tuple(keep))  # models of other pairs are what stands in the way
        if evicted:
            lines.append(f"- evicted {evicted} cached model{'s' * (evicted > 1)} to make room")
            free = available_bytes(dev)
    if free and total > 0.9 * free:
        raise ResourceLimitError(
            f"These models need about {total / 1e9:.1f} GB but {dev.type} has {free / 1e9:.1f} GB free: choose a "
            "smaller pair, dtype bfloat16, or a machine with more memory.")
    return "\n".join(lines + [f"- device: {device_name(dev)}"])


def loadable_offline(target: str, drafter: str, device: str = "auto", dtype: str = "auto") -> bool:
    """Whether loading this pair (names from :func:`resolve_name`) downloads nothing: the target and any drafter
    are local directories or already loaded. A front end checks such a pair as soon as it is chosen."""
    def local(name: str) -> bool:
        try:
            return Path(name).expanduser().is_dir() or is_loaded(name, device=device, dtype=dtype)
        except Exception:  # noqa: BLE001 - an unknown device or dtype: the load itself will say why
            return False

    return bool(target) and local(target) and (not drafter or local(drafter))


def split_revision(name: str | None) -> tuple[str, str | None]:
    """A form's ``owner/name@revision`` as ``(owner/name, revision)`` (a branch, tag or commit, pinned as
    ``load_pair(..., target_revision=...)`` pins it); a name without ``@``, or an existing directory whose name
    holds one, has no revision."""
    name = (name or "").strip()
    if "@" not in name or policy.is_dir(name):
        return name, None
    base, revision = name.rsplit("@", 1)
    if not base.strip() or not revision.strip():
        raise InvalidSettingError(f"{name!r}: write a pinned model as owner/name@revision (a branch, tag or commit), "
                                  "or leave out the @ for the default branch.")
    return base.strip(), revision.strip()


def loadable_named(target: str, drafter: str, device: str = "auto", dtype: str = "auto", *,
                   public: bool | None = None) -> bool:
    """:func:`loadable_offline` for names as a form holds them; ``False`` for a name :func:`resolve_name` refuses
    (the load, or :func:`plan_named`, then says why), so a handler can call it unguarded."""
    try:
        (target, t_rev), (drafter, d_rev) = split_revision(target), split_revision(drafter)
        return not (t_rev or d_rev) and loadable_offline(resolve_name(target, public), resolve_name(drafter, public),
                                                         device, dtype)
    except HsdError:
        return False


_LOAD_LOCK = threading.Lock()
_DEVICE_LOCKS: dict[str, threading.Lock] = {}
LOCK_TIMEOUT_S = 600


def plan_named(target: str, drafter: str, device: str = "auto", dtype: str = "auto", *,
               public: bool | None = None) -> str:
    """:func:`plan_load` for names as a form holds them (checked by :func:`resolve_name`, under the public
    policy when ``public`` or :func:`hsd.policy.is_public`); ``owner/name@revision`` pins a revision."""
    (target, t_rev), (drafter, d_rev) = split_revision(target), split_revision(drafter)
    return plan_load(resolve_name(target, public), resolve_name(drafter, public), device, dtype,
                     target_revision=t_rev, drafter_revision=d_rev)


def load_named_pair(target: str, drafter: str, device: str = "auto", dtype: str = "auto", *,
                    public: bool | None = None):
    """:func:`hsd.load_pair` (its cache keeps one Pair per loaded models) for names as a form holds them, one
    load at a time. A form never turns ``trust_remote_code`` on: only the repositories the operator names in
    ``HSD_TRUST_REMOTE_CODE`` run their own code (:mod:`hsd.policy`); in a public app, local directories must
    lie under the allow-list. ``owner/name@revision`` pins a branch, tag or commit (:func:`split_revision`)."""
    (target, t_rev), (drafter, d_rev) = split_revision(target), split_revision(drafter)
    target, drafter = resolve_name(target, public), resolve_name(drafter, public)
    if not target:
        raise ModelNotFoundError("No target model: choose a preset or type a Hub id or a local directory.")
    trusted = {name for name in (target, drafter) if policy.trusts_remote_code(name)}
    with _LOAD_LOCK, emulation.on_this_thread():  # on ZeroGPU, weights placed on cuda from a handler's thread
        try:
            return load_pair(target, drafter or None, device=device, dtype=dtype, trust_remote_code=trusted,
                             target_revision=t_rev, drafter_revision=d_rev if drafter else None)
        except RemoteCodeError as exc:
            name = next((n for n in (target, drafter) if n and repr(n) in str(exc)), target)
            raise RemoteCodeError(
                f"{name!r} needs its own Python code (from its repository) to load, which this app never runs at "
                f"a visitor's request. The operator can allow named repositories with the environment variable "
                f"{policy.TRUST_ENV} (comma-separated Hub ids), then restart the app.") from None


@contextmanager
def device_lock(device: str, timeout_s: float = LOCK_TIMEOUT_S):
    """One run per device at a time: two users never share a model object mid-run, and timings stay clean."""
    with _LOAD_LOCK:
        lock = _DEVICE_LOCKS.setdefault(device, threading.Lock())
    if not lock.acquire(timeout=timeout_s):
        raise ResourceLimitError(f"The {device} device has been busy for {timeout_s:.0f} s: try again shortly.")
    try:
        yield
    finally:
        lock.release()
