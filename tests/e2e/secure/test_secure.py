"""The product on a secured cluster (deploy/kafka.sh --secure: SASL_SSL with
SCRAM-SHA-512, mTLS, ACLs enforced): a worker whose principal has only the
ACLs ``topics acls`` prints runs a journal end to end with the embedded
runner's outputs; an upstream producer cannot touch what is not its own;
a reviewer (``topics acls --role reviewer``) decides with ``review approve``,
may write ``review-decisions`` and no other topic, and the worker reads
its decision; no secret appears in any output; bad credentials, an untrusted CA and an
unreachable bootstrap fail fast with a clear message."""

from __future__ import annotations

import json
import subprocess
import time
import urllib.request
import uuid

import pytest
from confluent_kafka import OFFSET_BEGINNING, ConsumerGroupTopicPartitions, Consumer, KafkaError, Producer, TopicPartition

from recurrence_ledger.kafka.acls import describe_acls, role_acls
from recurrence_ledger.kafka.client_config import client_config
from recurrence_ledger.kafka.kafka_admin import admin_client
from recurrence_ledger import catalogue
from recurrence_ledger.read.projection import RedisView
from recurrence_ledger.read.keys import default_namespace
from tests.conftest import REPO, case
from tests.e2e import harness
from tests.plugins.processes import free_port, run_cli
from tests.plugins.secure import ScramUser, SecureBroker, delete_prefix

#: The journal cases and how the worker connects: SCRAM over SASL_SSL, or the
#: client certificate CN=ledger (same principal, User:ledger) over SSL.
RUNS = [("minimum_case", "ledger"), ("worked_example", "ledger"), ("worked_example", "ledger-mtls")]
#: Bound on how long a failing connection may take to fail (seconds).
FAIL_FAST_S = 30.0


