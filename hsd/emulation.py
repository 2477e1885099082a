"""ZeroGPU's CUDA emulation on the thread that needs it.

On a ZeroGPU Space the ``spaces`` package emulates CUDA in the app's main process: ``torch.cuda`` reports a
GPU, and a tensor placed on ``cuda`` stays in host memory, registered so that each GPU worker (a process forked
for every ``@spaces.GPU`` call) copies it onto its real GPU. The module-level patches are global, but the
TorchFunctionMode that intercepts the placement is *thread-local* (``spaces/zero/wrappers.py``: "TorchModes are
thread-local"), and ``spaces`` enters it only on the thread that imports it. Gradio runs handlers on worker
threads, so a model a visitor picks at run time, loaded and placed there, would reach the real CUDA
initialisation, which the emulation forbids (or, on a CPU-only torch, fail for want of CUDA).

:func:`on_this_thread` enters the emulation's modes on the calling thread for as long as a model is loaded or
a GPU function's body runs, where the process emulates and the thread lacks them; everywhere else (no ``spaces``,
not on ZeroGPU, inside a real GPU worker, where ``spaces`` has removed its patches) it does nothing.
Neither ``spaces`` nor ``gradio`` is imported here: a process that emulates has imported ``spaces`` already.
"""

from __future__ import annotations

import os
import sys
from contextlib import ExitStack, contextmanager


def on_zerogpu() -> bool:
    """Whether this process runs on a ZeroGPU Space (``SPACES_ZERO_GPU``, read as ``spaces`` reads it)."""
    return os.environ.get("SPACES_ZERO_GPU", "").lower() in ("1", "t", "true")


def _patching():
    """``spaces.zero.torch.patching`` where this process emulates CUDA right now, else ``None``."""
    if "spaces" not in sys.modules:
        return None
    config = sys.modules.get("spaces.config")
    patching = sys.modules.get("spaces.zero.torch.patching")
    if config is None or patching is None or not config.Config.zero_gpu:
        return None
    import torch

    if torch.cuda.is_available is patching._cuda_available:  # noqa: SLF001 - unpatched: a real GPU worker
        return None
    return patching


def active() -> bool:
    """Whether this process runs ``spaces``' CUDA emulation (a ZeroGPU Space's main process)."""
    return _patching() is not None


def _on_stack(mode, stack) -> bool:
    return any(m is mode for m in stack)


@contextmanager
def on_this_thread():
    """Run the body with ZeroGPU's CUDA emulation on the calling thread (a no-op where it is already there or
    where this process does not emulate)."""
    patching = _patching()
    if patching is None:
        yield
        return
    from torch.overrides import _get_current_function_mode_stack
    from torch.utils._python_dispatch import _get_current_dispatch_mode_stack

    with ExitStack() as stack:
        if not _on_stack(patching.function_mode, _get_current_function_mode_stack()):
            stack.enter_context(patching.function_mode)
        if not _on_stack(patching.dispatch_mode, _get_current_dispatch_mode_stack()):
            stack.enter_context(patching.dispatch_mode)
        yield
