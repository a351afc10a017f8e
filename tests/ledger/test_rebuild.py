"""Derived views rebuild from the ledger alone and equal the live ones."""

from __future__ import annotations

import random

from recurrence_ledger.ledger.rebuild import compare, compare_revisions, rebuild_revisions, rebuild_views, surfaces_from
from recurrence_ledger.workload import Workload, generate_journal
from tests.conftest import CASE_NAMES, case
from tests.journal import Ledger


def live(records) -> Ledger:
    ledger = Ledger()
    for record in records:
        ledger.feed(record)
    return ledger.flush()


def latest(ledger: Ledger) -> dict[str, dict]:
    return {record["scope_id"]: record for record in ledger.out["recurrence-statistics"]}


def test_fixture_cases_rebuild_to_the_live_statistics():
    import json

    for name in CASE_NAMES:
        journal, expected = case(name)
        ledger = live([json.loads(line) for line in journal.read_text().splitlines()])
        rebuilt = rebuild_views(ledger.out["recurrence-observations"], surfaces=surfaces_from(latest(ledger).values()))
        assert compare(rebuilt, latest(ledger)) == {scope: [] for scope in expected["scopes"]}
        for scope, facts in expected["scopes"].items():
            assert rebuilt.get(scope, {"needing_review": 0})["needing_review"] == facts["statistics"]["needing_review"]  # a scope without observations rebuilds to zero counts


def test_generated_workload_rebuilds_in_any_order():
    ledger = live(generate_journal(Workload(scopes=5, outcomes_per_scope=80, heads_per_scope=5, handoffs=2, seed=4)))
    observations = list(ledger.out["recurrence-observations"])
    random.Random(1).shuffle(observations)
    rebuilt = rebuild_views(observations, surfaces=surfaces_from(latest(ledger).values()))
    assert compare(rebuilt, latest(ledger)) == {scope: [] for scope in latest(ledger)}
    assert any(view["needing_review"] for view in rebuilt.values())


def test_a_lost_observation_is_reported():
    ledger = live(generate_journal(Workload(scopes=2, outcomes_per_scope=40, heads_per_scope=3, handoffs=2, seed=8)))
    observations = [o for o in ledger.out["recurrence-observations"] if o["event"] != "avoided"][1:]
    differences = compare(rebuild_views(observations, surfaces=surfaces_from(latest(ledger).values())), latest(ledger))
    assert any("avoided" in fields for fields in differences.values())


def test_the_revisions_view_rebuilds_from_observations_in_any_order():
    ledger = live(generate_journal(Workload(scopes=4, outcomes_per_scope=80, heads_per_scope=12, handoffs=2, seed=6)))
    rows = ledger.out["revision-statistics"]
    observations = list(ledger.out["recurrence-observations"])
    random.Random(2).shuffle(observations)
    rebuilt = rebuild_revisions(observations, surfaces=surfaces_from(latest(ledger).values(), rows))
    last = {(r["scope_id"], r["artifact_ref"]["artifact_id"], r["artifact_ref"]["revision"]): r for r in rows}
    assert len(rebuilt) == len(last) > 4 * 10  # more revisions than top_revisions holds per scope
    assert compare_revisions(rebuilt, rows) == []
    assert rebuilt == last


def test_a_lost_observation_changes_the_rebuilt_revision_row():
    ledger = live(generate_journal(Workload(scopes=1, outcomes_per_scope=40, heads_per_scope=3, handoffs=2, seed=8)))
    rows = ledger.out["revision-statistics"]
    observations = ledger.out["recurrence-observations"]
    lost = next(o for o in observations if o["event"] == "recurred")
    rebuilt = rebuild_revisions([o for o in observations if o is not lost], surfaces=surfaces_from([], rows))
    assert compare_revisions(rebuilt, rows) == [(lost["scope_id"], lost["artifact_ref"]["artifact_id"], lost["artifact_ref"]["revision"])]


COUNTS = ("selected", "recurred", "avoided", "unknown", "needing_review")


def test_a_repeated_observation_counts_once():
    import json

    journal, expected = case("minimum_case")
    ledger = live([json.loads(line) for line in journal.read_text().splitlines()])
    observations = ledger.out["recurrence-observations"]
    surfaces = surfaces_from(latest(ledger).values())
    assert {name: rebuild_views(observations, surfaces=surfaces)["migration-lock"][name] for name in COUNTS} == {
        "selected": 3, "recurred": 2, "avoided": 1, "unknown": 1, "needing_review": 0}
    recurred = next(o for o in observations if o["event"] == "recurred")
    replays = {
        "the topic replayed after a reset": observations + [dict(o) for o in observations],
        "one record produced twice": [*observations, dict(recurred)],
        "copies interleaved": [copy for o in reversed(observations) for copy in (o, dict(o))],
    }
    for what, doubled in replays.items():
        rebuilt = rebuild_views(doubled, surfaces=surfaces)
        assert {name: rebuilt["migration-lock"][name] for name in COUNTS} == {
            name: expected["scopes"]["migration-lock"]["statistics"][name] for name in COUNTS}, what
        assert compare(rebuilt, latest(ledger)) == {"migration-lock": []}, what
        assert compare_revisions(rebuild_revisions(doubled, surfaces=surfaces), ledger.out["revision-statistics"]) == [], what


def test_repeated_observations_of_a_generated_workload_count_once():
    ledger = live(generate_journal(Workload(scopes=3, outcomes_per_scope=60, heads_per_scope=4, handoffs=2, seed=5)))
    observations = list(ledger.out["recurrence-observations"])
    doubled = observations + random.Random(3).sample(observations, len(observations) // 2)
    random.Random(4).shuffle(doubled)
    surfaces = surfaces_from(latest(ledger).values(), ledger.out["revision-statistics"])
    assert compare(rebuild_views(doubled, surfaces=surfaces), latest(ledger)) == {scope: [] for scope in latest(ledger)}
    assert compare_revisions(rebuild_revisions(doubled, surfaces=surfaces), ledger.out["revision-statistics"]) == []


def test_every_fixture_case_rebuilds_its_revisions_view_with_the_carried_figures():
    """The reasons of unknown selections and the ambiguous matches come from
    the inputs, not from observations (contract §17): a rebuild carries them
    over from the live rows, rebuilds the rows of revisions that have only
    ambiguous matches, and decides binding_suspect again."""
    import json

    for name in CASE_NAMES:
        journal, _ = case(name)
        ledger = live([json.loads(line) for line in journal.read_text().splitlines()])
        rows = ledger.out["revision-statistics"]
        observations = list(ledger.out["recurrence-observations"])
        random.Random(5).shuffle(observations)
        rebuilt = rebuild_revisions(observations, surfaces=surfaces_from(latest(ledger).values(), rows))
        assert compare_revisions(rebuilt, rows) == [], name
        if name == "unknown_reasons":
            assert [key[1] for key, row in rebuilt.items() if row["binding_suspect"]] == ["B1"]


def test_a_revision_with_only_ambiguous_matches_is_rebuilt_from_its_live_row():
    from tests.journal import check, experience, outcome

    ledger = live([experience("s", 1, "E1"), experience("s", 2, "E2"), outcome("s", 3, "O", checks=[check("port already bound")])])
    rows = ledger.out["revision-statistics"]
    assert [(row["artifact_ref"]["artifact_id"], row["ambiguous"], row["selected"]) for row in rows] == [("E1", 1, 0), ("E2", 1, 0)]
    assert ledger.out["recurrence-observations"] == []
    assert compare_revisions(rebuild_revisions([], surfaces=surfaces_from([], rows)), rows) == []
