"""``what-if --from-topics`` on the real broker and Redis (contract §20):
the replay of a deployment's input topics concludes exactly what the replay
of the same events as a journal concludes, takes the review threshold the
workers recorded in the Redis view as its baseline, and changes nothing of
the deployment — no topic's end offsets, no consumer group or committed
offset, no Redis key."""

from __future__ import annotations

import json
from pathlib import Path
from uuid import uuid4

import pytest
import redis
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from recurrence_ledger.catalogue import LEDGER_TOPICS, OUTPUT_TOPICS
from recurrence_ledger.embedded import journal_lines
from recurrence_ledger.read.keys import default_namespace
from recurrence_ledger.kafka.kafka_io import prepare_line, publisher_config
from recurrence_ledger.whatif.topics import READER_GROUP
from recurrence_ledger.workload import Workload, generate_journal
from tests.e2e import harness
from tests.journal import write_journal
from tests.plugins.processes import run_cli
from tests.whatif.test_rejected_candidates_avoided import reviewed_journal

pytestmark = pytest.mark.broker


def workload_journal(path: Path) -> Path:
    records = generate_journal(Workload(scopes=6, outcomes_per_scope=60, heads_per_scope=3, handoffs=2, seed=21, candidates=0.3))
    return write_journal(path, records)


def redis_value(client: redis.Redis, key: bytes) -> tuple:
    """A key's type and value as data (not DUMP's bytes: a read can advance
    Redis' incremental rehashing of a hash, which reorders its DUMP without
    changing its content)."""
    kind = client.type(key)
    if kind == b"hash":
        return kind, sorted(client.hgetall(key).items())
    if kind == b"zset":
        return kind, client.zrange(key, 0, -1, withscores=True)
    if kind == b"set":
        return kind, sorted(client.smembers(key))
    if kind == b"list":
        return kind, client.lrange(key, 0, -1)
    return kind, client.get(key)


