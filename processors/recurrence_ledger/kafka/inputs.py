"""The input topics as the ledger took them, for the commands that explain
or export from Kafka (``explain``, ``patterns export``): every input
record is decoded as the worker decodes it (``Codec.decode_source``,
contract §1, §9), and a record the worker dead-lettered — listed on the
dead-letter topic by its coordinates, or that does not decode or
validate — is never taken for an applied event. One bad record on an
input topic (append-only: it stays there) must not make the commands
fail for every scope.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

from recurrence_ledger import catalogue
from recurrence_ledger.kafka.client_config import Bootstrap
from recurrence_ledger.kafka.kafka_io import read_raw, read_topic
from recurrence_ledger.ledger.explain import Rejected
from recurrence_ledger.ledger.intake import BadRecord, validate
from recurrence_ledger.serde.codec import FIXED, Codec


class AppliedInputs(NamedTuple):
    """The input events of a deployment: ``events`` the ledger applied, as
    ``(kind, canonical value)`` in the order read (partition by partition,
    each in offset order); ``rejected`` those it dead-lettered that decode
    as events (``ledger.explain.Rejected``)."""

    events: list[tuple[str, dict]]
    rejected: list[Rejected]


def applied_inputs(bootstrap: Bootstrap, topic_prefix: str = "", codec: Codec = FIXED,
                   kinds: Iterable[str] | None = None) -> AppliedInputs:
    """The input topics of the deployment under ``topic_prefix`` (every
    input topic of the catalogue; with ``kinds``, events of those kinds
    only), read committed to their end, with the dead-letter topic.

    A record without a dead letter that does not decode or validate was
    dead-lettered all the same (its dead letter is past the topic's
    retention): it is left out. Raises what ``kafka_io.read_topic``
    raises (LookupError for a missing topic, TimeoutError,
    KafkaException, RegistryError).
    """
    wanted = None if kinds is None else set(kinds)
    letters = {(letter["topic"], letter["partition"], letter["offset"]): letter
               for *_, letter in read_topic(bootstrap, catalogue.DEAD_LETTER, topic_prefix=topic_prefix, codec=codec)}
    found = AppliedInputs([], [])
    for name in catalogue.INPUT_TOPICS:
        if wanted is not None and name != catalogue.SOURCE_JOURNAL and name not in wanted:
            continue
        physical = catalogue.physical(name, topic_prefix)
        for record in read_raw(bootstrap, physical):
            try:
                kind, value = codec.decode_source(name, record.value)
            except BadRecord:
                continue
            if wanted is not None and kind not in wanted:
                continue
            letter = letters.get((physical, record.partition, record.offset))
            if letter is not None:
                found.rejected.append(Rejected(kind, value, letter))
                continue
            try:
                found.events.append((kind, validate(kind, value)))
            except BadRecord:
                continue
    return found
