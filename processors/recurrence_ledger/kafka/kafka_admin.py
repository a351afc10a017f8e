"""contract §1 on a real broker: create the catalogue's topics and check
that input topics are co-partitioned.

Every topic of ``recurrence_ledger.catalogue.CATALOGUE`` is created with the same
partition count and its catalogue configs (cleanup policy, retention), so
that one scope's inputs and outputs live on the same partition number. The
worker refuses to start when its input topics' partition counts differ
(:func:`check_copartitioned`).

Metadata is always read with an unfiltered ``list_topics()``: asking a
producer-type handle (AdminClient, Producer) for the metadata of one named
topic makes a broker with ``auto.create.topics.enable=true`` (the Kafka
default, and deploy/kafka.sh's broker) create that topic with
``num.partitions`` partitions — exactly the silent mis-partitioning these
functions exist to prevent.
"""

from __future__ import annotations

from recurrence_ledger.errors import RecurrenceLedgerError

import time
from collections.abc import Iterable, Sequence

from confluent_kafka import IsolationLevel, KafkaError, KafkaException, TopicCollection, TopicPartition
from confluent_kafka.admin import AdminClient, ClusterMetadata, ConfigResource, NewTopic, OffsetSpec

from recurrence_ledger.kafka.client_config import Bootstrap, client_config
from recurrence_ledger.catalogue import CATALOGUE, changelog_name, pattern_changelog_name, physical, replay_group, view_follower_group

#: Seconds create_topics may take in all: the controller creating the
#: topics, then every partition being served by its leader.
CREATE_TIMEOUT_S = 30.0


class CoPartitionError(RecurrenceLedgerError, ValueError):
    """Topics that must share a partition count (contract §1,
    co-partitioning by scope_id) do not, or one of them does not exist.
    ``counts`` maps each physical topic name to its partition count, or None
    when the topic is missing."""

    def __init__(self, message: str, counts: dict[str, int | None]):
        super().__init__(message)
        self.counts = counts


def admin_client(bootstrap: Bootstrap) -> AdminClient:
    """An AdminClient for ``bootstrap`` ("host:port[,host:port…]", or a
    ``client_config.KafkaConnection`` with security settings)."""
    return AdminClient(client_config(bootstrap))


def list_offsets(admin: AdminClient, partitions: Iterable[TopicPartition], spec: OffsetSpec,
                 isolation: IsolationLevel = IsolationLevel.READ_UNCOMMITTED, timeout: float = 10.0) -> dict[tuple[str, int], int]:
    """``(topic, partition) -> offset`` of ``spec`` (``OffsetSpec.latest()``:
    the high watermark, or with READ_COMMITTED the last stable offset;
    ``earliest()``: the log start) for every partition, in one ListOffsets
    request per leader. Asked of an admin client, not a consumer: a
    consumer queues each watermark query behind its long-polling fetch
    (``fetch.wait.max.ms``, 0.5 s per partition). ``timeout`` in seconds.
    Raises KafkaException when a partition has no answer, TimeoutError
    when none comes in time."""
    futures = admin.list_offsets({TopicPartition(tp.topic, tp.partition): spec for tp in partitions},
                                 isolation_level=isolation, request_timeout=timeout)
    return {(tp.topic, tp.partition): future.result(timeout=timeout + 5).offset for tp, future in futures.items()}


def _metadata(admin: AdminClient, timeout: float) -> ClusterMetadata:
    # Unfiltered on purpose: see the module docstring (auto-creation).
    return admin.list_topics(timeout=timeout)


def partition_counts(metadata: ClusterMetadata, topics: Iterable[str]) -> dict[str, int | None]:
    """Partition count of each physical topic in ``metadata``; None for a
    topic that is missing or reported with an error."""
    counts: dict[str, int | None] = {}
    for name in topics:
        topic = metadata.topics.get(name)
        counts[name] = None if topic is None or topic.error is not None else len(topic.partitions)
    return counts


