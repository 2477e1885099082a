"""The decoding algorithms, one module each, every one a ``step(session) -> Round`` on the shared core.

Each module declares its :class:`~hsd.algorithms.contract.Algorithm`; this registry (:data:`ALGORITHMS`) is the
only list of them. Adding an algorithm: write the module, declare its ``ALGORITHM``, and :func:`register` it
(below for the built-in ones, or from any code for an experiment): ``generate``, the CLI, the benchmark, the
advice, the report, the production configurations, the ZeroGPU durations, the losslessness check, the app and
the pictures read the registry.
"""

from __future__ import annotations

from .contract import Algorithm

ALGORITHMS: dict[str, Algorithm] = {}


def register(algorithm: Algorithm) -> Algorithm:
    """Make ``algorithm`` available under its name everywhere (replacing one of the same name)."""
    ALGORITHMS[algorithm.name] = algorithm
    return algorithm


def unregister(name: str) -> None:
    ALGORITHMS.pop(name, None)


__all__ = ["ALGORITHMS", "Algorithm", "availability", "register", "unregister", "usable_algorithms"]


def availability(pair) -> dict[str, str | None]:
    """Every registered algorithm, in registry order: ``None`` if it runs on ``pair``, else why not."""
    return {name: a.applies(pair) for name, a in ALGORITHMS.items()}


def usable_algorithms(pair) -> list[str]:
    """The algorithms that run on ``pair``, in registry order (AR first)."""
    return [name for name, why in availability(pair).items() if why is None]


from . import ar, sd, slem, slrs, tli  # noqa: E402  (they import the contract above)

for _module in (ar, sd, slem, tli, slrs):
    register(_module.ALGORITHM)
