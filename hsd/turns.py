"""Turns at the GPU, first come first served, with each waiting request's place in the line.

The app's long handlers load their models first (downloads included), then take a turn for the part that runs
on the device. Only that part waits for a turn, so one visitor's download never holds the device, and a visitor
who waits sees how many requests are ahead instead of a spinner. A request that leaves the line (Stop, a closed
page) frees its place at once.
"""

from __future__ import annotations

import itertools
import os
import threading
from collections.abc import Iterator

#: how often a waiting request re-reads its place (seconds): the line moves when a turn ends, which wakes it too
POLL_S = 1.0


class Turns:
    """A line for ``capacity`` turns at once (``None``: no limit, every request goes at once)."""

    def __init__(self, capacity: int | None = 1):
        if capacity is not None and capacity < 1:
            raise ValueError(f"capacity must be at least 1 or None, got {capacity!r}")
        self.capacity = capacity
        self._cond = threading.Condition()
        self._line: list[int] = []  # tickets in arrival order; the first ``capacity`` of them hold a turn
        self._numbers = itertools.count()

    def ahead(self, ticket: int) -> int:
        """Requests ahead of ``ticket`` that hold or wait for a turn, less the turns free for it (0: its turn)."""
        with self._cond:
            return self._ahead(ticket)

    def _ahead(self, ticket: int) -> int:
        if self.capacity is None or ticket not in self._line:
            return 0
        return max(0, self._line.index(ticket) - self.capacity + 1)

    def waiting(self) -> int:
        """Requests waiting now (holding no turn)."""
        with self._cond:
            return 0 if self.capacity is None else max(0, len(self._line) - self.capacity)

    def turn(self) -> "_Turn":
        """A context whose value yields the requests ahead while waiting; leaving it frees the place or turn."""
        with self._cond:
            ticket = next(self._numbers)
            self._line.append(ticket)
        return _Turn(self, ticket)

    def _leave(self, ticket: int) -> None:
        with self._cond:
            if ticket in self._line:
                self._line.remove(ticket)
            self._cond.notify_all()

    def _wait(self, ticket: int, poll_s: float) -> Iterator[int]:
        last = None
        while True:
            with self._cond:
                ahead = self._ahead(ticket)
                if ahead == 0:
                    return
                if ahead != last:
                    last = ahead
                else:
                    self._cond.wait(poll_s)
                    continue
            yield ahead


class _Turn:
    def __init__(self, turns: Turns, ticket: int):
        self.turns, self.ticket = turns, ticket

    def __enter__(self) -> Iterator[int]:
        return self.turns._wait(self.ticket, POLL_S)  # noqa: SLF001

    def __exit__(self, *exc) -> None:
        self.turns._leave(self.ticket)  # noqa: SLF001


def gpu_capacity(zerogpu: bool) -> int | None:
    """Turns at once on the app's device: ``HSD_GPU_TURNS`` if set (0: no limit); else no limit on ZeroGPU, where
    each call gets its own GPU and ZeroGPU queues the calls itself, and one elsewhere (one device: runs never share
    it, so their timings stay clean)."""
    value = os.environ.get("HSD_GPU_TURNS", "").strip()
    if value:
        try:
            n = int(value)
        except ValueError:
            raise ValueError(f"HSD_GPU_TURNS={value!r}: give a whole number of turns at once (0: no limit).") from None
        return None if n <= 0 else n
    return None if zerogpu else 1
