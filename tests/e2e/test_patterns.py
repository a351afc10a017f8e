"""contract §23 on Kafka: the pattern stage behind the repartition topic
gives the embedded runner's pattern candidates byte for byte (as multisets:
they come from several partitions) and its signature patterns by final
value — with and without a group separator, at a threshold crossing, and
with three workers on twelve partitions, one SIGKILLed and one added (a
generated workload carrying the §22–§24 fixture journals: critical runs,
review decisions with reason codes and the promotion rate).
"""

from __future__ import annotations

import re
from collections import Counter

import pytest

from recurrence_ledger.catalogue import LEDGER_TOPICS, PATTERN_CANDIDATES, PATTERN_REPARTITION, REVIEW_STATUS, SIGNATURE_PATTERNS, STATISTICS
from recurrence_ledger.ledger.config import LedgerConfig
from recurrence_ledger.workload import Workload, generate_journal
from tests.conftest import CASES, final_views, read_jsonl
from tests.e2e import harness
from tests.journal import write_journal


def policy_options(config: LedgerConfig) -> tuple[str, ...]:
    options = ("--pattern-threshold", str(config.pattern_threshold))
    if config.pattern_group_separator is not None:
        options += ("--pattern-group-separator", config.pattern_group_separator)
    return options


@pytest.mark.parametrize(
    "config",
    [LedgerConfig(), LedgerConfig(pattern_group_separator="/", pattern_threshold=2)],
    ids=["one-group", "groups-threshold-2"],
)
def test_the_pattern_stage_on_kafka_gives_the_embedded_runner_s_patterns(config, topic_prefix, bootstrap, tmp_path):
    journal = CASES / "patterns.jsonl"
    harness.prepare(bootstrap, topic_prefix, partitions=3)
    harness.publish(bootstrap, journal, topic_prefix)
    reference = harness.embedded(journal, tmp_path / "embedded", config)
    assert reference[PATTERN_CANDIDATES]  # the fixture crosses the threshold
    harness.run_to_idle(bootstrap, topic_prefix, tmp_path / "worker.log", extra=policy_options(config))
    kafka = harness.exported(bootstrap, topic_prefix, tmp_path / "kafka")
    harness.assert_same_outputs(kafka, reference, multiset=True)
    # The contributions went through the repartition topic, one per changed
    # (scope, signature) per transaction, each an absolute count.
    contributions = harness.count_records(bootstrap, harness.physical(topic_prefix, PATTERN_REPARTITION))
    assert contributions >= len({(v["group"], v["signature_key"]) for v in harness.lines(reference[SIGNATURE_PATTERNS])})
    # The skill document (contract §23.6) from the topics is the one from the journal.
    from tests.plugins.processes import run_cli

    args = ("patterns", "export", "--group", "" if config.pattern_group_separator is None else "teamA", *policy_options(config))
    from_kafka = run_cli(*args, "--bootstrap", bootstrap, "--topic-prefix", topic_prefix)
    from_journal = run_cli(*args, "--journal", journal)
    assert from_kafka.returncode == 0, from_kafka.stderr
    assert from_kafka.stdout == from_journal.stdout and "\n## schema migration lock timeout\n" in from_kafka.stdout


PARTITIONS = 12
#: ~3,500 events over 60 scopes in 4 groups (``group-<n>/``), two failure
#: cues shared by every scope: patterns span every partition. Rated
#: failures (contract §22): each scope's head 0 is critical, so its runs get
#: review candidates from their first recurrence.
WORKLOAD = Workload(scopes=60, outcomes_per_scope=50, heads_per_scope=4, handoffs=2, seed=41, candidates=0.2, shared_cues=2, groups=4,
                    severities=True)
CONFIG = LedgerConfig(pattern_group_separator="/", pattern_threshold=6)
OPTIONS = ("--max-batch", "40", "--session-timeout-ms", "6000", *policy_options(CONFIG))
#: The fixture journals of contract §22–§24 the scale-out run carries beside
#: the workload, in the same topics: rejections with reason codes and a
#: promotion rate (§24, with two dead-lettered decisions), critical runs and
#: a critical recall_policy revision without candidate (§22), and pattern
#: groups with a separator (``teamA/``, ``teamB/``) and without (``solo``; under
#: a separator a scope without one is a group of its own, as are the other
#: fixtures' scopes). Their groups have at most 3 scopes, below this run's
#: threshold of 6: the crossing is the workload's.
FIXTURES = ("review_reasons", "critical_runs", "patterns")


