"""The state layout can change without changing an output byte: a store
written before match decisions moved into their Task Outcome's record (one
``match`` record per failure item) goes on exactly as a store written
today (docs/upgrading.md, "State: match decisions in the outcome record")."""

from __future__ import annotations

import orjson

from recurrence_ledger.ledger.intake import validate
from recurrence_ledger.ledger.processor import LedgerConfig, LedgerProcessor
from recurrence_ledger.workload import Workload, generate_journal

SHAPE = Workload(scopes=3, outcomes_per_scope=80, heads_per_scope=6, handoffs=3, seed=5)
#: a short horizon, so some outcomes wait across the layout change
CONFIG = LedgerConfig(provenance_horizon=3)


def events() -> list[tuple[str, dict]]:
    records = list(generate_journal(SHAPE))
    # per-kind arrival: every Handoff receipt arrives a few events late
    for index in range(len(records) - 1, 0, -1):
        if records[index]["topic"] == "handoff-receipts" and index + 4 < len(records):
            records.insert(index + 4, records.pop(index))
    return [(record["topic"], validate(record["topic"], record["value"])) for record in records]


def run(processor: LedgerProcessor, batch: list[tuple[str, dict]]) -> list[bytes]:
    out = []
    for topic, value in batch:
        result = processor.apply(topic, value)
        out += [orjson.dumps([emit.topic, emit.key, emit.value], option=orjson.OPT_SORT_KEYS) for emit in result.emits]
        if result.rejection is not None:
            out.append(result.rejection.reason.encode())
    return out + [orjson.dumps([emit.topic, emit.key, emit.value], option=orjson.OPT_SORT_KEYS)
                  for emit in processor.flush() + processor.end_batch()]


def to_previous_layout(store: dict) -> None:
    """Move each outcome's decided matches to ``match`` records, as the
    state held them before."""
    for key, record in list(store.items()):
        if key[0] == "outcome" and "matches" in record:
            record = dict(record)
            for ref, match in zip(record["failure_refs"], record.pop("matches")):
                store[("match", key[1], key[2], ref["item_kind"], ref["item_index"])] = match
            store[key] = record


def test_a_store_in_the_previous_layout_goes_on_byte_for_byte():
    journal = events()
    cut = len(journal) // 2
    reference = LedgerProcessor(config=CONFIG)
    expected = run(reference, journal[:cut]) + run(reference, journal[cut:] + journal[: cut // 2])

    store: dict = {}
    before = LedgerProcessor(store, CONFIG)
    first = run(before, journal[:cut])
    assert any(key[0] == "outcome" and "matches" in value for key, value in store.items())
    to_previous_layout(store)
    after = LedgerProcessor(store, CONFIG)  # a restart: the same state, no caches
    assert first + run(after, journal[cut:] + journal[: cut // 2]) == expected


def test_restored_matches_are_reused_and_not_written_again():
    """The replay's way (contract §6): published matches are restored as
    ``match`` records before the journal is applied again; the outcomes
    decided then reuse them, publish no match (nor the candidate set a new
    match would have needed) and everything else as before."""
    journal = events()
    reference = run(LedgerProcessor(config=CONFIG), journal)
    again = LedgerProcessor(config=CONFIG)
    for line in reference:
        topic, _, value = orjson.loads(line) if line.startswith(b"[") else (None, None, None)
        if topic == "recurrence-matches":
            again.restore_match(value)
    assert run(again, journal) == [line for line in reference if not line.startswith((b'["recurrence-matches"', b'["candidate-sets"'))]
