"""contract §10 (rev. 2): a deployment pins the Unicode version of its runtime
(and, contract §21.5, its holdout policy: :func:`check_holdout_changelog`).

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
from typing import Any

import orjson

from recurrence_ledger.ledger.config import LedgerConfig
from recurrence_ledger.ledger.state import HOLDOUT_POLICY_KEY, UNICODE_VERSION_KEY, HoldoutPolicyChanged, UnicodeVersionChanged, holdout_policy
from recurrence_ledger.kafka.kafka_io import read_raw

#: Changelog record key of the pin (the worker's key encoding, ChangelogStore).
CHANGELOG_KEY = orjson.dumps(list(UNICODE_VERSION_KEY))
#: Changelog record key of the holdout policy's pin (contract §21.5,
#: ``recurrence_ledger.ledger.state.pin_holdout_policy``).
HOLDOUT_CHANGELOG_KEY = orjson.dumps(list(HOLDOUT_POLICY_KEY))


def recorded_versions(bootstrap: str, changelog_topic: str, timeout: float = 600.0, key: bytes = CHANGELOG_KEY) -> dict[int, Any]:
    """``partition → Unicode version`` recorded in a deployment's changelog
    (the latest record of the pin's key per partition; with ``key``,
    another pin's, e.g. :data:`HOLDOUT_CHANGELOG_KEY`); {} when the
    changelog does not exist (no worker ran yet, or it was reset). Reads the
    whole changelog once (the pin's record may be anywhere in it)."""
    try:
        records = read_raw(bootstrap, changelog_topic, timeout, only_key=key)
    except LookupError:
        return {}
    versions: dict[int, Any] = {}
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


def check_holdout_changelog(bootstrap: str, changelog_topic: str, config: LedgerConfig, accept_change: bool = False) -> None:
    """Refuse (raise HoldoutPolicyChanged naming both policies) when a
    partition of ``changelog_topic`` recorded another holdout policy than
    ``config``'s (contract §21.5: a replay under another salt or rate would
    assign the arms differently from the facts it completes), unless
    ``accept_change``."""
    configured = holdout_policy(config.holdout_salt, config.holdout_rate)
    for partition, recorded in sorted(recorded_versions(bootstrap, changelog_topic, key=HOLDOUT_CHANGELOG_KEY).items()):
        if recorded != configured and not accept_change:
            raise HoldoutPolicyChanged(recorded, configured, f"the state in {changelog_topic} (partition {partition})")
