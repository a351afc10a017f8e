"""Human decisions on review candidates, from the outside (contract §18):
a ReviewDecision built and checked against what is known of its candidate
(:func:`new_decision`), published to ``review-decisions``
(:class:`DecisionPublisher`), and the review topics read back whole
(:func:`read_review_topics`) — what ``POST
/review-candidates/{id}/decision`` (``recurrence_ledger.api.routes.review``)
and ``recurrence-ledger review`` (``recurrence_ledger.cli.review``) share.

The ledger is the judge: the worker applies the first decision of a
candidate and dead-letters the others (``already_decided``,
``unknown_candidate``, ``invalid_value``, ``identity_conflict``, contract
§9, §18). These checks only refuse early, with a clear message, what the
worker would refuse anyway — from what the caller has read (the view, or
the topics), which can be a moment behind the ledger: two decisions sent
at once both pass here, and the worker keeps the first.

Decision ids are deterministic: :func:`decision_id` is the digest of
``{candidate_id, reviewer, decided_at}`` (contract §4), so anyone holding
the record can recompute it, and no random source is needed. Two
decisions of one reviewer on one candidate in the same millisecond have
one id (the worker keeps the first: the same content is a duplicate,
other content an ``identity_conflict``).
"""

from __future__ import annotations

import datetime
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

from confluent_kafka import KafkaError, KafkaException, Message, Producer
from pydantic import ValidationError

from recurrence_ledger import catalogue
from recurrence_ledger.errors import RecurrenceLedgerError
from recurrence_ledger.ledger.models import ReviewDecision
from recurrence_ledger.ledger.normalize import digest, is_blank
from recurrence_ledger.kafka.client_config import Bootstrap
from recurrence_ledger.kafka.kafka_io import FLUSH_TIMEOUT_S, PublishError, require_topics, produce, publisher_config, read_raw
from recurrence_ledger.serde.codec import AVRO, FIXED, Codec

#: The statuses of a decided candidate (contract §18).
DECIDED = frozenset({"approved", "rejected"})
#: Seconds a decision may take to be acknowledged by the broker.
DECISION_TIMEOUT_S = 30.0