def deployment(bootstrap: str, admin: AdminClient, prefix: str, redis_url: str) -> dict:
    """What a what-if must not change: every topic of the prefix with each
    partition's (low, high) offsets, the consumer groups of the prefix (and
    the what-if's reader id) with their committed offsets, and every Redis
    key of the prefix's namespace with its value."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"probe-{uuid4().hex[:6]}", "enable.auto.commit": False})
    try:
        metadata = consumer.list_topics(timeout=10)
        offsets = {
            (name, partition): consumer.get_watermark_offsets(TopicPartition(name, partition), timeout=10, cached=False)
            for name, topic in metadata.topics.items() if name.startswith(prefix)
            for partition in topic.partitions
        }
    finally:
        consumer.close()
    groups = sorted(group.group_id for group in admin.list_consumer_groups(request_timeout=10).result().valid
                    if group.group_id.startswith(prefix) or READER_GROUP in group.group_id)
    committed = {}
    for group in groups:
        result = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(timeout=30)
        committed[group] = sorted((tp.topic, tp.partition, tp.offset) for tp in result.topic_partitions)
    client = redis.Redis.from_url(redis_url)
    namespace = default_namespace(prefix)
    keys = {key: redis_value(client, key) for key in client.scan_iter(match=f"{namespace}:*", count=1000)}
    return {"offsets": offsets, "groups": groups, "committed": committed, "redis": keys}


def facts_by_scope(folder: Path) -> dict[str, dict[str, list[bytes]]]:
    """Each ledger file's lines per scope, in order (a scope's facts keep
    their order on every partition layout)."""
    found: dict[str, dict[str, list[bytes]]] = {}
    for topic in LEDGER_TOPICS:
        for line in (folder / f"{topic}.jsonl").read_bytes().splitlines():
            found.setdefault(topic, {}).setdefault(json.loads(line)["scope_id"], []).append(line)
    return found


def what_if(*args: str) -> dict:
    result = run_cli("what-if", *args, "--quiet")
    assert result.returncode == 0, result.stderr + result.stdout
    out = Path(args[args.index("--out") + 1])
    return json.loads((out / "report.json").read_text())


def test_a_what_if_over_the_topics_is_the_what_if_over_the_journal_and_changes_nothing_of_the_deployment(
        bootstrap, admin, redis_url, topic_prefix, tmp_path):
    journal = workload_journal(tmp_path / "journal.jsonl")
    harness.prepare(bootstrap, topic_prefix, partitions=3)
    harness.publish(bootstrap, journal, topic_prefix)
    try:
        harness.run_to_idle(bootstrap, topic_prefix, tmp_path / "worker.log", redis_url=redis_url, extra=("--review-threshold", "2"))
        before = deployment(bootstrap, admin, topic_prefix, redis_url)
        assert before["redis"] and before["groups"] and before["committed"][before["groups"][0]]

        topics = what_if("--from-topics", "--bootstrap", bootstrap, "--topic-prefix", topic_prefix, "--redis-url", redis_url,
                         "--review-threshold", "4", "--out", str(tmp_path / "topics"))
        assert deployment(bootstrap, admin, topic_prefix, redis_url) == before
        assert READER_GROUP not in " ".join(before["groups"])

        assert topics["baseline"]["policy"]["review_threshold"] == 2
        assert topics["baseline"]["sources"]["review_threshold"].startswith("recorded by the workers in the Redis view")
        assert topics["inputs"]["kind"] == "topics" and topics["inputs"]["records"] == len(list(journal_lines(journal.open("rb"))))
        file = what_if(str(journal), "--baseline-review-threshold", "2", "--review-threshold", "4", "--out", str(tmp_path / "file"))
        assert topics["comparisons"] == file["comparisons"] and topics["comparisons"][0]["differs"]
        assert facts_by_scope(tmp_path / "topics" / "ledger") == facts_by_scope(tmp_path / "file" / "ledger")
        reference = run_cli("run-journal", str(journal), "--out", str(tmp_path / "rj"), "--review-threshold", "4", "--quiet")
        assert reference.returncode == 0, reference.stderr
        harness.assert_same_outputs(
            {topic: (tmp_path / "topics" / "ledger" / f"{topic}.jsonl").read_bytes() for topic in OUTPUT_TOPICS},
            {topic: (tmp_path / "rj" / f"{topic}.jsonl").read_bytes() for topic in OUTPUT_TOPICS}, multiset=True,
        )
    finally:
        harness.remove_prefix(bootstrap, topic_prefix, redis_url)


def test_per_kind_topics_are_merged_in_publication_order(bootstrap, topic_prefix, tmp_path):
    journal = workload_journal(tmp_path / "journal.jsonl")
    harness.prepare(bootstrap, topic_prefix, partitions=2)
    producer = Producer(publisher_config(bootstrap))
    with open(journal, "rb") as handle:
        for number, line in journal_lines(handle):
            record = prepare_line(line, per_kind=True, topic_prefix=topic_prefix)
            producer.produce(topic_prefix + record.topic, value=record.value, key=record.key, timestamp=1_800_000_000_000 + number)
    assert producer.flush(30) == 0
    for args in (("--review-threshold", "2"), ("--sweep", "review-threshold=1..5")):
        topics = what_if("--from-topics", "--bootstrap", bootstrap, "--topic-prefix", topic_prefix, *args, "--out", str(tmp_path / "topics"))
        file = what_if(str(journal), *args, "--out", str(tmp_path / "file"))
        assert topics["inputs"]["offsets"][topic_prefix + "source-journal"] == 0
        assert topics["comparisons"] == file["comparisons"] and topics["sweep"] == file["sweep"]
        if topics["sweep"] is None:
            assert facts_by_scope(tmp_path / "topics" / "ledger") == facts_by_scope(tmp_path / "file" / "ledger")
    assert (tmp_path / "topics" / "chart.png").is_file()


@pytest.mark.parametrize("env", [{}, {"RL_JOBS": "2"}], ids=["", "RL_JOBS"])
def test_a_topic_that_does_not_exist_is_an_error_and_nothing_is_created(admin, bootstrap, tmp_path, env):
    """Also with the deployment's RL_JOBS set: it splits journal files, and
    --from-topics reads in one process (only --jobs given with it is a
    usage error)."""
    prefix = f"nope{uuid4().hex[:8]}."
    result = run_cli("what-if", "--from-topics", "--bootstrap", bootstrap, "--topic-prefix", prefix, "--out", str(tmp_path / "out"), env=env)
    assert result.returncode == 1, result.stdout + result.stderr
    message = " ".join(result.stdout.split())
    assert "topics do not exist" in message and f"{prefix}source-journal" in message and "topic prefix" in message, message
    assert not [name for name in admin.list_topics(timeout=10).topics if name.startswith(prefix)]


def test_a_what_if_over_the_topics_counts_the_rejected_candidates_from_the_review_decisions_topic(bootstrap, topic_prefix, tmp_path):
    """contract §20 with §18: the review decisions on their own topic
    (where reviewers publish them) are read with the other inputs, and a
    higher threshold counts the rejected candidates it would not have
    raised, as the same what-if over the journal does."""
    journal = reviewed_journal(tmp_path / "reviewed.jsonl")
    harness.prepare(bootstrap, topic_prefix, partitions=1)
    producer = Producer(publisher_config(bootstrap))
    with open(journal, "rb") as handle:
        for number, line in journal_lines(handle):  # the decisions on review-decisions, the rest on source-journal
            record = prepare_line(line, per_kind=b'"review-decisions"' in line, topic_prefix=topic_prefix)
            producer.produce(topic_prefix + record.topic, value=record.value, key=record.key, timestamp=1_800_000_000_000 + number)
    assert producer.flush(30) == 0
    try:
        topics = what_if("--from-topics", "--bootstrap", bootstrap, "--topic-prefix", topic_prefix,
                         "--sweep", "review-threshold=3..6", "--out", str(tmp_path / "topics"))
        assert topics["inputs"]["offsets"][topic_prefix + "review-decisions"] == 4
        rows = {row["value"]: (row["review_candidates"], row["rejected_candidates_avoided"]) for row in topics["sweep"]["rows"]}
        assert rows == {3: (4, 0), 4: (2, 1), 5: (1, 2), 6: (0, 3)}
        assert topics["review_decisions"] == {"approved": 1, "rejected": 3}
        file = what_if(str(journal), "--sweep", "review-threshold=3..6", "--out", str(tmp_path / "file"))
        assert topics["sweep"]["rows"] == file["sweep"]["rows"] and topics["comparisons"] == file["comparisons"]
    finally:
        harness.remove_prefix(bootstrap, topic_prefix)
