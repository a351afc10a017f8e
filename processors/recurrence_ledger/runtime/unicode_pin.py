"""contract §10 (rev. 2): a deployment pins the Unicode version of its runtime.

normalize() (contract §4) depends on the Unicode database of the runtime
(``unicodedata.unidata_version``; CPython 3.11 ships Unicode 14.0.0). The
worker records it in its state — the key
``recurrence_ledger.ledger.state.UNICODE_VERSION_KEY`` of every partition's
store, so it is in the compacted changelog and survives restarts — and
checks it whenever it restores a partition (``LedgerWorker``). Replay and
rebuild keep no state of their own: they read the versions recorded in the
deployment's changelog (:func:`check_changelog`). Any of the three refuses to
start on a runtime with another version (``UnicodeVersionChanged``, naming
both), unless the operator accepts the change (``--accept-unicode-change``;
the worker then records the new version).
"""

from __future__ import annotations

import unicodedata

import orjson

from recurrence_ledger.ledger.state import UNICODE_VERSION_KEY, UnicodeVersionChanged
from recurrence_ledger.kafka.kafka_io import read_raw

#: Changelog record key of the pin (the worker's key encoding, ChangelogStore).
CHANGELOG_KEY = orjson.dumps(list(UNICODE_VERSION_KEY))


def recorded_versions(bootstrap: str, changelog_topic: str, timeout: float = 600.0) -> dict[int, str]:
    """``partition → Unicode version`` recorded in a deployment's changelog
    (the latest record of the pin's key per partition); {} when the
    changelog does not exist (no worker ran yet, or it was reset). Reads the
    whole changelog once (the pin's record may be anywhere in it)."""
    try:
        records = read_raw(bootstrap, changelog_topic, timeout, only_key=CHANGELOG_KEY)
    except LookupError:
        return {}
    versions: dict[int, str] = {}
    for record in records:
        if record.value is None:
            versions.pop(record.partition, None)
        else:
            versions[record.partition] = orjson.loads(record.value)
    return versions


def check_changelog(bootstrap: str, changelog_topic: str, accept_change: bool = False,
                    runtime: str = unicodedata.unidata_version) -> dict[int, str]:
    """Refuse (raise UnicodeVersionChanged naming both versions) when any
    partition of ``changelog_topic`` recorded a Unicode version other than
    ``runtime``'s, unless ``accept_change``. Returns the partitions whose
    recorded version differs (empty when all agree or none is recorded)."""
    versions = recorded_versions(bootstrap, changelog_topic)
    differing = {partition: version for partition, version in sorted(versions.items()) if version != runtime}
    if differing and not accept_change:
        recorded = ", ".join(sorted(set(differing.values())))
        partitions = ", ".join(map(str, differing))
        raise UnicodeVersionChanged(recorded, runtime, f"the state in {changelog_topic} (partitions {partitions})")
    return differing