class DecisionRefused(RecurrenceLedgerError, ValueError):
    """A decision that cannot be applied, refused before it is published.
    ``code``: ``unknown_candidate``, ``already_decided`` or
    ``invalid_value`` (the worker's dead-letter reasons for the same
    decision, contract §9, §18); the message says why."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code


class DecisionClock:
    """The ``decided_at`` of the decisions one process makes: now, as an RFC
    3339 UTC timestamp with microseconds (``2025-01-02T03:04:05.678901Z``),
    and later than the last one it gave, by a microsecond if the clock has
    not moved on (thread-safe). A decision's id is the digest of
    ``{candidate_id, reviewer, decided_at}``: two decisions a reviewer sends
    at once must not share it, or the second one would be an
    ``identity_conflict`` under the first one's id instead of the
    ``already_decided`` it is (contract §18)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last_us = 0

    def now(self) -> str:
        """The next ``decided_at``."""
        with self._lock:
            self._last_us = max(time.time_ns() // 1000, self._last_us + 1)
            micros = self._last_us
        moment = datetime.datetime.fromtimestamp(micros // 1_000_000, datetime.timezone.utc)
        return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{micros % 1_000_000:06d}Z"


#: The process's decision clock.
DECISION_CLOCK = DecisionClock()


def decision_id(candidate_id: str, reviewer: str, decided_at: str) -> str:
    """The id of a decision: ``digest({candidate_id, reviewer, decided_at})``
    (contract §4), ``sha256:`` and 64 hex digits."""
    return digest({"candidate_id": candidate_id, "reviewer": reviewer, "decided_at": decided_at})


def describe_decision(applied: Mapping) -> str:
    """An applied decision (a ReviewStatus ``decision``) in words."""
    return f"{applied['decision']} by {applied['reviewer']} at {applied['decided_at']}"


def new_decision(
    candidate: Mapping,
    status: Mapping | None,
    *,
    reviewer: str,
    decision: str,
    reason: str | None,
    fix_revision: Mapping | None,
    journal_position: int,
    decided_at: str | None = None,
    reason_code: str | None = None,
) -> dict:
    """The ReviewDecision (contract §18, canonical form: every field) of
    ``reviewer`` on ``candidate`` (a ReviewCandidate dict) whose last known
    ReviewStatus is ``status`` (None: none known yet, so open), at
    ``journal_position`` (the scope's current ``as_of_position``: a
    decision does not use up its position), decided ``decided_at`` (default
    ``DECISION_CLOCK.now()``), its id :func:`decision_id`; ``reason_code`` (contract
    §24): why a rejection rejects, one of the six codes, or None.

    Raises DecisionRefused: ``already_decided`` when ``status`` is approved
    or rejected; ``invalid_value`` for a decision that is neither approved
    nor rejected, a rejection without a non-blank reason or with a
    fix_revision, a reason_code with an approval or outside the six codes, a fix_revision that is not a higher revision of the
    candidate's own artifact, or a field that breaks the ReviewDecision
    model (a reason over 16,384 characters, a reviewer that is not an
    identifier, …)."""
    if status is not None and status.get("status") in DECIDED:
        raise DecisionRefused("already_decided", f"candidate {candidate['candidate_id']} was already decided: {describe_decision(status['decision'])}")
    if decision not in DECIDED:
        raise DecisionRefused("invalid_value", f"decision is approved or rejected, not {decision!r}")
    if decision == "rejected":
        if reason is None or is_blank(reason):
            raise DecisionRefused("invalid_value", "a rejection needs a reason that is not blank (contract §18: it stays auditable)")
        if fix_revision is not None:
            raise DecisionRefused("invalid_value", "a rejection names no fix_revision (only an approval does)")
    elif reason_code is not None:
        raise DecisionRefused("invalid_value", "a reason_code is only given with a rejection (contract §24)")
    if fix_revision is not None:
        check_fix_revision(candidate["artifact_ref"], fix_revision)
    decided_at = decided_at or DECISION_CLOCK.now()
    value = {
        "scope_id": candidate["scope_id"], "decision_id": decision_id(candidate["candidate_id"], reviewer, decided_at),
        "candidate_id": candidate["candidate_id"], "journal_position": journal_position, "decision": decision, "reason": reason,
        "reviewer": reviewer, "decided_at": decided_at, "fix_revision": dict(fix_revision) if fix_revision is not None else None,
        "reason_code": reason_code,
    }
    try:
        return ReviewDecision.model_validate(value).model_dump(mode="json")
    except ValidationError as error:
        first = error.errors(include_url=False)[0]
        where = ".".join(str(part) for part in first["loc"]) or "(decision)"
        raise DecisionRefused("invalid_value", f"{where}: {first['msg']}") from None


def check_fix_revision(artifact_ref: Mapping, fix_revision: Mapping) -> None:
    """contract §18: a fix_revision is a higher revision of the candidate's
    own artifact (``artifact_ref``). Raises DecisionRefused(invalid_value)
    saying which rule it breaks."""
    same = fix_revision.get("family") == artifact_ref["family"] and fix_revision.get("artifact_id") == artifact_ref["artifact_id"]
    if not same:
        raise DecisionRefused(
            "invalid_value",
            f"fix_revision {fix_revision.get('family')}:{fix_revision.get('artifact_id')} is not the candidate's artifact "
            f"{artifact_ref['family']}:{artifact_ref['artifact_id']}",
        )
    revision = fix_revision.get("revision")
    if not isinstance(revision, int) or isinstance(revision, bool) or revision <= artifact_ref["revision"]:
        raise DecisionRefused(
            "invalid_value", f"fix_revision r{revision} is not a revision above the candidate's r{artifact_ref['revision']} of {artifact_ref['artifact_id']}"
        )


@dataclass(frozen=True)
class Published:
    """Where a decision landed: its physical topic, partition and offset."""

    topic: str
    partition: int
    offset: int


class DecisionPublisher:
    """Publishes ReviewDecisions to ``<prefix>review-decisions``, keyed by
    their scope_id (UTF-8), with one idempotent producer
    (``kafka_io.publisher_config``: ``client_config.producer_config`` and
    the Java client's partitioner, so a decision lands on its scope's
    partition), created at the first decision and kept. ``codec`` frames
    the value (Avro; the deployment's codec, so a Schema Registry's ids
    with one). Thread-safe: one decision at a time."""

    def __init__(self, bootstrap: Bootstrap, topic_prefix: str = "", codec: Codec = FIXED, timeout: float = DECISION_TIMEOUT_S):
        self.bootstrap = bootstrap
        self.topic = catalogue.physical(catalogue.REVIEW_DECISIONS, topic_prefix)
        self.codec = codec
        self.timeout = timeout
        self._producer: Producer | None = None
        self._lock = threading.Lock()

    def publish(self, decision: Mapping) -> Published:
        """Produce ``decision`` (a ReviewDecision dict) and wait for the
        broker's acknowledgement. Raises LookupError when the topic does not
        exist, PublishError when the record is not delivered within
        ``timeout`` seconds (or refused: e.g. TOPIC_AUTHORIZATION_FAILED),
        RegistryError when a Schema Registry does not answer."""
        value = self.codec.encode("ReviewDecision", dict(decision), AVRO, topic=self.topic)
        report: list[tuple[KafkaError | None, Message]] = []
        with self._lock:
            if self._producer is None:
                producer = Producer(publisher_config(self.bootstrap))
                require_topics(producer, [self.topic])
                self._producer = producer
            try:
                produce(self._producer, self.topic, decision["scope_id"].encode(), value, on_delivery=lambda error, message: report.append((error, message)))
            except KafkaException as error:
                raise PublishError(f"{self.topic}: {error.args[0].str()}", [(None, self.topic, error.args[0].str())]) from None
            self._producer.flush(min(self.timeout, FLUSH_TIMEOUT_S))
        if not report or report[0][0] is not None:
            text = "not acknowledged in time" if not report else report[0][0].str()
            raise PublishError(f"decision not published to {self.topic}: {text}", [(None, self.topic, text)])
        return Published(self.topic, report[0][1].partition(), report[0][1].offset())

    def close(self) -> None:
        """Flush what is outstanding (bounded) and drop the producer."""
        with self._lock:
            if self._producer is not None:
                self._producer.flush(5)
                self._producer = None


@dataclass
class ReviewTopics:
    """The review topics as read whole: ``candidates`` candidate_id →
    ``{"candidate": ReviewCandidate, "timestamp": ms}``, ``statuses``
    candidate_id → its last ReviewStatus, ``as_of`` scope_id → the
    ``as_of_position`` of its last ScopeStatistics record; ``skipped``
    records that did not decode."""

    candidates: dict[str, dict] = field(default_factory=dict)
    statuses: dict[str, dict] = field(default_factory=dict)
    as_of: dict[str, int] = field(default_factory=dict)
    skipped: int = 0

    def status_of(self, candidate_id: str) -> str:
        """The candidate's status: its last ReviewStatus's, ``open`` without one."""
        row = self.statuses.get(candidate_id)
        return row["status"] if row is not None else "open"


def read_review_topics(bootstrap: Bootstrap, topic_prefix: str = "", codec: Codec = FIXED, timeout: float = 60.0,
                       statistics: bool = True) -> ReviewTopics:
    """Read ``review-candidates``, ``review-status`` and (with
    ``statistics``) ``recurrence-statistics`` whole (``kafka_io.read_raw``:
    read_committed, every partition to its end), keeping the last record
    per candidate and per scope. Records that do not decode (and
    tombstones) are counted in ``skipped``. Raises what ``read_raw``
    raises (LookupError for a missing topic, TimeoutError, KafkaException),
    RegistryError."""
    from recurrence_ledger.ledger.intake import BadRecord

    found = ReviewTopics()
    names = [catalogue.REVIEW_CANDIDATES, catalogue.REVIEW_STATUS] + ([catalogue.STATISTICS] if statistics else [])
    for name in names:
        schema = catalogue.BY_NAME[name].schema
        for raw in read_raw(bootstrap, catalogue.physical(name, topic_prefix), timeout):
            if raw.value is None:
                continue
            try:
                value = codec.decode_value(raw.value, (schema,))
            except BadRecord:
                found.skipped += 1
                continue
            if name == catalogue.REVIEW_CANDIDATES:
                found.candidates[value["candidate_id"]] = {"candidate": value, "timestamp": raw.timestamp}
            elif name == catalogue.REVIEW_STATUS:
                found.statuses[value["candidate_id"]] = value
            else:
                found.as_of[value["scope_id"]] = value["as_of_position"]
    return found
