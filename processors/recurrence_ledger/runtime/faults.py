"""Runtime hooks: named points of the worker's loop where something outside
the ledger may act — tests inject faults there; nothing else needs to reach
into the core or the loop to do so.

Points (the worker calls :meth:`RuntimeHooks.at` with these names):

- ``consumed``: a batch was polled, nothing of it processed yet;
- ``produced``: the transaction's outputs (ledger facts and view records)
  are produced; the changelog and the offsets are not;
- ``offsets_sent``: changelog produced and offsets sent to the transaction,
  before ``commit_transaction``;
- ``committed``: the transaction committed (with ``--state-dir``: before
  the local stores record it);
- ``stored``: every task recorded the committed transaction (its local
  checkpoint, with ``--state-dir``; at once without);
- ``restoring``: one changelog record restored (recovery).

And one per record: :meth:`RuntimeHooks.applied`, after the core applied an
input record and before its outputs are produced. An exception raised there
is handled exactly like an exception raised by the core on that record.
"""

from __future__ import annotations

import logging
import os
import signal

from recurrence_ledger.ledger.intake import Coordinates

log = logging.getLogger("recurrence_ledger.worker")

#: The points of :meth:`RuntimeHooks.at` (module docstring), in loop order.
POINTS = ("consumed", "produced", "offsets_sent", "committed", "stored", "restoring")


class RuntimeHooks:
    """Hooks that do nothing (production). Subclass and override."""

    active = False  #: True when the worker must call the hooks at all

    def at(self, point: str) -> None:
        """The loop reached ``point`` (one of POINTS)."""

    def applied(self, coordinates: Coordinates) -> None:
        """The core applied the record at ``coordinates``; raising here
        fails that record as if the core had raised."""


class InjectedCoreError(RuntimeError):
    """Raised by :class:`FaultInjector` in :meth:`RuntimeHooks.applied`."""


class FaultInjector(RuntimeHooks):
    """Fault injection for tests, from ``RL_FAULT_INJECT="point:n,…"``:

    - ``<point>:n`` (a point of POINTS) makes the process SIGKILL itself the
      n-th time it reaches ``point``;
    - ``core_error:n`` makes the n-th applied record fail after the core
      changed its state (a simulated core bug: the worker must roll the
      record back and dead-letter it).

    Raises ValueError for an unknown point or a count that is not a positive
    integer."""

    def __init__(self, spec: str | None):
        self.remaining: dict[str, int] = {}
        for item in filter(None, (spec or "").split(",")):
            point, _, count = item.partition(":")
            if point not in (*POINTS, "core_error"):
                raise ValueError(f"unknown fault injection point {point!r} (known: {', '.join((*POINTS, 'core_error'))})")
            number = int(count or 1)
            if number < 1:
                raise ValueError(f"fault injection count must be ≥ 1: {item!r}")
            self.remaining[point] = number
        self.active = bool(self.remaining)

    def _due(self, point: str) -> bool:
        if point not in self.remaining:
            return False
        self.remaining[point] -= 1
        return self.remaining[point] == 0

    def at(self, point: str) -> None:
        """SIGKILL this process on the n-th arrival at ``point``."""
        if self._due(point):
            log.warning("fault injection: SIGKILL at %s", point)
            os.kill(os.getpid(), signal.SIGKILL)

    def applied(self, coordinates: Coordinates) -> None:
        """Raise InjectedCoreError on the n-th applied record."""
        if self._due("core_error"):
            raise InjectedCoreError(f"fault injection: core_error at {coordinates.topic}[{coordinates.partition}]@{coordinates.offset}")