#: Errors a partition reports while its new leader is still loading it
#: (seen on a KRaft broker right after CreateTopics: NOT_LEADER_FOR_PARTITION,
#: and under load UNKNOWN_LEADER_EPOCH). librdkafka flags none of them
#: retriable on ListOffsets results.
RETRIABLE_CODES = frozenset(
    {
        KafkaError.NOT_LEADER_FOR_PARTITION,
        KafkaError.LEADER_NOT_AVAILABLE,
        KafkaError.UNKNOWN_LEADER_EPOCH,
        KafkaError.FENCED_LEADER_EPOCH,
        KafkaError.OFFSET_NOT_AVAILABLE,
        KafkaError.REPLICA_NOT_AVAILABLE,
        KafkaError.UNKNOWN_TOPIC_OR_PART,
        KafkaError._TIMED_OUT,
    }
)


def is_transient(error: KafkaError) -> bool:
    """True for an error worth retrying on a partition whose leader is
    settling (RETRIABLE_CODES, or flagged retriable by librdkafka)."""
    return error.code() in RETRIABLE_CODES or error.retriable()


def wait_for_topics(admin: AdminClient, names: Sequence[str], timeout: float = CREATE_TIMEOUT_S) -> dict[str, int]:
    """Block until every partition of every physical topic in ``names`` has a
    leader that serves it: the metadata shows a leader, and a ListOffsets
    request for the partition succeeds. Returns each topic's partition count.

    Both steps are needed on a KRaft broker: a CreateTopics request completes
    before the broker's metadata lists the topic, and for a few tens to
    hundreds of milliseconds after the metadata shows a leader, that leader
    still answers NOT_LEADER_FOR_PARTITION (which librdkafka does not flag
    as retriable) to ListOffsets — what consumers' ``get_watermark_offsets``
    sends.

    ``timeout`` is in seconds. Raises TimeoutError naming the topics not
    ready, KafkaException for a non-transient error.
    """
    deadline = time.monotonic() + timeout
    partitions: dict[str, int] = {}
    pending = set(names)
    while pending:
        metadata = _metadata(admin, max(1.0, deadline - time.monotonic()))
        for name in list(pending):
            topic = metadata.topics.get(name)
            if topic is not None and topic.error is None and topic.partitions and all(
                partition.leader >= 0 for partition in topic.partitions.values()
            ):
                partitions[name] = len(topic.partitions)
                pending.discard(name)
        if pending and time.monotonic() >= deadline:
            raise TimeoutError(f"topics without a partition leader after {timeout:.0f} s: {', '.join(sorted(pending))}")
        if pending:
            time.sleep(0.05)
    unserved = {TopicPartition(name, number) for name, count in partitions.items() for number in range(count)}
    while unserved:
        futures = admin.list_offsets({tp: OffsetSpec.latest() for tp in unserved}, request_timeout=max(1.0, deadline - time.monotonic()))
        for tp, future in futures.items():
            try:
                future.result()
                unserved.discard(tp)
            except KafkaException as error:
                if not is_transient(error.args[0]):
                    raise
        if unserved and time.monotonic() >= deadline:
            names_left = sorted({tp.topic for tp in unserved})
            raise TimeoutError(f"partitions not served by their leader after {timeout:.0f} s: {', '.join(names_left)}")
        if unserved:
            time.sleep(0.02)
    return partitions


