"""How one worker process runs (:class:`WorkerConfig`), read from the process
settings by :func:`worker_config_from_env`, and the Kafka client settings
that follow from it: the input consumer (:func:`input_consumer_config`) and
the transactional producer (:func:`output_producer_config`); and the topics
it needs before it starts (:func:`prepare_topics`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from recurrence_ledger import catalogue, policy
from recurrence_ledger.catalogue import DEFAULT_MAX_OUTPUT_BYTES, MAX_MESSAGE_BYTES
from recurrence_ledger.ledger.processor import LedgerConfig
from recurrence_ledger.kafka.client_config import Bootstrap, consumer_config, producer_config
from recurrence_ledger.serde import codec
from recurrence_ledger.settings import DEFAULT_APP_ID, DEFAULT_MAX_WAIT_CAUGHT_UP_S, DEFAULT_METRICS_HOST, ENV_BOOTSTRAP_SERVERS, settings

if TYPE_CHECKING:
    from recurrence_ledger.serde.registry import RegistrySettings


@dataclass(frozen=True)
class WorkerConfig:
    """How one worker process runs.

    - ``bootstrap``: Kafka bootstrap servers, or a
      ``client_config.KafkaConnection`` (bootstrap + security settings).
    - ``app_id``: with the topic prefix, the consumer group id and the
      changelog topic's name (``<prefix><app_id>-ledger-state-changelog``);
      all workers of one deployment share it.
    - ``instance_id``: stable per worker instance; the transactional id is
      ``<group id>-<instance_id>``, so a restarted instance fences its
      previous incarnation and aborts its open transaction at once.
    - ``topic_prefix``: deployment prefix of every topic (contract §1).
    - ``output_format``: "avro" (Confluent-framed) or "json".
    - ``commit_interval_ms``: how often a transaction is committed.
    - ``exit_when_idle_s``: a batch run: stop after this many seconds without
      input, but only once every input and repartition partition of the
      group (not just this member's) has its committed offset at its end, no
      transaction open on it ("caught up", ``catch_up.CatchUp``); None runs
      forever.
    - ``max_wait_caught_up_s``: how long a batch run, idle, waits for the
      group to catch up (the partitions of a killed member come to this one
      when its session times out) while no committed offset of the group
      advances; then ``run`` raises ``NotCaughtUp`` (exit code 4).
    - ``static_membership``: join the group as a static member (KIP-345,
      ``group.instance.id`` = ``instance_id``): a restarted instance takes its
      partitions back at once, without a rebalance; a stopped one keeps them
      until ``session_timeout_ms`` passes (it sends no LeaveGroup).
    - ``session_timeout_ms``: the consumer's ``session.timeout.ms``.
    - ``create_partitions``: create missing catalogue topics with this many
      partitions before starting (None: they must exist).
    - ``metrics_port``: serve Prometheus metrics on <metrics_host>:<port>/metrics
      (``metrics_host`` 127.0.0.1 unless set).
    - ``process``: this worker's number under a supervisor (``worker
      --processes N``, ``cli.beside.supervise``): its metrics carry it as
      the ``process`` label (``runtime.metrics.WorkerMetrics``); None alone.
    - ``max_output_bytes``: largest output value (bytes, as encoded) the
      worker produces. An input record whose outputs include a larger one is
      not applied: the transaction is rewound and the record goes to
      dead-letter as ``oversized_output`` (Kafka would refuse the output,
      and every restart would fail on it again). Default: the producer's
      message.max.bytes (16 MiB) less 64 KiB for the key and record overhead.
    - ``max_state_bytes``: largest state record (bytes, as serialized on the
      changelog); an input record that grows one past it is dead-lettered
      as ``oversized_output`` (``runtime.state_limit``). Default and
      maximum: ``max_output_bytes``' default, Kafka's limit for the changelog.
    - ``schema_registry``: frame Avro values with a Schema Registry's ids
      (``recurrence_ledger.serde.registry``); None: the fixed ids.
    - ``accept_unicode_change``: start even when a partition's state was
      built on another Unicode version than this runtime's, and record this
      runtime's (contract §10; without it the worker refuses to start,
      ``recurrence_ledger.runtime.unicode_pin``).
    - ``accept_holdout_change``: start even when a partition's state was
      built under another holdout policy (salt and rate, contract §21.5),
      and record this worker's (without it the worker refuses to start,
      ``recurrence_ledger.ledger.state.pin_holdout_policy``).
    - ``state_dir``: keep each partition's state in RocksDB under this
      directory (``<state_dir>/<changelog topic>/<partition>``,
      ``store.rocksdb``), so a restart restores only the changelog's
      tail and the state need not fit in memory; None (the default): in
      memory, restored from the whole changelog on every start.
    - ``reseed_changelog``: with ``state_dir``, a partition whose changelog
      is empty while the group has committed offsets (the topic deleted and
      created again) writes its intact local store back to the changelog
      (``runtime.reseed``) instead of refusing to run
      (``runtime.changelog_guard``) — either stage's: the ledger's
      changelog and the pattern stage's (contract §23.5).

    The Redis view is not the worker's: a view follower into Redis runs in
    the same process through ``recurrence_ledger.cli.beside`` (``worker
    --redis-url``), or apart (``view follow``). ``repr`` shows no secret:
    the Kafka connection and the registry settings redact their own.
    """

    bootstrap: Bootstrap
    app_id: str = DEFAULT_APP_ID
    instance_id: str = field(default_factory=lambda: settings().worker_instance_id)
    topic_prefix: str = ""
    output_format: str = codec.AVRO
    commit_interval_ms: int = policy.COMMIT_INTERVAL_MS.default
    max_batch: int = policy.MAX_BATCH.default
    exit_when_idle_s: float | None = None
    max_wait_caught_up_s: float = DEFAULT_MAX_WAIT_CAUGHT_UP_S
    static_membership: bool = True
    session_timeout_ms: int = 10_000
    create_partitions: int | None = None
    metrics_port: int | None = None
    metrics_host: str = DEFAULT_METRICS_HOST
    max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES
    max_state_bytes: int = DEFAULT_MAX_OUTPUT_BYTES
    ledger: LedgerConfig = field(default_factory=LedgerConfig)
    schema_registry: RegistrySettings | None = None  # its repr redacts credentials
    accept_unicode_change: bool = False
    accept_holdout_change: bool = False
    state_dir: Path | None = None
    reseed_changelog: bool = False
    process: str | None = None

    @property
    def group_id(self) -> str:
        """Consumer group id: the prefixed app_id (Kafka Streams' application.id)."""
        return catalogue.physical(self.app_id, self.topic_prefix)

    @property
    def changelog_name(self) -> str:
        """Logical name of the state changelog topic."""
        return catalogue.changelog_name(self.app_id)

    @property
    def changelog_topic(self) -> str:
        """Physical name of the state changelog topic (compacted)."""
        return catalogue.physical(self.changelog_name, self.topic_prefix)

    @property
    def pattern_changelog_name(self) -> str:
        """Logical name of the pattern stage's state changelog (contract §23.5)."""
        return catalogue.pattern_changelog_name(self.app_id)

    @property
    def pattern_changelog_topic(self) -> str:
        """Physical name of the pattern stage's state changelog (compacted)."""
        return catalogue.physical(self.pattern_changelog_name, self.topic_prefix)


def worker_config_from_env(ledger: LedgerConfig | None = None, **overrides: Any) -> WorkerConfig:
    """WorkerConfig from the process settings (KAFKA_BOOTSTRAP_SERVERS,
    RL_TOPIC_PREFIX, RL_APP_ID, RL_INSTANCE_ID, SCHEMA_REGISTRY_URL,
    RL_ACCEPT_UNICODE_CHANGE, RL_ACCEPT_HOLDOUT_CHANGE, RL_STATE_DIR; see ``recurrence_ledger.settings``), then
    ``overrides`` (None values ignored; a ``bootstrap`` override — a
    connection loaded from a client properties file — stands in for
    KAFKA_BOOTSTRAP_SERVERS). Raises ValueError when no bootstrap servers
    are configured."""
    env = settings()
    bootstrap = overrides.pop("bootstrap", None) or env.bootstrap_servers
    if not bootstrap:
        raise ValueError(f"{ENV_BOOTSTRAP_SERVERS} is not set")
    config = WorkerConfig(
        bootstrap=bootstrap,
        app_id=env.app_id,
        instance_id=env.worker_instance_id,
        topic_prefix=env.topic_prefix,
        ledger=ledger or LedgerConfig(),
        accept_unicode_change=env.accept_unicode_change,
        accept_holdout_change=env.accept_holdout_change,
        state_dir=env.state_dir,
    )
    if env.schema_registry_url:
        from recurrence_ledger.serde.registry import registry_settings

        config = replace(config, schema_registry=registry_settings(env.schema_registry_url))
    return replace(config, **{name: value for name, value in overrides.items() if value is not None})


def input_consumer_config(bootstrap: Bootstrap, group_id: str, instance_id: str | None = None, session_timeout_ms: int = 10_000) -> dict:
    """The worker's consumer settings for the input topics (also the
    benchmark's passthrough baseline, so both read the same way). With
    ``instance_id``, a static member (KIP-345 ``group.instance.id``)."""
    static = {"group.instance.id": instance_id} if instance_id else {}
    return consumer_config(bootstrap, group_id, {
        "auto.offset.reset": "earliest",
        # Range assigns partition p of every subscribed topic to the same
        # member: co-partitioning (contract §1).
        "partition.assignment.strategy": "range",
        "enable.partition.eof": False,
        "session.timeout.ms": session_timeout_ms,
        "heartbeat.interval.ms": min(1_000, session_timeout_ms // 3),
        **static,
    })


#: Linger of the worker's transactional producer (ms). Its records are
#: visible to ``read_committed`` readers only once the transaction commits,
#: and ``commit_transaction`` flushes what is still lingering at once
#: (librdkafka's flush overrides ``linger.ms`` since v1.8, librdkafka#3489),
#: so lingering delays nothing but the commit's last send: a transaction's
#: records go out in fewer, larger produce requests, less work for the broker
#: and for librdkafka's threads (docs/kafka.md, "Commits and latency", has
#: the figures). Kafka Streams' producers linger 100 ms too (StreamsConfig's
#: producer default).
OUTPUT_LINGER_MS = 100


def output_producer_config(config: WorkerConfig) -> dict:
    """The worker's transactional producer: ``transactional.id`` =
    ``<group id>-<instance id>`` (the same instance id as the consumer's
    ``group.instance.id``, so a restarted instance fences its previous
    incarnation on both: the broker refuses the old consumer,
    FENCED_INSTANCE_ID, and the old producer, by an epoch bump)."""
    return producer_config(config.bootstrap, f"{config.group_id}-{config.instance_id}", {
        "transaction.timeout.ms": 30_000,
        # Large state records (a scope's heads, a long streak run) and
        # RecurrenceMatches over thousands of heads: the changelog and
        # ledger topics are created with max.message.bytes to match.
        "message.max.bytes": MAX_MESSAGE_BYTES,
        "compression.type": "lz4",
        "linger.ms": OUTPUT_LINGER_MS,
        # Never create a topic by producing to it (librdkafka's producer
        # default is to ask the broker to): the worker's topics are created
        # by prepare_topics with their settings, and a changelog deleted
        # under a running worker must stay gone for the changelog guard to
        # see, not come back with the broker's defaults (not compacted).
        "allow.auto.create.topics": False,
    })


def prepare_topics(config: WorkerConfig) -> int:
    """Refuse to start unless the input topics are co-partitioned; create
    missing output topics, the repartition topic and the two changelogs
    (the scope stage's and the pattern stage's, contract §23.5) with the
    same partition count; check they all agree. Returns the partition count. With
    ``config.create_partitions`` set, missing catalogue topics are first
    created with that many partitions (a fresh deployment).

    Raises ``recurrence_ledger.kafka.kafka_admin.CoPartitionError`` with every topic's
    count when they differ or an input topic is missing.
    """
    from recurrence_ledger.kafka.kafka_admin import check_copartitioned, create_topics

    prefix = config.topic_prefix
    if config.create_partitions:
        create_topics(config.bootstrap, config.create_partitions, prefix)
    inputs = [catalogue.physical(name, prefix) for name in catalogue.INPUT_TOPICS]
    partitions = check_copartitioned(config.bootstrap, inputs)
    changelog_config = {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.1", "max.message.bytes": str(MAX_MESSAGE_BYTES)}
    create_topics(config.bootstrap, partitions, prefix,
                  extra=[(config.changelog_name, changelog_config), (config.pattern_changelog_name, changelog_config)])
    outputs = [catalogue.physical(name, prefix) for name in (*catalogue.OUTPUT_TOPICS, *catalogue.INTERNAL_TOPICS)]
    return check_copartitioned(config.bootstrap, [*inputs, *outputs, config.changelog_topic, config.pattern_changelog_topic])