def ok(result: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert result.returncode == 0, result.stdout + result.stderr
    return result


@pytest.fixture(scope="module", params=RUNS, ids=[f"{name}-{who}" for name, who in RUNS])
def pipeline(request, secure: SecureBroker, tmp_path_factory):
    """One deployment run as the brief's operators would: admin creates the
    topics and applies the ACLs the product prints for User:ledger (worker)
    and User:upstream (upstream); upstream publishes; the worker runs as
    User:ledger until idle (metrics endpoint on); admin exports."""
    name, who = request.param
    journal, _ = case(name)
    prefix = f"s{uuid.uuid4().hex[:8]}."
    tmp = tmp_path_factory.mktemp(f"{name}-{who}")
    admin = secure.files["admin"]
    texts: list[str] = []

    def cli(*args: str) -> subprocess.CompletedProcess:
        result = ok(run_cli(*args))
        texts.extend((result.stdout, result.stderr))
        return result

    try:
        cli("topics", "create", "--kafka-config", admin, "--topic-prefix", prefix, "--partitions", "3")
        cli("topics", "acls", "--principal", "User:ledger", "--topic-prefix", prefix, "--app-id", "ledger", "--apply", "--kafka-config", admin)
        cli("topics", "acls", "--principal", "User:upstream", "--role", "upstream", "--topic-prefix", prefix, "--apply", "--kafka-config", admin)
        cli("publish", journal, "--kafka-config", secure.files["upstream"], "--topic-prefix", prefix)

        log = tmp / "worker.log"
        port = free_port()
        connection = secure.connections[who]
        worker = harness.start_worker(
            connection.bootstrap, prefix, log, app_id="ledger", idle_exit=3.0,
            extra=("--kafka-config", str(secure.files[who]), "--metrics-port", str(port)),
        )
        metrics = ""
        while worker.poll() is None and not metrics:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as response:
                    metrics = response.read().decode()
            except OSError:
                time.sleep(0.2)
        assert harness.wait_exit(worker, 120, log) == 0, log.read_text()[-3000:]
        texts.extend((log.read_text(), metrics))

        cli("export", "recurrence-observations", "--out", tmp / "observations.jsonl", "--kafka-config", admin, "--topic-prefix", prefix)
        kafka = harness.exported(secure.admin, prefix, tmp / "kafka")
        reference = harness.embedded(journal, tmp / "embedded")
        yield {"prefix": prefix, "case": name, "kafka": kafka, "reference": reference, "texts": texts, "metrics": metrics, "log": log,
               "exported_observations": (tmp / "observations.jsonl").read_bytes()}
    finally:
        delete_prefix(secure.admin, prefix)


def test_worker_with_only_the_printed_acls_equals_run_journal(pipeline):
    for topic in harness.LEDGER_TOPICS:
        assert pipeline["kafka"][topic] == pipeline["reference"][topic], topic
    assert pipeline["kafka"]["dead-letter"] == b""
    assert pipeline["exported_observations"] == pipeline["reference"]["recurrence-observations"]
    assert "assigned partitions" in pipeline["log"].read_text()


def test_no_secret_in_any_output(pipeline, secure: SecureBroker):
    assert "recurrence_ledger_" in pipeline["metrics"] or "records" in pipeline["metrics"], "the metrics endpoint was not scraped"
    for text in pipeline["texts"]:
        for user, password in secure.passwords.items():
            assert password not in text, f"{user}'s password in an output"


def test_upstream_may_not_write_outputs_or_read_the_changelog(pipeline, secure: SecureBroker):
    prefix = pipeline["prefix"]
    upstream = secure.connections["upstream"]
    observations = catalogue.physical(catalogue.OBSERVATIONS, prefix)
    before = harness.count_records(secure.admin, observations)

    reports: list[KafkaError | None] = []
    producer = Producer({**client_config(upstream), "acks": "all", "message.timeout.ms": 20_000})
    producer.produce(observations, key=b"x", value=b"{}", partition=0, on_delivery=lambda error, _: reports.append(error))
    producer.flush(30)
    assert len(reports) == 1 and reports[0] is not None, reports
    assert reports[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, reports[0]
    assert harness.count_records(secure.admin, observations) == before

    changelog = catalogue.physical(catalogue.changelog_name("ledger"), prefix)
    consumer = Consumer({**client_config(upstream), "group.id": f"{prefix}upstream-probe", "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(changelog, 0, OFFSET_BEGINNING)])
        deadline = time.monotonic() + 20
        error = None
        while time.monotonic() < deadline and error is None:
            message = consumer.poll(0.5)
            if message is not None:
                assert message.error() is not None, "upstream read a changelog record"
                error = message.error()
        assert error is not None and error.code() in (KafkaError.TOPIC_AUTHORIZATION_FAILED, KafkaError.GROUP_AUTHORIZATION_FAILED), error
    finally:
        consumer.close()
    denied = run_cli("export", "recurrence-observations", "--out", "/dev/null", "--kafka-config", secure.files["upstream"], "--topic-prefix", prefix)
    assert denied.returncode == 1 and "recurrence-observations" in denied.stdout


def test_view_follower_runs_with_only_the_follower_acls(pipeline, secure: SecureBroker, redis_url):
    """User:upstream (its Write on the inputs, nothing to read) cannot
    follow the view; given the follower role's bindings it follows the five
    topics to their end in its group and applies every record."""
    prefix = pipeline["prefix"]
    follow = ("view", "follow", "--redis-url", redis_url, "--kafka-config", secure.files["upstream"], "--topic-prefix", prefix,
              "--app-id", "ledger", "--exit-when-idle", "3")
    view = RedisView(redis_url, namespace=default_namespace(prefix))
    try:
        denied = run_cli(*follow)
        assert denied.returncode == 1, denied.stdout + denied.stderr
        ok(run_cli("topics", "acls", "--principal", "User:upstream", "--role", "follower", "--topic-prefix", prefix, "--app-id", "ledger",
                   "--apply", "--kafka-config", secure.files["admin"]))
        followed = ok(run_cli(*follow))
        records = sum(len(harness.lines(pipeline["kafka"][name])) for name in catalogue.FOLLOWED_TOPICS)
        assert records > 0
        assert f"view follower stopped: {records} records applied" in followed.stdout, followed.stdout + followed.stderr
        assert set(role_acls("follower", "User:upstream", prefix, "ledger")) <= set(describe_acls(secure.admin, "User:upstream"))
        # It committed its offsets in its own group (Read on the group).
        group = catalogue.physical("ledger-view", prefix)
        admin = admin_client(secure.admin)  # kept alive until its answer came
        committed = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(timeout=30)
        committed_topics = {tp.topic for tp in committed.topic_partitions if tp.offset > 0}
        assert catalogue.physical(catalogue.OBSERVATIONS, prefix) in committed_topics, committed.topic_partitions
    finally:
        view.clear()
        view.close()


def test_a_replay_runs_with_only_the_replay_acls(pipeline, secure: SecureBroker, scram_user):
    """A principal of its own with the replay role's bindings alone replays
    the finished run: it reads the workers' committed offsets (Describe on
    their group: they bound the replay) and every input to them, and
    writes nothing."""
    prefix = pipeline["prefix"]
    replayer: ScramUser = scram_user("replayer")
    ok(run_cli("topics", "acls", "--principal", replayer.principal, "--role", "replay", "--topic-prefix", prefix, "--app-id", "ledger",
               "--apply", "--kafka-config", secure.files["admin"]))
    result = ok(run_cli("replay", "--from", "earliest", "--json", "--kafka-config", replayer.file, "--topic-prefix", prefix, "--app-id", "ledger"))
    summary = json.loads(result.stdout)
    journal, _ = case(pipeline["case"])
    published = sum(1 for line in journal.read_text(encoding="utf-8").splitlines() if line.strip())
    assert summary["written"] == {} and summary["records_read"] == sum(r["records"] for r in summary["ranges"]) == published, summary


def test_applied_acls_are_exactly_the_printed_ones(secure: SecureBroker, secure_prefix):
    principal = f"User:acl-{uuid.uuid4().hex[:8]}"
    printed = ok(run_cli("topics", "acls", "--principal", principal, "--topic-prefix", secure_prefix, "--app-id", "ledger")).stdout.splitlines()
    expected = role_acls("worker", principal, secure_prefix, "ledger")
    assert printed == [acl.kafka_acls() for acl in expected]
    refused = run_cli("topics", "acls", "--principal", principal, "--topic-prefix", secure_prefix, "--app-id", "ledger", "--apply", "--kafka-config", secure.files["ledger"])
    assert refused.returncode == 1 and "CLUSTER_AUTHORIZATION_FAILED" in refused.stdout, refused.stdout[-2000:]
    assert describe_acls(secure.admin, principal) == []
    ok(run_cli("topics", "acls", "--principal", principal, "--topic-prefix", secure_prefix, "--app-id", "ledger", "--apply", "--kafka-config", secure.files["admin"]))
    assert describe_acls(secure.admin, principal) == sorted(expected)


def _assert_fails_fast(result: subprocess.CompletedProcess, *phrases: str, secrets: tuple[str, ...]) -> None:
    output = result.stdout + result.stderr
    assert result.returncode == 1, output
    assert result.elapsed <= FAIL_FAST_S, f"took {result.elapsed:.1f} s"
    for phrase in phrases:
        assert phrase in output, output
    for secret in secrets:
        assert secret not in output


def test_a_wrong_password_fails_fast_and_says_so(secure: SecureBroker, tmp_path):
    wrong = f"wrong-{uuid.uuid4().hex}"
    for args in (("export", "recurrence-observations", "--out", tmp_path / "x.jsonl"), ("worker", "--exit-when-idle", "1")):
        result = run_cli(*args, "--kafka-config", secure.files["ledger"], env={"KAFKA_SASL_PASSWORD": wrong})
        _assert_fails_fast(result, "Authentication failed", "user ledger", secrets=(wrong, *secure.passwords.values()))


def test_an_untrusted_ca_fails_fast_and_says_so(secure: SecureBroker, tmp_path):
    other_ca = tmp_path / "other-ca.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=not the broker's CA",
         "-keyout", str(tmp_path / "other-ca.key"), "-out", str(other_ca)],
        check=True, capture_output=True,
    )
    for name in ("ledger", "ledger-mtls"):
        result = run_cli("publish", REPO / "tests/cases/minimum_case.jsonl", "--kafka-config", secure.files[name], "--topic-prefix", "nowhere.",
                         env={"KAFKA_SSL_CA_LOCATION": str(other_ca)})
        _assert_fails_fast(result, "certificate verify failed", secrets=tuple(secure.passwords.values()))


def test_an_unreachable_bootstrap_fails_fast_and_says_so(secure: SecureBroker, tmp_path):
    result = run_cli("worker", "--bootstrap", "127.0.0.1:1", "--kafka-config", secure.files["ledger"], "--exit-when-idle", "1")
    _assert_fails_fast(result, "no Kafka broker answered at 127.0.0.1:1", "Connection refused", secrets=tuple(secure.passwords.values()))


def test_a_reviewer_writes_review_decisions_only_and_the_worker_reads_them(secure: SecureBroker, secure_prefix, scram_user):
    """A principal of its own (a SCRAM user the test creates) with the
    reviewer role's bindings alone: ``review approve`` reads the review
    topics and publishes its decision; writing any other catalogue topic
    (or the state changelog) is TOPIC_AUTHORIZATION_FAILED; User:ledger
    with the worker role's bindings reads the decision."""
    from recurrence_ledger.catalogue import REVIEW_CANDIDATES, REVIEW_DECISIONS, STATISTICS
    from recurrence_ledger.kafka.client_config import consumer_config
    from recurrence_ledger.kafka.kafka_io import publish_raw
    from recurrence_ledger.serde.codec import decode_value, encode
    from tests.e2e.review_fixtures import candidate, statistics

    prefix, admin = secure_prefix, secure.files["admin"]
    reviewer: ScramUser = scram_user("reviewer")
    ok(run_cli("topics", "create", "--kafka-config", admin, "--topic-prefix", prefix, "--partitions", "2"))
    ok(run_cli("topics", "acls", "--principal", reviewer.principal, "--role", "reviewer", "--topic-prefix", prefix, "--apply", "--kafka-config", admin))
    ok(run_cli("topics", "acls", "--principal", "User:ledger", "--topic-prefix", prefix, "--app-id", "ledger", "--apply", "--kafka-config", admin))
    assert sorted(describe_acls(secure.admin, reviewer.principal)) == sorted(role_acls("reviewer", reviewer.principal, prefix))
    # A candidate and its scope's statistics, as a worker publishes them (admin writes them here).
    waiting = candidate("s1", "P1")
    publish_raw(secure.admin, prefix + REVIEW_CANDIDATES, b"s1", encode("ReviewCandidate", waiting))
    publish_raw(secure.admin, prefix + STATISTICS, b"s1", encode("ScopeStatistics", statistics("s1", 41)))

    approved = ok(run_cli("review", "approve", waiting["candidate_id"], "--reviewer", "alice", "--kafka-config", reviewer.file, "--topic-prefix", prefix))
    assert f"published to {prefix}review-decisions[" in approved.stdout and reviewer.password not in approved.stdout + approved.stderr

    others = [catalogue.physical(spec.name, prefix) for spec in catalogue.CATALOGUE if spec.name != REVIEW_DECISIONS]
    others.append(catalogue.physical(catalogue.changelog_name("ledger"), prefix))
    reports: dict[str, KafkaError | None] = {}
    producer = Producer({**client_config(reviewer.connection), "acks": "all", "message.timeout.ms": 20_000})
    for topic in others:
        producer.produce(topic, key=b"s1", value=b"{}", partition=0, on_delivery=lambda error, message, topic=topic: reports.__setitem__(topic, error))
    producer.flush(60)
    assert sorted(reports) == sorted(others)
    refused = {topic: error.code() if error is not None else None for topic, error in reports.items()}
    assert refused == {topic: KafkaError.TOPIC_AUTHORIZATION_FAILED for topic in others}

    consumer = Consumer(consumer_config(secure.connections["ledger"], catalogue.physical("ledger", prefix), {"enable.partition.eof": False}))
    try:
        consumer.assign([TopicPartition(prefix + REVIEW_DECISIONS, partition, OFFSET_BEGINNING) for partition in (0, 1)])
        deadline, message = time.monotonic() + 30, None
        while time.monotonic() < deadline and message is None:
            message = consumer.poll(0.5)
            assert message is None or message.error() is None, message.error()
        assert message is not None, "the worker's principal read no decision"
        decision = decode_value(message.value(), ("ReviewDecision",))
        assert (message.key(), decision["candidate_id"], decision["reviewer"], decision["journal_position"]) == (b"s1", waiting["candidate_id"], "alice", 41)
    finally:
        consumer.close()
