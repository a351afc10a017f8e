"""Totals over every scope of the Redis view (contract §16–§17): unknown
selections by reason and the ScopeStatistics figures marked ``total``
(``recurrence_ledger.ledger.fields.total_fields``), summed over the
scopes' last ScopeStatistics records. The view follower publishes them as Prometheus
gauges (``recurrence_ledger.read.follower``; docs/operating.md says why
totals and not one series per scope).

They are read from the scope hashes' integer fields and their
``unknown_reasons`` field (``recurrence_ledger.read.projection``), not from
the records: one HMGET of five small fields per scope, pipelined. The read
is not a snapshot of the whole view (scopes written meanwhile may count
their old or their new record), which a gauge refreshed every few seconds
does not need. A scope written before revision 3 (no such fields) counts 0
until its next record or a ``view rebuild``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType

import orjson
import redis

from recurrence_ledger.ledger.fields import total_fields
from recurrence_ledger.ledger.holdout_records import EFFECT_VERDICTS
from recurrence_ledger.ledger.records import ScopeStatistics
from recurrence_ledger.ledger.verdicts import UNKNOWN_REASONS
from recurrence_ledger.read.keys import Keys
from recurrence_ledger.read.projection import CRITICAL_RECURRENCES_FIELD, EFFECTS_FIELD, UNKNOWN_REASONS_FIELD

#: The integer hash fields summed over the scopes: the ScopeStatistics
#: fields marked ``total``, in the record's order.
TOTAL_FIELDS: tuple[str, ...] = total_fields(ScopeStatistics)
#: The description of each of :data:`TOTAL_FIELDS` (the model's): the gauges' help.
FIELD_DESCRIPTIONS: dict[str, str] = {name: ScopeStatistics.model_fields[name].description for name in TOTAL_FIELDS}
#: Scopes per pipelined round trip.
CHUNK = 1000


#: The effect verdicts of contract §21.4, in the contract's order.


def _zero_reasons() -> dict[str, int]:
    return dict.fromkeys(UNKNOWN_REASONS, 0)


def _zero_effects() -> dict[str, int]:
    return dict.fromkeys(EFFECT_VERDICTS, 0)


@dataclass(frozen=True)
class ViewTotals:
    """Sums over the scopes of a view. ``unknown_reasons``: every reason of
    contract §17, in the contract's order, with the unknown selections that
    have it; ``scopes``: scopes read (those in ``{ns}:scopes`` with a hash);
    ``sums``: each of :data:`TOTAL_FIELDS` with its sum;
    ``critical_recurrences``: per scope with any, its recurred verdicts of
    critical revisions (contract §22: each increase is an alert of its own,
    so this one figure is per scope — only scopes that had one);
    ``effects``: every effect verdict of contract §21.4 with the scopes'
    revisions that have it."""

    scopes: int = 0
    unknown_reasons: dict[str, int] = field(default_factory=_zero_reasons)
    sums: MappingProxyType = field(default_factory=lambda: MappingProxyType(dict.fromkeys(TOTAL_FIELDS, 0)))
    critical_recurrences: dict[str, int] = field(default_factory=dict)
    effects: dict[str, int] = field(default_factory=_zero_effects)


def view_totals(client: redis.Redis, keys: Keys, chunk: int = CHUNK) -> ViewTotals:
    """The :class:`ViewTotals` of the view under ``keys`` (its namespace),
    read with ``client`` (decoded responses or bytes). O(scopes) fields,
    ``chunk`` scopes per round trip. Raises redis errors."""
    scope_ids = sorted(member.decode() if isinstance(member, bytes) else member for member in client.smembers(keys.scopes))
    sums = dict.fromkeys(TOTAL_FIELDS, 0)
    reasons = _zero_reasons()
    critical: dict[str, int] = {}
    effects = _zero_effects()
    read = 0
    for start in range(0, len(scope_ids), chunk):
        pipe = client.pipeline(transaction=False)
        chunk_ids = scope_ids[start : start + chunk]
        for scope_id in chunk_ids:
            pipe.hmget(keys.scope(scope_id), *TOTAL_FIELDS, EFFECTS_FIELD, CRITICAL_RECURRENCES_FIELD, UNKNOWN_REASONS_FIELD)
        for scope_id, values in zip(chunk_ids, pipe.execute(), strict=True):
            if all(value is None for value in values):
                continue  # listed but cleared meanwhile
            read += 1
            if values[-2] is not None and int(values[-2]) > 0:
                critical[scope_id] = int(values[-2])
            if values[-3] is not None:  # a scope written before contract revision 4 has none
                for verdict, count in orjson.loads(values[-3]).items():
                    if verdict in effects:
                        effects[verdict] += count
            for name, value in zip(TOTAL_FIELDS, values, strict=False):
                sums[name] += int(value) if value is not None else 0
            stored = values[-1]
            if stored is not None:
                for reason, count in orjson.loads(stored).items():
                    if reason in reasons:
                        reasons[reason] += count
    return ViewTotals(scopes=read, unknown_reasons=reasons, sums=MappingProxyType(sums), critical_recurrences=critical, effects=effects)