def create_topics(
    bootstrap: str,
    partitions: int,
    topic_prefix: str = "",
    replication: int = 1,
    extra: Iterable[tuple[str, dict]] = (),
) -> dict[str, str]:
    """Create every topic of contract §1 (``recurrence_ledger.catalogue.CATALOGUE``) as
    ``topic_prefix + name`` with ``partitions`` partitions, ``replication``
    replicas and the catalogue's ``spec.config()``.

    ``extra`` is ``(name, configs)`` pairs for internal topics (for example a
    compacted state changelog); their names are prefixed the same way and
    they get the same partition count.

    Idempotent: a topic that already exists is left as it is (its partition
    count and configs are not altered) and reported as ``"exists"``, or as
    ``"exists (N partitions)"`` when its count N differs from
    ``partitions``. Returns physical name → ``"created" | "exists" |
    "exists (N partitions)"``, in catalogue order then ``extra`` order.

    Waits for the creation futures and then until every partition of every
    one of these topics is served by its leader (:func:`wait_for_topics`),
    so that producers and consumers can use them at once. Raises ValueError
    for ``partitions`` or ``replication`` < 1,
    KafkaException for any creation error other than TOPIC_ALREADY_EXISTS
    (for example a replication factor larger than the cluster), and
    TimeoutError when partitions are not served within CREATE_TIMEOUT_S
    seconds.
    """
    if partitions < 1 or replication < 1:
        raise ValueError(f"partitions and replication must be >= 1 (got {partitions}, {replication})")
    wanted: dict[str, dict[str, str]] = {topic_prefix + spec.name: spec.config() for spec in CATALOGUE}
    for name, configs in extra:
        wanted[topic_prefix + name] = {key: str(value) for key, value in configs.items()}
    admin = admin_client(bootstrap)
    started = time.monotonic()
    # Only missing topics are requested: the broker answers a CreateTopics
    # request for an existing topic with TOPIC_AUTHORIZATION_FAILED, not
    # TOPIC_ALREADY_EXISTS, when the principal may not create it, and a
    # worker whose topics an admin created needs no Create ACL.
    present = set(_metadata(admin, CREATE_TIMEOUT_S).topics)
    missing = [name for name in wanted if name not in present]
    futures = admin.create_topics(
        [NewTopic(name, num_partitions=partitions, replication_factor=replication, config=wanted[name]) for name in missing],
        operation_timeout=CREATE_TIMEOUT_S,
        request_timeout=CREATE_TIMEOUT_S + 5,
    ) if missing else {}
    result: dict[str, str] = {}
    existing: list[str] = []
    for name in wanted:
        if name not in futures:
            result[name] = "exists"
            existing.append(name)
            continue
        try:
            futures[name].result(timeout=CREATE_TIMEOUT_S + 10)
            result[name] = "created"
        except KafkaException as error:
            if error.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise
            result[name] = "exists"
            existing.append(name)
    # Existing topics too: one may have been created a moment ago by a
    # concurrent caller and not be listed or served yet.
    counts = wait_for_topics(admin, list(wanted), max(1.0, CREATE_TIMEOUT_S - (time.monotonic() - started)))
    for name in existing:
        if counts[name] != partitions:
            result[name] = f"exists ({counts[name]} partitions)"
    return result


def check_copartitioned(bootstrap: str, topics: Sequence[str], timeout: float = 10) -> int:
    """The common partition count of the physical ``topics`` (contract §1:
    all input topics have the same partition count, so one scope's whole
    history is processed by one partition owner).

    ``timeout`` is in seconds, for the metadata request. Raises
    CoPartitionError (a ValueError) naming each topic with its partition
    count, or "missing", when the counts differ or a topic does not exist;
    ValueError when ``topics`` is empty; KafkaException when the broker does
    not answer within ``timeout``. Never creates a topic.
    """
    if not topics:
        raise ValueError("check_copartitioned needs at least one topic")
    counts = partition_counts(_metadata(admin_client(bootstrap), timeout), topics)
    distinct = set(counts.values())
    if None in distinct or len(distinct) != 1:
        listing = ", ".join(f"{name}: {'missing' if count is None else f'{count} partitions'}" for name, count in counts.items())
        problem = "missing topics, or topics this principal may not describe (see `recurrence-ledger topics acls`)" if None in distinct else "different partition counts"
        raise CoPartitionError(f"input topics are not co-partitioned ({problem}): {listing}", counts)
    return distinct.pop()


def topic_identity(bootstrap: Bootstrap, topic: str, timeout: float = 10) -> tuple[str | None, int | None]:
    """``(topic id, delete.retention.ms)`` of an existing ``topic``: its Kafka
    topic id (KIP-516: a topic deleted and created again gets a new one) and
    how long its tombstones are kept after compaction, each None when the
    broker does not tell (no DescribeConfigs permission: the worker role has
    none). Never creates a topic."""
    admin = admin_client(bootstrap)
    topic_id: str | None = None
    retention: int | None = None
    try:
        topic_id = str(admin.describe_topics(TopicCollection([topic]), request_timeout=timeout)[topic].result().topic_id)
    except KafkaException:
        pass
    try:
        configs = admin.describe_configs([ConfigResource("topic", topic)], request_timeout=timeout)
        for future in configs.values():
            retention = int(future.result()["delete.retention.ms"].value)
    except (KafkaException, KeyError, ValueError):
        pass
    return topic_id, retention


