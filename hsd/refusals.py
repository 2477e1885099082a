"""ZeroGPU's refusals as sentences a visitor can act on: the ``spaces`` wrapper raises ZeroGPU's own failures
(quota exceeded, task aborted, no GPU available, duration too long) around a handler, before or after the
handler's own ``try``; :func:`classify_gpu_error` reads what kind each is and :func:`explain_gpu_error` says what to
do about it. gradio's error type is only recognised, never imported.
"""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass


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


def error_message(exc: BaseException) -> str:
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
    message = error_message(exc)
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
