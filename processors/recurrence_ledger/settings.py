"""Process settings: one frozen object built from the environment.

Every environment variable the product reads is named here once, as a
constant, and read in one place: :func:`settings` builds a frozen
:class:`Settings` (a pydantic-settings ``BaseSettings``, like quixstreams'
``ApplicationConfig``) the first time it is called in a process and returns
the same object afterwards. CLI options name the same constants as their
``envvar``, so an option and its variable cannot drift apart. Nothing else in
the package reads ``os.environ``; helpers that need a value take it as an
argument.
"""

from __future__ import annotations

import functools
import os
import signal
import socket
from pathlib import Path

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

#: Kafka bootstrap servers; when set, ``run`` is the Kafka worker.
ENV_BOOTSTRAP_SERVERS = "KAFKA_BOOTSTRAP_SERVERS"
#: Kafka client properties file (Java ``client.properties`` format: security
#: protocol, SASL credentials, trust store); other ``KAFKA_*`` variables
#: override its settings (``recurrence_ledger.kafka.client_config``).
ENV_KAFKA_CONFIG_FILE = "KAFKA_CONFIG_FILE"
#: Prefix of the environment variables that override Kafka client settings.
KAFKA_ENV_PREFIX = "KAFKA_"
#: Redis holding the statistics view: a redis-py URL, ``redis://`` (with
#: ``user:password@`` for an ACL user), ``rediss://`` (TLS), ``unix://``, or
#: ``redis+cluster://`` / ``rediss+cluster://`` for Redis Cluster
#: (``recurrence_ledger.read.connect``).
ENV_REDIS_URL = "REDIS_URL"
#: CA certificates (PEM file) that verify a ``rediss://`` Redis whose URL
#: has no ``ssl_ca_certs``.
ENV_REDIS_CA_FILE = "RL_REDIS_CA_FILE"
#: Bearer token of the read API (``serve``); without one the API serves
#: anyone who reaches its port, so it binds loopback only.
ENV_API_TOKEN = "RL_API_TOKEN"
#: File holding the read API's bearer token (instead of RL_API_TOKEN).
ENV_API_TOKEN_FILE = "RL_API_TOKEN_FILE"
#: File of the API's reviewer tokens (TOML: ``[reviewers]``, reviewer name
#: = token; ``recurrence_ledger.api.settings.read_reviewer_tokens``): who may
#: post review decisions (contract §18), each token naming its reviewer.
ENV_REVIEWER_TOKENS_FILE = "RL_REVIEWER_TOKENS_FILE"
#: Deployment prefix of every topic, consumer group and Redis namespace.
ENV_TOPIC_PREFIX = "RL_TOPIC_PREFIX"
#: Application id: consumer group and changelog name (Kafka Streams' application.id).
ENV_APP_ID = "RL_APP_ID"
#: Stable id of one worker instance (its transactional id suffix).
ENV_INSTANCE_ID = "RL_INSTANCE_ID"
#: Port of the worker's Prometheus endpoint.
ENV_METRICS_PORT = "RL_METRICS_PORT"
#: Address the Prometheus endpoint listens on: loopback unless a scraper on
#: another host (a Kubernetes pod's Prometheus) must reach it.
ENV_METRICS_HOST = "RL_METRICS_HOST"
DEFAULT_METRICS_HOST = "127.0.0.1"
# The ledger policy's and the runtime batching's variables (RL_REVIEW_THRESHOLD,
# RL_MAX_BATCH, ...) are named with their settings in recurrence_ledger.policy.
#: Start although the deployment's state was built on another Unicode version (contract §10).
ENV_ACCEPT_UNICODE_CHANGE = "RL_ACCEPT_UNICODE_CHANGE"
ENV_ACCEPT_HOLDOUT_CHANGE = "RL_ACCEPT_HOLDOUT_CHANGE"
#: Directory of the worker's RocksDB partition stores (``--state-dir``;
#: ``recurrence_ledger.store.rocksdb``); unset: state in memory.
ENV_STATE_DIR = "RL_STATE_DIR"
#: Verdicts kept per revision in the history read model (``recurrence_ledger.read.history``).
ENV_HISTORY_LIMIT = "RL_HISTORY_LIMIT"
#: Trend points kept per scope in the trend read model.
ENV_TREND_LIMIT = "RL_TREND_LIMIT"
#: Log level of the worker (Python logging level name).
ENV_LOG_LEVEL = "RL_LOG_LEVEL"
#: Test hook of the worker: where to kill itself (``recurrence_ledger.runtime.worker``).
ENV_FAULT_INJECT = "RL_FAULT_INJECT"
#: Schema Registry (Confluent-compatible API); when set, Avro values carry its
#: schema ids instead of the fixed ones (``recurrence_ledger.serde.registry``).
ENV_SCHEMA_REGISTRY_URL = "SCHEMA_REGISTRY_URL"