def spread(base: list, extra: list) -> list:
    """``extra`` spread evenly through ``base``, each list keeping its own
    order (so every scope's records stay in journal-position order)."""
    merged: list = []
    taken = 0
    for index, item in enumerate(base):
        while taken < len(extra) and taken * len(base) <= index * len(extra):
            merged.append(extra[taken])
            taken += 1
        merged.append(item)
    return merged + extra[taken:]


def workload_with_fixtures(path):
    """The workload's journal with the :data:`FIXTURES` journals spread
    through it (their events straddle the kill), written to ``path``. The
    fixtures' scope ids are disjoint from the workload's and from each
    other's, so each scope's journal positions stay its own."""
    records = list(generate_journal(WORKLOAD))
    scopes = {record["value"]["scope_id"] for record in records}
    for name in FIXTURES:
        fixture = CASES / f"{name}.jsonl"
        own = {record["value"]["scope_id"] for record in read_jsonl(fixture)}
        assert not own & scopes, (name, own & scopes)
        scopes |= own
        records = spread(records, fixture.read_bytes().splitlines())
    return write_journal(path, records)


@pytest.mark.slow
@pytest.mark.parametrize("store", ["memory", "rocksdb"])
def test_patterns_stay_exactly_once_with_three_workers_a_kill_and_a_join(store, topic_prefix, bootstrap, tmp_path):
    journal = workload_with_fixtures(tmp_path / "journal.jsonl")
    prefix = topic_prefix
    harness.prepare(bootstrap, prefix, partitions=PARTITIONS)
    harness.publish(bootstrap, journal, prefix)
    reference = harness.embedded(journal, tmp_path / "embedded", CONFIG)
    assert len(harness.lines(reference[PATTERN_CANDIDATES])) == 8  # 4 groups × 2 shared cues
    # The fixtures are in the reference, so the run cannot pass vacuously:
    # rejections counted by reason code and a promotion rate (§24) …
    statistics = harness.last_statistics(reference[STATISTICS])
    reviews = statistics["reason-codes"]["reviews"]
    assert reviews["rejected"] == 3 and reviews["promotion_rate"] == 0.4
    assert {code: n for code, n in reviews["rejected_by_reason"].items() if n} == \
        {"false_cause": 1, "weak_evidence": 1, "unspecified": 1}
    assert {row["reason_code"] for row in harness.lines(reference[REVIEW_STATUS]) if row["status"] == "rejected"} == \
        {"false_cause", "weak_evidence", None}
    # … critical runs, the critical recall_policy revision P1 without a
    # candidate (§22), and the fixtures' pattern groups (§23).
    assert statistics["tenant-guard"]["recurred_by_severity"]["critical"] == 3
    assert [candidate["artifact_ref"]["artifact_id"] for candidate in harness.lines(reference["review-candidates"])
            if candidate["scope_id"] == "tenant-guard"] == ["X1", "X1"]
    assert {"teamA", "teamB", "solo"} <= {view["group"] for view in harness.lines(reference[SIGNATURE_PATTERNS])}
    # Critical revisions get review candidates below the review threshold (3), at their first recurrence.
    assert any(candidate["streak"] < 3 for candidate in harness.lines(reference["review-candidates"]))
    total = len(harness.lines(reference["recurrence-observations"]))

    logs = harness.kill_and_join(bootstrap, prefix, tmp_path, total=total, assigned="assigned pattern tasks", options=OPTIONS,
                                 rocksdb=store == "rocksdb")
    assert re.search(r"pattern task \d+ ready", logs["w4"].read_text()), logs["w4"].read_text()[-2000:]

    harness.wait_transactions_settled(bootstrap, prefix, PARTITIONS)
    kafka = harness.exported(bootstrap, prefix, tmp_path / "kafka")
    # No missing, extra or duplicate pattern candidate or scope fact.
    for topic in LEDGER_TOPICS:
        got, want = Counter(kafka[topic].splitlines()), Counter(reference[topic].splitlines())
        assert got == want, (topic, len(got - want), len(want - got))
    assert max(Counter(kafka[PATTERN_CANDIDATES].splitlines()).values()) == 1
    assert final_views(SIGNATURE_PATTERNS, harness.lines(kafka[SIGNATURE_PATTERNS])) == \
        final_views(SIGNATURE_PATTERNS, harness.lines(reference[SIGNATURE_PATTERNS]))
    harness.assert_same_outputs(kafka, reference, multiset=True)


