"""contract §8, §10, §11: the views are tables. ``apply`` publishes ledger
facts only; ``end_batch`` publishes at most one record per changed view key
with its latest value, so batching changes how many view records there are,
never the ledger facts nor the final value of a key."""

from __future__ import annotations

from collections import Counter

import pytest

from recurrence_ledger.embedded import run_journal
from recurrence_ledger.ledger.intake import validate
from recurrence_ledger.ledger.normalize import canonical_json
from recurrence_ledger.ledger.processor import LedgerProcessor
from recurrence_ledger.catalogue import LEDGER_TOPICS, REVISION_STATISTICS, STATISTICS, VIEW_TOPICS
from recurrence_ledger.workload import Workload, generate_journal
from tests.conftest import final_views, read_jsonl, view_key
from tests.journal import Ledger, experience, handoff, write_journal

WORKLOAD = Workload(scopes=4, outcomes_per_scope=80, heads_per_scope=5, handoffs=2, seed=11, candidates=0.2)


def run_in_batches(records: list[dict], view_batch: int) -> tuple[dict[str, list[bytes]], list[list[tuple[str, dict]]]]:
    """Apply ``records`` ending a batch every ``view_batch`` events and after
    the flush: (ledger facts per topic as canonical JSON, the view records of
    each batch as (topic, value))."""
    processor = LedgerProcessor(validate_outputs=True)
    facts: dict[str, list[bytes]] = {topic: [] for topic in LEDGER_TOPICS}
    batches: list[list[tuple[str, dict]]] = []
    for number, record in enumerate(records, 1):
        result = processor.apply(record["topic"], validate(record["topic"], record["value"]))
        assert result.rejection is None
        for emit in result.emits:
            assert emit.topic not in VIEW_TOPICS, "apply publishes ledger facts only"
            facts[emit.topic].append(canonical_json(emit.value))
        if number % view_batch == 0:
            batches.append([(emit.topic, emit.value) for emit in processor.end_batch()])
    for emit in processor.flush():
        facts[emit.topic].append(canonical_json(emit.value))
    batches.append([(emit.topic, emit.value) for emit in processor.end_batch()])
    return facts, batches


def final(batches: list[list[tuple[str, dict]]]) -> dict[str, dict]:
    return {topic: final_views(topic, [value for batch in batches for t, value in batch if t == topic]) for topic in VIEW_TOPICS}


@pytest.mark.parametrize("view_batch", [7, 100, 1_000])
def test_at_most_one_record_per_key_per_batch_and_the_same_final_values(view_batch):
    records = list(generate_journal(WORKLOAD))
    reference_facts, reference_batches = run_in_batches(records, 1)
    facts, batches = run_in_batches(records, view_batch)
    assert facts == reference_facts  # ledger facts do not depend on batching
    for batch in batches:
        keys = Counter((topic, view_key(topic, value)) for topic, value in batch)
        assert all(count == 1 for count in keys.values())
    assert final(batches) == final(reference_batches)
    assert final(batches)[STATISTICS] and final(batches)[REVISION_STATISTICS]
    published = sum(len(batch) for batch in batches)
    assert published < sum(len(batch) for batch in reference_batches)
    assert published <= len(batches) * (WORKLOAD.scopes + WORKLOAD.scopes * WORKLOAD.heads_per_scope * 2)


def test_batch_order_is_scope_then_revisions_in_artifactref_order_then_statistics():
    records = list(generate_journal(Workload(scopes=3, outcomes_per_scope=20, heads_per_scope=4, handoffs=2, seed=4)))
    _, batches = run_in_batches(records, len(records) + 1)
    [batch] = [batch for batch in batches if batch]
    order = [(value["scope_id"], topic == STATISTICS, view_key(topic, value)) for topic, value in batch]
    assert order == sorted(order)
    assert [value["scope_id"] for topic, value in batch if topic == STATISTICS] == ["scope-00000", "scope-00001", "scope-00002"]


def test_an_event_that_changes_nothing_in_a_view_publishes_nothing():
    ledger = Ledger(view_batch=10**9)
    ledger.feed(experience("s", 5, "E1"), handoff("s", 6, "H1", [("E1", 1)]))
    [first] = [emit for emit in ledger.processor.end_batch() if emit.topic == STATISTICS]
    assert first.value["as_of_position"] == 6
    assert ledger.processor.end_batch() == []  # nothing changed since
    # A Handoff that cites nothing, at an earlier position: the scope was
    # touched, its statistics are the same, so nothing is published.
    ledger.feed(handoff("s", 2, "H0", []))
    assert ledger.processor.end_batch() == []
    # A duplicate changes nothing either.
    ledger.feed(experience("s", 5, "E1"))
    assert ledger.processor.end_batch() == []


def test_run_journal_view_files_by_batch(tmp_path):
    journal = write_journal(tmp_path / "journal.jsonl", generate_journal(WORKLOAD))
    lines = len(journal.read_bytes().splitlines())
    run_journal(journal, tmp_path / "one", show_progress=False, validate_outputs=True, view_batch=1)
    summary = run_journal(journal, tmp_path / "default", show_progress=False, validate_outputs=True)
    for topic in LEDGER_TOPICS:
        assert (tmp_path / "one" / f"{topic}.jsonl").read_bytes() == (tmp_path / "default" / f"{topic}.jsonl").read_bytes(), topic
    for topic in VIEW_TOPICS:
        one = read_jsonl(tmp_path / "one" / f"{topic}.jsonl")
        batched = read_jsonl(tmp_path / "default" / f"{topic}.jsonl")
        assert final_views(topic, batched) == final_views(topic, one)
        # default batch of 1,000 records: at most one record per key per batch
        batches = -(-lines // 1_000)
        assert max(Counter(view_key(topic, value) for value in batched).values(), default=0) <= batches
    views = summary.records[STATISTICS] + summary.records[REVISION_STATISTICS]
    assert views / lines < 0.1  # view records per input event with the default batch
    with pytest.raises(ValueError):
        run_journal(journal, tmp_path / "bad", show_progress=False, view_batch=0)