#: Group-coordinator errors that pass by themselves (the coordinator is
#: loading its partition, or moved to another broker).
_COORDINATOR_BUSY = frozenset({KafkaError.COORDINATOR_LOAD_IN_PROGRESS, KafkaError.COORDINATOR_NOT_AVAILABLE, KafkaError.NOT_COORDINATOR})


def deployment_resources(topic_prefix: str, app_id: str) -> tuple[list[str], list[str]]:
    """``(topics, consumer groups)`` of one deployment: every catalogue topic
    under ``topic_prefix`` (the repartition topic too) and the two state
    changelogs (the scope stage's and the pattern stage's); the worker's group
    ``<prefix><app_id>``, its replay group and its view followers' group
    ``<prefix><app_id>-view``."""
    group = physical(app_id, topic_prefix)
    topics = [physical(spec.name, topic_prefix) for spec in CATALOGUE]
    topics += [physical(changelog_name(app_id), topic_prefix), physical(pattern_changelog_name(app_id), topic_prefix)]
    return topics, [group, replay_group(group), view_follower_group(app_id, topic_prefix)]


def delete_deployment(bootstrap: str, topic_prefix: str, app_id: str, timeout: float = 30.0) -> dict[str, str]:
    """Delete what one deployment (``topic_prefix`` + ``app_id``) left on a
    broker: every catalogue topic under the prefix, the worker's state
    changelog ``<prefix><app_id>-ledger-state-changelog``, and the consumer
    groups ``<prefix><app_id>``, ``<prefix><app_id>-replay`` and
    ``<prefix><app_id>-view`` — the
    teardown of the Kafka Streams reset tool, for a prefix used for a trial.
    Stop the deployment's workers first (a group with members cannot be
    deleted; a group whose stopped static members' sessions have not yet
    expired is retried until they have, within ``timeout`` seconds).

    Returns name → ``"deleted"`` | ``"absent"`` | the broker's error text,
    topics first, then groups. Raises KafkaException when the broker cannot
    be reached.
    """
    admin = admin_client(bootstrap)
    names, groups = deployment_resources(topic_prefix, app_id)
    result: dict[str, str] = {}
    # The groups go first: once a group's topics are deleted the broker
    # drops its committed offsets, and an empty group without offsets may
    # vanish on its own — the report would then say "absent" by a race.
    # Workers are static group members (group.instance.id): a stopped one
    # sends no LeaveGroup, so its group stays non-empty until its session
    # times out (seconds). Retry a non-empty group until then, within ``timeout``.
    deadline = time.monotonic() + timeout
    remaining = list(groups)
    while remaining:
        retry = []
        for name, future in admin.delete_consumer_groups(remaining, request_timeout=timeout).items():
            try:
                future.result(timeout=timeout + 10)
                result[name] = "deleted"
            except KafkaException as error:
                code = error.args[0].code()
                if code == KafkaError.GROUP_ID_NOT_FOUND:
                    result[name] = "absent"
                elif (code == KafkaError.NON_EMPTY_GROUP or error.args[0].retriable() or code in _COORDINATOR_BUSY) and time.monotonic() < deadline:
                    # Non-empty (a static member's session not yet over), or
                    # the group coordinator moving or loading: both pass.
                    retry.append(name)
                else:
                    result[name] = str(error.args[0].str())
        remaining = retry
        if remaining:
            time.sleep(1.0)
    present = set(_metadata(admin, timeout).topics)
    result.update({name: "absent" for name in names if name not in present})
    wanted = [name for name in names if name in present]
    if wanted:
        for name, future in admin.delete_topics(wanted, operation_timeout=timeout, request_timeout=timeout + 5).items():
            try:
                future.result(timeout=timeout + 10)
                result[name] = "deleted"
            except KafkaException as error:
                result[name] = str(error.args[0].str())
    return {name: result[name] for name in [*names, *groups]}


def group_members(bootstrap: Bootstrap, group: str) -> int:
    """How many members the consumer group ``group`` has now (the group
    coordinator's description; 0 for a group that does not exist). Raises
    KafkaException when the broker does not answer."""
    admin = admin_client(bootstrap)  # kept referenced until its answer: a collected client never completes its futures
    try:
        description = admin.describe_consumer_groups([group], request_timeout=10)[group].result(timeout=15)
    except KafkaException as error:
        if error.args and error.args[0].code() == KafkaError.GROUP_ID_NOT_FOUND:
            return 0
        raise
    return len(description.members)