GROUPS = LedgerConfig(pattern_group_separator="/", pattern_threshold=2)


def test_a_replay_covers_the_pattern_stage_and_writes_nothing_twice(topic_prefix, bootstrap, redis_url, tmp_path):
    from recurrence_ledger.runtime.replay import parse_start, run_replay
    from tests.plugins.processes import run_cli

    lines = (CASES / "patterns.jsonl").read_text().splitlines(keepends=True)
    first, rest = tmp_path / "first.jsonl", tmp_path / "rest.jsonl"
    first.write_text("".join(lines[:15]))
    rest.write_text("".join(lines[15:]))
    harness.prepare(bootstrap, topic_prefix, partitions=3)
    harness.publish(bootstrap, first, topic_prefix)
    harness.run_to_idle(bootstrap, topic_prefix, tmp_path / "worker.log", extra=policy_options(GROUPS))
    # The rest arrives while the worker is stopped: a replay leaves it to the
    # worker (it reads only to the group's offsets), which writes its scope
    # facts and the pattern stage's once when it comes back.
    harness.publish(bootstrap, rest, topic_prefix)
    summary = run_replay(bootstrap, topic_prefix, parse_start("earliest"), app_id="ledger", ledger=GROUPS, show_progress=False)
    assert dict(summary.written) == {} and summary.suppressed[PATTERN_CANDIDATES] == 1  # teamA crossed before the stop
    harness.run_to_idle(bootstrap, topic_prefix, tmp_path / "again.log", extra=policy_options(GROUPS))
    reference = harness.embedded(CASES / "patterns.jsonl", tmp_path / "embedded", GROUPS)
    kafka = harness.exported(bootstrap, topic_prefix, tmp_path / "kafka")
    assert Counter(kafka[PATTERN_CANDIDATES].splitlines()) == Counter(reference[PATTERN_CANDIDATES].splitlines())
    assert final_views(SIGNATURE_PATTERNS, harness.lines(kafka[SIGNATURE_PATTERNS])) == \
        final_views(SIGNATURE_PATTERNS, harness.lines(reference[SIGNATURE_PATTERNS]))
    again = run_replay(bootstrap, topic_prefix, parse_start("earliest"), app_id="ledger", ledger=GROUPS, show_progress=False)
    assert dict(again.written) == {} and again.suppressed[PATTERN_CANDIDATES] == 2

    result = run_cli("rebuild", "--bootstrap", bootstrap, "--topic-prefix", topic_prefix, *policy_options(GROUPS))
    output = " ".join(result.stdout.split())
    assert result.returncode == 0, result.stdout + result.stderr
    assert "signature patterns: 4 rebuilt, 2 pattern candidates, equal to the signature-patterns and pattern-candidates topics" in output
    other = run_cli("rebuild", "--bootstrap", bootstrap, "--topic-prefix", topic_prefix)  # another grouping: the topics differ
    assert other.returncode == 1 and "candidates DIFFER" in " ".join(other.stdout.split())

    # rebuild --redis-url rewrites the view whole: the patterns too, with the layout's marker (GET /patterns reads them)
    from recurrence_ledger.read.keys import Keys, default_namespace
    from recurrence_ledger.read.patterns import PatternView
    from recurrence_ledger.read.projection import RedisView
    from tests.plugins.services import read_client

    view = RedisView(redis_url, namespace=default_namespace(topic_prefix))
    try:
        rewritten = run_cli("rebuild", "--bootstrap", bootstrap, "--topic-prefix", topic_prefix, "--redis-url", redis_url, *policy_options(GROUPS))
        assert rewritten.returncode == 0, rewritten.stdout + rewritten.stderr
        expected = final_views(SIGNATURE_PATTERNS, harness.lines(reference[SIGNATURE_PATTERNS]))
        assert f"signature patterns: {len(expected)} rebuilt" in " ".join(rewritten.stdout.split())
        assert f"scopes, {len(expected)} signature patterns" in " ".join(rewritten.stdout.split())
        client = read_client(redis_url)
        held = {(row["group"], row["signature_key"]): row["scope_count"]
                for group in sorted({group for group, _ in expected}) for row in PatternView(client, view.namespace).group(group).rows}
        assert held == {key: value["scope_count"] for key, value in expected.items()}
        assert client.get(Keys(view.namespace).layout_marker) is not None
    finally:
        view.clear()
        view.close()
