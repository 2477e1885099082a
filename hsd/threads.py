"""The CPU threading defaults hsd runs under, set before torch starts.

On a CPU shared with other work (a 2-vCPU Space, a laptop with a browser, a CI runner), OpenMP's default
*active* wait policy keeps idle worker threads spinning between parallel regions; they then compete with
the other process, and a model forward can take ten times longer than on a quiet machine (measured: a SLEM
verify of 14 ms took 254 ms). Speedups measured that way describe the machine's load, not the algorithm.
``OMP_WAIT_POLICY=PASSIVE`` makes idle threads sleep. OpenMP reads it once, when torch loads its runtime, so
:func:`configure` runs at the top of ``hsd/__init__.py``, before hsd imports torch. A value the user set
(``OMP_WAIT_POLICY``, ``OMP_NUM_THREADS``) is kept.

The thread count: one per CPU this process may run on (``os.sched_getaffinity``), the OpenMP default,
unless ``OMP_NUM_THREADS`` says otherwise.
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


def configure() -> dict[str, str]:
    """Set hsd's CPU defaults in the environment unless the user set them; returns the values in force.

    ``in_time`` is ``"no"`` when torch was imported before hsd: its OpenMP runtime has then already read
    the environment, and the wait policy applies only if it was set in the shell."""
    for key, value in {**DEFAULTS, "OMP_NUM_THREADS": str(available_cpus())}.items():
        os.environ.setdefault(key, value)
    return {"OMP_WAIT_POLICY": os.environ["OMP_WAIT_POLICY"], "OMP_NUM_THREADS": os.environ["OMP_NUM_THREADS"],
            "in_time": "no" if "torch" in sys.modules else "yes"}


STATE = configure()
