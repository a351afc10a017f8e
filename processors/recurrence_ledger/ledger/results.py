"""What the pure core returns (``LedgerProcessor.apply``, ``flush``,
``end_batch``): ``Emit`` output records, the ``Rejection`` that sends an
event to dead-letter, and their ``ApplyResult``.

Part of the pure core: imports nothing outside the standard library.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple


class Emit(NamedTuple):
    """One output record: logical topic, key (scope_id, or the original key
    for dead-letter) and JSON-compatible value."""

    topic: str
    key: str | None
    value: dict


class Rejection(NamedTuple):
    """Why a valid-looking event was not applied: ``reason`` is
    ``identity_conflict`` or ``position_conflict`` (contract §3
    immutability), ``invalid_value`` (no canonical form) or
    ``too_many_pending`` (admission, see LedgerConfig)."""

    reason: str
    message: str


@dataclass
class ApplyResult:
    """Emits of one ``apply`` call, or the rejection that sends the record to
    dead-letter (the shell adds its coordinates, contract §9)."""

    emits: list[Emit] = field(default_factory=list)
    rejection: Rejection | None = None
