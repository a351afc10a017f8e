"""contract §23 on Kafka: the pattern stage behind the repartition topic
gives the embedded runner's pattern candidates byte for byte (as multisets:
they come from several partitions) and its signature patterns by final
value — with and without a group separator, at a threshold crossing, and
with three workers on twelve partitions, one SIGKILLed and one added.
"""

from __future__ import annotations

import re
from collections import Counter

import pytest

from recurrence_ledger.catalogue import LEDGER_TOPICS, PATTERN_CANDIDATES, PATTERN_REPARTITION, SIGNATURE_PATTERNS
from recurrence_ledger.ledger.config import LedgerConfig
from recurrence_ledger.workload import Workload, generate_journal
from tests.conftest import CASES, final_views
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


@pytest.mark.parametrize("store", ["memory", "rocksdb"])
def test_patterns_stay_exactly_once_with_three_workers_a_kill_and_a_join(store, topic_prefix, bootstrap, tmp_path):
    journal = write_journal(tmp_path / "journal.jsonl", generate_journal(WORKLOAD))
    prefix = topic_prefix
    harness.prepare(bootstrap, prefix, partitions=PARTITIONS)
    harness.publish(bootstrap, journal, prefix)
    reference = harness.embedded(journal, tmp_path / "embedded", CONFIG)
    assert len(harness.lines(reference[PATTERN_CANDIDATES])) == 8  # 4 groups × 2 shared cues
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


def test_a_replay_covers_the_pattern_stage_and_writes_nothing_twice(topic_prefix, bootstrap, tmp_path):
    from recurrence_ledger.runtime.replay import parse_start, run_replay
    from tests.plugins.processes import run_cli

    lines = (CASES / "patterns.jsonl").read_text().splitlines(keepends=True)
    first, rest = tmp_path / "first.jsonl", tmp_path / "rest.jsonl"
    first.write_text("".join(lines[:15]))
    rest.write_text("".join(lines[15:]))
    harness.prepare(bootstrap, topic_prefix, partitions=3)
    harness.publish(bootstrap, first, topic_prefix)
    harness.run_to_idle(bootstrap, topic_prefix, tmp_path / "worker.log", extra=policy_options(GROUPS))
    # The rest arrives while the worker is stopped: a replay fills in the
    # scope facts and the pattern stage's, once.
    harness.publish(bootstrap, rest, topic_prefix)
    summary = run_replay(bootstrap, topic_prefix, parse_start("earliest"), app_id="ledger", ledger=GROUPS, show_progress=False)
    assert summary.written[PATTERN_CANDIDATES] == 1 and summary.written[SIGNATURE_PATTERNS] > 0  # teamA crossed before the stop
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
