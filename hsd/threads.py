"""The CPU threading defaults hsd runs under, set before torch starts.

On a CPU shared with other work (a 2-vCPU Space, a laptop with a browser, a CI runner), OpenMP's default
*active* wait policy keeps idle worker threads spinning between parallel regions; they then compete with
the other process, and a model forward can take ten times longer than on a quiet machine. Speedups measured that way describe the machine's load, not the algorithm.
``OMP_WAIT_POLICY=PASSIVE`` makes idle threads sleep. OpenMP reads it once, when torch loads its runtime, so
:func:`configure` runs at the top of ``hsd/__init__.py``, before hsd imports torch. A value the user set
(``OMP_WAIT_POLICY``, ``OMP_NUM_THREADS``) is kept.

The thread count: one per CPU this process may run on (``os.sched_getaffinity``), the OpenMP default,
unless ``OMP_NUM_THREADS`` says otherwise.

**Per pair** (:func:`choose`, :func:`for_pair`): the app and the CLI let hsd choose the count for each generation
(``choose("auto")``); the library leaves torch's count alone unless a program asks the same. A small model's
forward on the CPU is a few hundred small operations, and with more than one thread every one of them wakes and
joins the others, which costs more than the second core gives back; a large model's matrix products gain from it.
So under :data:`ONE_THREAD_BELOW` target parameters a CPU generation runs on one thread, above it on the default
count (docs/design.md, *Threads on the CPU*, has the measurements behind the threshold). ``OMP_NUM_THREADS`` set by
the user, or a count given to :func:`choose` (the CLI's ``--threads``), always wins.
"""

from __future__ import annotations

import os
import sys

DEFAULTS = {"OMP_WAIT_POLICY": "PASSIVE"}


def available_cpus() -> int:
    """The CPUs this process may run on (its affinity mask), or the machine's count where that is unknown."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


#: a CPU target with fewer parameters than this runs on one intra-op thread under ``choose("auto")``
ONE_THREAD_BELOW = 250_000_000
_CHOICE: str | int | None = None  # None: leave torch's count alone; "auto": per pair; an int: that count


def configure() -> dict[str, str]:
    """Set hsd's CPU defaults in the environment unless the user set them; returns the values in force.

    ``in_time`` is ``"no"`` when torch was imported before hsd: its OpenMP runtime has then already read
    the environment, and the wait policy applies only if it was set in the shell."""
    user_threads = os.environ.get("OMP_NUM_THREADS")
    for key, value in {**DEFAULTS, "OMP_NUM_THREADS": str(available_cpus())}.items():
        os.environ.setdefault(key, value)
    return {"OMP_WAIT_POLICY": os.environ["OMP_WAIT_POLICY"], "OMP_NUM_THREADS": os.environ["OMP_NUM_THREADS"],
            "in_time": "no" if "torch" in sys.modules else "yes", "user_threads": user_threads}


def choose(choice: str | int | None) -> None:
    """How many intra-op threads every generation runs with from now on: ``"auto"`` (:func:`for_pair` decides per
    pair), a positive count, or ``None`` (torch's count as it is: the library's default)."""
    global _CHOICE
    if choice is not None and choice != "auto" and not (type(choice) is int and choice >= 1):
        from .errors import InvalidSettingError

        raise InvalidSettingError(f"threads: 'auto', a positive count or None, got {choice!r}.")
    _CHOICE = choice


def for_pair(pair) -> int | None:
    """The intra-op threads a generation on ``pair`` runs with under :func:`choose`'s choice; ``None``: leave
    torch's count as it is (no choice, ``OMP_NUM_THREADS`` set by the user, or a target off the CPU)."""
    if _CHOICE is None or isinstance(_CHOICE, int):
        return _CHOICE
    if STATE["user_threads"] is not None or pair.target.device.type != "cpu":
        return None
    params = sum(p.numel() for p in pair.target.model.parameters())
    return 1 if params < ONE_THREAD_BELOW else int(STATE["OMP_NUM_THREADS"])


def apply(n: int | None) -> None:
    """Run this thread's torch operations on ``n`` intra-op threads (torch keeps the count per Python thread once
    it has run an operation, so each thread that runs a generation's forwards sets it itself)."""
    if n is not None:
        import torch

        if torch.get_num_threads() != n:
            torch.set_num_threads(n)


STATE = configure()
