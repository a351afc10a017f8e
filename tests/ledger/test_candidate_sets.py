"""contract §6 (rev. 2): a scope_heads candidate set is published once per
(scope_id, candidate_set_digest) on candidate-sets, before the first match
that cites it, and matches refer to it by digest; the digest of the current
heads is kept as the heads change."""

from __future__ import annotations

import random

from recurrence_ledger.ledger import matching
from recurrence_ledger.ledger.normalize import canonical_json, digest
from recurrence_ledger.ledger.state import experience_ref
from tests.journal import Ledger, check, experience, outcome

S = "scope"
CUE = "port already bound"


def sets(ledger: Ledger) -> list[tuple[str, str, list[str]]]:
    return [(s["scope_id"], s["candidate_set_digest"], [f"{r['artifact_id']}r{r['revision']}" for r in s["candidate_refs"]])
            for s in ledger.out["candidate-sets"]]


def test_a_set_is_published_once_before_the_first_match_that_cites_it():
    ledger = Ledger()
    ledger.feed(experience(S, 1, "E1"), experience(S, 2, "E2", cue="other failure"))
    emits = ledger.processor.apply("task-outcomes", outcome(S, 3, "O1", checks=[check(CUE)])["value"]).emits
    assert [emit.topic for emit in emits][:2] == ["candidate-sets", "recurrence-matches"]
    [candidate_set, match] = [emit.value for emit in emits[:2]]
    assert emits[0].key == canonical_json({"scope_id": S, "candidate_set_digest": candidate_set["candidate_set_digest"]}).decode()
    assert candidate_set["candidate_refs"] == [experience_ref("E1", 1), experience_ref("E2", 1)]
    assert candidate_set["candidate_set_digest"] == digest(candidate_set["candidate_refs"]) == match["candidate_set_digest"]
    assert match["candidate_refs"] is None

    # Same heads: the next unlinked outcomes cite the same set, published no more.
    ledger.feed(outcome(S, 4, "O2", checks=[check(CUE), check("other failure")]), outcome(S, 5, "O3", checks=[check("nothing known")]))
    assert len(ledger.out["candidate-sets"]) == 0  # ledger.out only has what feed() saw
    assert {m["candidate_set_digest"] for m in ledger.out["recurrence-matches"]} == {match["candidate_set_digest"]}
    # A new head: a new set, once.
    ledger.feed(experience(S, 6, "E1", revision=2), outcome(S, 7, "O4", checks=[check(CUE)]), outcome(S, 8, "O5", checks=[check(CUE)]))
    assert sets(ledger) == [(S, digest([experience_ref("E1", 2), experience_ref("E2", 1)]), ["E1r2", "E2r1"])]
    # Linked outcomes keep their set inline; passing or itemless outcomes publish nothing.
    assert all(m["candidate_refs"] is None for m in ledger.out["recurrence-matches"])
    assert [key for key in ledger.processor.state.store if key[0] == "set_published"] == [
        ("set_published", S, match["candidate_set_digest"]), ("set_published", S, sets(ledger)[0][1])]


def test_each_scope_publishes_its_own_sets_and_an_empty_set_is_a_set():
    ledger = Ledger().feed(
        experience("a", 1, "E1"), experience("b", 1, "E1"),
        outcome("a", 2, "O1", checks=[check(CUE)]), outcome("b", 2, "O1", checks=[check(CUE)]),
        outcome("c", 2, "O1", checks=[check(CUE)]),
    )
    assert sets(ledger) == [("a", digest([experience_ref("E1", 1)]), ["E1r1"]), ("b", digest([experience_ref("E1", 1)]), ["E1r1"]),
                            ("c", digest([]), [])]
    assert [ledger.candidate_refs(m) for m in ledger.out["recurrence-matches"]][2] == []


def test_a_match_carries_no_list_whatever_the_number_of_heads():
    sizes = []
    for heads in (10, 2_000):
        ledger = Ledger(view_batch=10**9).feed(*[experience(S, k + 1, f"E{k:05d}", cue=f"failure {k}") for k in range(heads)])
        ledger.feed(outcome(S, 10**6, "O1", checks=[check("failure 3")]), outcome(S, 10**6 + 1, "O2", checks=[check("failure 4")]))
        assert len(ledger.out["candidate-sets"]) == 1 and len(ledger.out["candidate-sets"][0]["candidate_refs"]) == heads
        sizes.append([len(canonical_json(m)) for m in ledger.out["recurrence-matches"]])
    assert sizes[0] == sizes[1]


def test_a_revision_that_arrived_early_uses_the_recomputed_set():
    """Out of journal order (per-kind topics) the set is computed from the
    artifacts' histories; it is still published once, before its match."""
    ledger = Ledger().feed(experience(S, 1, "E1"), experience(S, 9, "E1", revision=2), outcome(S, 5, "O1", checks=[check(CUE)]))
    assert sets(ledger) == [(S, digest([experience_ref("E1", 1)]), ["E1r1"])]
    assert ledger.matches() == [("O1", "check", 0, "scope_heads", "matched", "E1r1")]


def test_restored_sets_are_not_published_again():
    records = [experience(S, 1, "E1"), outcome(S, 2, "O1", checks=[check(CUE)])]
    first = Ledger().feed(*records)
    [published] = first.out["candidate-sets"]
    again = Ledger()
    again.processor.restore_candidate_set(S, published["candidate_set_digest"])
    again.feed(*records)
    assert again.out["candidate-sets"] == [] and again.out["recurrence-matches"] == first.out["recurrence-matches"]


def test_the_heads_index_digest_equals_the_digest_of_the_sorted_heads():
    """The incrementally kept set equals the set recomputed from scratch
    after every change, cached or rebuilt from the store."""
    rng = random.Random(5)
    ledger = Ledger(view_batch=10**9)
    revisions: dict[str, int] = {}
    failure: dict[str, bool] = {}
    for position in range(1, 400):
        artifact_id = rng.choice(["A", "a", "É", "e\u0301", 'q"uote', "back\\slash", "日本", "\U0001f600"]) + f"{rng.randrange(8)}"
        revisions[artifact_id] = revisions.get(artifact_id, 0) + 1
        failure[artifact_id] = rng.random() < 0.8
        ledger.feed(experience(S, position, artifact_id, revision=revisions[artifact_id], cue=f"cue {artifact_id}", failure=failure[artifact_id]))
        if position % 7 == 0:
            state = ledger.processor.state
            if position % 21 == 0:
                state.invalidate_caches()
            expected = [experience_ref(a, revisions[a]) for a in sorted(revisions) if failure[a]]
            snapshot = matching.heads_index(state, S).snapshot()
            assert snapshot.digest == digest(expected)
            assert snapshot.refs == expected
            assert all(ref in snapshot for ref in expected)
            assert not any(experience_ref(ref["artifact_id"], ref["revision"] + 1) in snapshot for ref in expected)
            assert experience_ref("never", 1) not in snapshot