#: Default application id.
DEFAULT_APP_ID = "recurrence-ledger"
#: Seconds a batch run (``--exit-when-idle``) waits, idle, for its group to
#: catch up by default (``recurrence_ledger.runtime.catch_up``).
DEFAULT_MAX_WAIT_CAUGHT_UP_S = 120.0
#: Default Redis of the read side.
DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"


class Settings(BaseSettings):
    """What the environment says, read once per process and frozen.

    Fields (all optional in the environment): ``bootstrap_servers`` (str or
    None), ``kafka_config_file`` (Path or None), ``redis_url`` (str or None), ``topic_prefix`` (str, default ""),
    ``app_id`` (str), ``instance_id`` (str or None; :attr:`worker_instance_id`
    falls back to the host name), ``log_level`` (str), ``fault_inject`` (str
    or None), ``schema_registry_url`` (str or None), ``redis_ca_file``
    (Path or None), ``api_token`` (SecretStr or None: never shown in a repr),
    ``api_token_file`` (Path or None), ``reviewer_tokens_file`` (Path or None), ``state_dir`` (Path or None). Empty variables count as unset. Raises ``pydantic.ValidationError`` for a value of the wrong
    type.
    """

    model_config = SettingsConfigDict(frozen=True, env_ignore_empty=True, extra="ignore", populate_by_name=True)

    bootstrap_servers: str | None = Field(None, validation_alias=ENV_BOOTSTRAP_SERVERS)
    kafka_config_file: Path | None = Field(None, validation_alias=ENV_KAFKA_CONFIG_FILE)
    redis_url: str | None = Field(None, validation_alias=ENV_REDIS_URL)
    topic_prefix: str = Field("", validation_alias=ENV_TOPIC_PREFIX)
    app_id: str = Field(DEFAULT_APP_ID, validation_alias=ENV_APP_ID)
    instance_id: str | None = Field(None, validation_alias=ENV_INSTANCE_ID)
    log_level: str = Field("INFO", validation_alias=ENV_LOG_LEVEL)
    accept_unicode_change: bool = Field(False, validation_alias=ENV_ACCEPT_UNICODE_CHANGE)
    accept_holdout_change: bool = Field(False, validation_alias=ENV_ACCEPT_HOLDOUT_CHANGE)
    fault_inject: str | None = Field(None, validation_alias=ENV_FAULT_INJECT)
    schema_registry_url: str | None = Field(None, validation_alias=ENV_SCHEMA_REGISTRY_URL)
    redis_ca_file: Path | None = Field(None, validation_alias=ENV_REDIS_CA_FILE)
    api_token: SecretStr | None = Field(None, validation_alias=ENV_API_TOKEN)
    api_token_file: Path | None = Field(None, validation_alias=ENV_API_TOKEN_FILE)
    reviewer_tokens_file: Path | None = Field(None, validation_alias=ENV_REVIEWER_TOKENS_FILE)
    state_dir: Path | None = Field(None, validation_alias=ENV_STATE_DIR)

    @property
    def worker_instance_id(self) -> str:
        """The instance id, or this host's name when none is set."""
        return self.instance_id or socket.gethostname()


@functools.cache
def settings() -> Settings:
    """The process's :class:`Settings`, built from the environment on the
    first call and shared afterwards (tests that change the environment run
    the product in a subprocess, or call ``settings.cache_clear()``)."""
    return Settings()


@functools.cache
def kafka_environment() -> dict[str, str]:
    """Every ``KAFKA_*`` environment variable of the process, read once like
    :func:`settings`: the Kafka client overrides
    (``recurrence_ledger.kafka.client_properties.env_overrides`` picks the
    settings among them)."""
    return {name: value for name, value in os.environ.items() if name.startswith(KAFKA_ENV_PREFIX)}


#: Libraries whose INFO lines say nothing an operator needs (httpx, or httpx2 as
#: newer confluent-kafka clients use it, logs one
#: line per Schema Registry request): shown from WARNING on.
QUIET_LOGGERS = ("httpx", "httpcore", "httpx2", "httpcore2")


#: The signals that stop a long-running process of ours — the worker, the
#: ``worker --processes`` supervisor, the view follower — as SIGTERM does
#: (a worker commits its open transaction first): SIGINT is Ctrl-C, SIGHUP a
#: closed terminal (a JVM's shutdown hooks run on the same three).
STOP_SIGNALS: tuple[signal.Signals, ...] = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def configure_logging(process: str | None = None) -> None:
    """Log to stderr at ``RL_LOG_LEVEL`` (``Settings.log_level``) as
    ``time level logger: message`` — ``time level logger [process N]:
    message`` in worker process ``process`` of a ``worker --processes``
    supervisor, whose processes share one stderr — with
    :data:`QUIET_LOGGERS` at WARNING; for the long-running commands
    (worker, view follower)."""
    import logging

    where = f" [process {process}]" if process is not None else ""
    logging.basicConfig(level=settings().log_level, format=f"%(asctime)s %(levelname)s %(name)s{where}: %(message)s")
    for name in QUIET_LOGGERS:
        logging.getLogger(name).setLevel(max(logging.WARNING, logging.getLogger().level))
