"""The ACL bindings each role of a deployment needs on a cluster whose
authorizer denies what no ACL allows (``allow.everyone.if.no.acl.found=false``).

A deployment is its topic prefix and app id (group ``<prefix><app_id>``,
contract §1). Roles, each for one principal:

- ``worker``: what ``recurrence-ledger worker`` does — Read the input
  topics, Write the output topics, Read+Write the internal repartition
  topic (contract §23.5: the scope stage writes it, the pattern stage
  reads it), Read+Write its state changelogs
  ``<prefix><app_id>-ledger-state-changelog`` and
  ``<prefix><app_id>-pattern-state-changelog`` and Create them (the worker
  creates the changelogs with the inputs' partition count on its first
  start); Read the consumer group ``<prefix><app_id>`` and Describe its
  ``<prefix><app_id>-restore`` group (the changelog restore consumer
  assigns partitions and commits nothing, but librdkafka looks up the
  coordinator of any group.id, which needs Describe); Write+Describe the
  transactional ids ``<prefix><app_id>-*`` (the worker's transactional.id
  is ``<group>-<instance id>``, prefixed pattern). With ``create_topics``
  (the worker's ``--create-topics``), Create on every catalogue topic too;
  without it an admin creates them (``topics create``). No IdempotentWrite
  on the cluster: a transactional producer is authorized by its
  TransactionalId Write (and brokers ≥ 3.0 allow an idempotent producer
  Write on any topic, KIP-679).
- ``upstream``: what an upstream producer (``recurrence-ledger publish``)
  needs — Write on the input topics but ``review-decisions``, nothing
  else (human decisions are the reviewer's; contract §18 accepts a
  ReviewDecision on ``source-journal`` too, so whoever may write
  ``source-journal`` can still publish one there).
- ``reviewer``: what a reviewer's client needs (``recurrence-ledger
  review``; the API process that publishes the decisions of
  ``POST /review-candidates/{id}/decision``) — Write on
  ``review-decisions`` and no other topic; Read on ``review-candidates``,
  ``review-status`` and ``recurrence-statistics`` (``review list``, ``show``
  and the checks of ``approve`` / ``reject`` read them whole) and Describe
  on the group ``recurrence-ledger-export`` (kafka_io.READER_GROUP_ID, as
  the reader's). The API process itself needs only the Write.
- ``reader``: ``export``, ``rebuild``, ``explain``, ``view rebuild`` — Read on
  every catalogue topic; Describe on the group ``recurrence-ledger-export``
  (kafka_io.READER_GROUP_ID: assign only, no offsets committed) and on the
  view followers' group ``<prefix><app_id>-view`` (a rebuild of the Redis
  view refuses to start while it has members).
- ``replay``: ``replay`` — the reader's ACLs, Write on the output topics (an
  idempotent producer) and Describe on the group ``<prefix><app_id>-replay``
  and on the workers' group ``<prefix><app_id>`` (its committed offsets
  bound the replay).
- ``follower``: the view follower (``view follow``) — Read on the topics it
  consumes (``catalogue.FOLLOWED_TOPICS``: the view topics
  ``recurrence-statistics``, ``revision-statistics``, ``review-status`` and
  ``signature-patterns`` and the ledger topics ``recurrence-observations`` and ``review-candidates``) and Read on
  its consumer group ``<prefix><app_id>-view``
  (``catalogue.view_follower_group``: it commits offsets there); nothing
  else (it writes only Redis).

Every topic binding is LITERAL (one topic name each); only the
transactional ids are PREFIXED. :func:`kafka_acls_commands` prints them as
``kafka-acls`` command lines; :func:`apply_acls` creates them with the Admin
API and :func:`describe_acls` reads a principal's bindings back.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from recurrence_ledger.kafka.client_config import Bootstrap
from recurrence_ledger.kafka.kafka_io import READER_GROUP_ID
from recurrence_ledger import catalogue

#: Roles :func:`role_acls` knows.
ROLES = ("worker", "upstream", "reader", "replay", "follower", "reviewer")
#: What the reviewer role reads (the ``review`` commands; module docstring).
REVIEWER_READS = (catalogue.REVIEW_CANDIDATES, catalogue.REVIEW_STATUS, catalogue.STATISTICS)
#: Seconds an ACL request may take.
ACL_TIMEOUT_S = 30.0

_CLI_OPERATIONS = {"READ": "Read", "WRITE": "Write", "CREATE": "Create", "DESCRIBE": "Describe", "IDEMPOTENT_WRITE": "IdempotentWrite"}
_CLI_RESOURCES = {"TOPIC": "--topic", "GROUP": "--group", "TRANSACTIONAL_ID": "--transactional-id", "CLUSTER": "--cluster"}


@dataclass(frozen=True, order=True)
class Acl:
    """One ALLOW binding: ``principal`` (``User:NAME``) may do ``operation``
    (READ, WRITE, CREATE, DESCRIBE, IDEMPOTENT_WRITE) on the resource
    ``resource_type`` (TOPIC, GROUP, TRANSACTIONAL_ID, CLUSTER) named
    ``name`` with ``pattern`` (LITERAL or PREFIXED), from any host."""

    resource_type: str
    name: str
    pattern: str
    operation: str
    principal: str

    def kafka_acls(self, bootstrap: str = "BOOTSTRAP", command_config: str = "admin.properties") -> str:
        """This binding as one ``kafka-acls --add`` command line."""
        resource = "--cluster" if self.resource_type == "CLUSTER" else f"{_CLI_RESOURCES[self.resource_type]} {_quote(self.name)}"
        pattern = " --resource-pattern-type prefixed" if self.pattern == "PREFIXED" else ""
        return (
            f"kafka-acls --bootstrap-server {bootstrap} --command-config {command_config} --add "
            f"--allow-principal {_quote(self.principal)} --operation {_CLI_OPERATIONS[self.operation]} {resource}{pattern}"
        )


def _quote(text: str) -> str:
    return text if all(c.isalnum() or c in "._-:/=@" for c in text) and text else "'" + text.replace("'", "'\\''") + "'"


def _topics(principal: str, names: Iterable[str], operations: Sequence[str]) -> list[Acl]:
    return [Acl("TOPIC", name, "LITERAL", operation, principal) for name in names for operation in operations]


def role_acls(role: str, principal: str, topic_prefix: str = "", app_id: str = "recurrence-ledger", create_topics: bool = False) -> list[Acl]:
    """The bindings ``principal`` needs for ``role`` (see the module
    docstring) in the deployment ``topic_prefix`` + ``app_id``, in a stable
    order: topics (inputs, outputs, changelog), groups, transactional ids.
    Raises ValueError for an unknown role or a principal without a type."""
    if role not in ROLES:
        raise ValueError(f"unknown role {role!r}; one of {', '.join(ROLES)}")
    if ":" not in principal or not principal.split(":", 1)[1]:
        raise ValueError(f"principal {principal!r} must be TYPE:NAME, e.g. User:ledger")
    inputs = [catalogue.physical(name, topic_prefix) for name in catalogue.INPUT_TOPICS]
    outputs = [catalogue.physical(name, topic_prefix) for name in catalogue.OUTPUT_TOPICS]
    everything = [catalogue.physical(spec.name, topic_prefix) for spec in catalogue.CATALOGUE]
    if role == "upstream":
        return _topics(principal, [name for name in inputs if name != catalogue.physical(catalogue.REVIEW_DECISIONS, topic_prefix)], ("WRITE",))
    if role == "follower":
        followed = [catalogue.physical(name, topic_prefix) for name in catalogue.FOLLOWED_TOPICS]
        return _topics(principal, followed, ("READ",)) + [Acl("GROUP", catalogue.view_follower_group(app_id, topic_prefix), "LITERAL", "READ", principal)]
    group = catalogue.physical(app_id, topic_prefix)
    reader_group = Acl("GROUP", READER_GROUP_ID, "LITERAL", "DESCRIBE", principal)
    if role == "reviewer":
        decisions = catalogue.physical(catalogue.REVIEW_DECISIONS, topic_prefix)
        reads = [catalogue.physical(name, topic_prefix) for name in REVIEWER_READS]
        return _topics(principal, [decisions], ("WRITE",)) + _topics(principal, reads, ("READ",)) + [reader_group]
    if role == "reader":
        followers = Acl("GROUP", catalogue.view_follower_group(app_id, topic_prefix), "LITERAL", "DESCRIBE", principal)
        return _topics(principal, everything, ("READ",)) + [reader_group, followers]
    if role == "replay":
        replay_group = Acl("GROUP", catalogue.replay_group(group), "LITERAL", "DESCRIBE", principal)
        worker_group = Acl("GROUP", group, "LITERAL", "DESCRIBE", principal)  # its committed offsets bound the replay
        return _topics(principal, everything, ("READ",)) + _topics(principal, outputs, ("WRITE",)) + [reader_group, replay_group, worker_group]
    changelogs = [catalogue.physical(name(app_id), topic_prefix) for name in (catalogue.changelog_name, catalogue.pattern_changelog_name)]
    internal = [catalogue.physical(name, topic_prefix) for name in catalogue.INTERNAL_TOPICS]
    acls = _topics(principal, inputs, ("READ",)) + _topics(principal, outputs, ("WRITE",))
    acls += _topics(principal, internal, ("READ", "WRITE"))  # the repartition topic: the scope stage writes it, the pattern stage reads it
    acls += _topics(principal, changelogs, ("READ", "WRITE", "CREATE"))
    if create_topics:
        acls += _topics(principal, everything, ("CREATE",))
    acls.append(Acl("GROUP", group, "LITERAL", "READ", principal))
    acls.append(Acl("GROUP", f"{group}-restore", "LITERAL", "DESCRIBE", principal))
    acls += [Acl("TRANSACTIONAL_ID", f"{group}-", "PREFIXED", operation, principal) for operation in ("WRITE", "DESCRIBE")]
    return acls


def kafka_acls_commands(acls: Iterable[Acl], bootstrap: str = "BOOTSTRAP", command_config: str = "admin.properties") -> list[str]:
    """One ``kafka-acls --add`` command line per binding."""
    return [acl.kafka_acls(bootstrap, command_config) for acl in acls]


def _binding(acl: Acl):  # noqa: ANN202 - confluent_kafka.admin.AclBinding
    from confluent_kafka.admin import AclBinding, AclOperation, AclPermissionType, ResourcePatternType, ResourceType

    name = "kafka-cluster" if acl.resource_type == "CLUSTER" else acl.name
    return AclBinding(
        ResourceType[acl.resource_type], name, ResourcePatternType[acl.pattern],
        acl.principal, "*", AclOperation[acl.operation], AclPermissionType.ALLOW,
    )


def apply_acls(bootstrap: Bootstrap, acls: Sequence[Acl]) -> dict[Acl, str]:
    """Create ``acls`` with the Admin API (``create_acls``; creating a
    binding that exists is a no-op). Returns each binding → "created" or the
    broker's error text (e.g. CLUSTER_AUTHORIZATION_FAILED when the
    connection's principal may not alter ACLs)."""
    from confluent_kafka import KafkaException

    from recurrence_ledger.kafka.kafka_admin import admin_client

    admin = admin_client(bootstrap)
    futures = admin.create_acls([_binding(acl) for acl in acls], request_timeout=ACL_TIMEOUT_S)
    result: dict[Acl, str] = {}
    for acl, future in zip(acls, futures.values(), strict=True):
        try:
            future.result(timeout=ACL_TIMEOUT_S + 5)
            result[acl] = "created"
        except KafkaException as error:
            # The broker's text can be a long dump of the request: its code
            # (e.g. CLUSTER_AUTHORIZATION_FAILED) says what went wrong.
            result[acl] = f"{error.args[0].name()}: {error.args[0].str()[:160]}"
    return result


def describe_acls(bootstrap: Bootstrap, principal: str) -> list[Acl]:
    """Every ALLOW binding of ``principal`` on the cluster, sorted (the Admin
    API's ``describe_acls`` with a filter on the principal)."""
    from confluent_kafka.admin import AclBindingFilter, AclOperation, AclPermissionType, ResourcePatternType, ResourceType

    from recurrence_ledger.kafka.kafka_admin import admin_client

    admin = admin_client(bootstrap)
    query = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, principal, None, AclOperation.ANY, AclPermissionType.ALLOW)
    bindings = admin.describe_acls(query, request_timeout=ACL_TIMEOUT_S).result(timeout=ACL_TIMEOUT_S + 5)
    return sorted(
        Acl(
            binding.restype.name, "" if binding.restype.name == "CLUSTER" else binding.name,
            binding.resource_pattern_type.name, binding.operation.name, binding.principal,
        )
        for binding in bindings
    )
