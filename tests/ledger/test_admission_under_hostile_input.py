"""Adversarial tests of admission and the revision-statistics
view: hostile candidate values, candidate/outcome interleavings, horizons,
replays, output sizes, and the revisions view against top_revisions.

The first tests pin the fixes of defects this pass found (decisions and
waiting state that outgrew a Kafka message; an accepted record that could
not be published); the others pin behaviour that held up under attack and
is not covered by tests/ledger/test_admission.py.
"""

from __future__ import annotations

import json
import random
from collections import Counter, defaultdict

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from recurrence_ledger.ledger import admission
from recurrence_ledger.ledger.normalize import digest, normalize
from recurrence_ledger.ledger.processor import LedgerConfig
from recurrence_ledger.ledger.rebuild import (
    compare_revisions,
    rebuild_revisions,
    surfaces_from,
)
from recurrence_ledger.catalogue import MAX_MESSAGE_BYTES
from recurrence_ledger.workload import Workload, generate_journal
from recurrence_ledger.serde import avro, codec
from recurrence_ledger.ledger.models import ExperienceContent
from recurrence_ledger.ledger.records import AdmissionDecision, RevisionStatistics
from tests.journal import Ledger, check, claim, experience, handoff, outcome, receipt
from tests.ledger.test_admission import FAILED, S, candidate, decisions


def encoded_sizes(ledger: Ledger, topic: str, schema: str) -> list[int]:
    """Sizes of a topic's records as the worker would produce them (Avro,
    the default output format)."""
    return [len(codec.encode(schema, value)) for value in ledger.out[topic]]


# --------------------------------------------------------------------- bounded decisions and state


def test_a_decision_relying_on_many_failure_items_fits_in_one_kafka_message():
    """60 failed outcomes (512 verified failing items each, 505-character
    source ids, ~56 KB per line) and one candidate citing them all: the
    decision keeps the first 256 of 30,720 failure refs and says how many
    there were (it was 18 MB in Avro, over max.message.bytes, and stopped the
    worker for good)."""
    ids = [f"O{i:04d}-" + "x" * 500 for i in range(60)]
    outcomes = [
        outcome(S, i + 1, source_id, checks=[check(f"c{j}") for j in range(256)], observations=[claim(f"o{j}") for j in range(256)])
        for i, source_id in enumerate(ids)
    ]
    ledger = Ledger().feed(*outcomes, candidate("C-big", position=1, cites=tuple(ids))).flush()
    assert ledger.reasons() == []
    [decision] = ledger.out["admission-decisions"]
    assert (decision["decision"], decision["failure_refs_total"], len(decision["failure_refs"])) == ("accepted", 30_720, 256)
    assert [(r["task_outcome_ref"]["source_id"], r["item_kind"], r["item_index"]) for r in decision["failure_refs"][:2]] == [
        (ids[0], "check", 0), (ids[0], "check", 1)]
    [size] = encoded_sizes(ledger, "admission-decisions", "AdmissionDecision")
    assert size <= 1_048_576, f"AdmissionDecision is {size} bytes in Avro"


def test_a_decision_with_many_near_duplicates_fits_in_one_kafka_message():
    """1,100 heads whose 512-code-point cue is U+FDFA (NFKC expands each to
    18 characters: a 16.9 KB signature_key) and one candidate with the same
    cue: the decision keeps the best 16 near-duplicates of 1,100."""
    cue = "\ufdfa" * 512
    ledger = Ledger().feed(FAILED, *[experience(S, 10 + i, f"E{i:04d}", cue=cue) for i in range(1100)])
    ledger.feed(candidate("C1", cue=cue))
    assert ledger.reasons() == []
    [decision] = ledger.out["admission-decisions"]
    assert (decision["near_duplicates_total"], len(decision["near_duplicates"])) == (1100, 16)
    assert [n["artifact_ref"]["artifact_id"] for n in decision["near_duplicates"]] == [f"E{i:04d}" for i in range(16)]
    [size] = encoded_sizes(ledger, "admission-decisions", "AdmissionDecision")
    assert size <= 1_048_576, f"AdmissionDecision is {size} bytes in Avro"


def test_waiting_candidates_are_capped_per_scope_and_the_next_one_is_dead_lettered():
    """Candidates need no journal position, so a producer could make one
    scope hold any number of waiting candidates (34,000 with 512-character
    ids made two state records 17.7 MB, over the changelog's 16 MiB, and
    stopped the worker for good). At max_pending_candidates the next one that
    would wait is dead-lettered (nothing recorded: it can come again);
    one whose outcomes are known is still decided."""
    ledger = Ledger(LedgerConfig(max_pending_candidates=3)).feed(FAILED)
    ledger.feed(*[candidate(f"C{i}", cites=("O-x",)) for i in range(4)], candidate("C-known"))
    assert ledger.reasons() == ["too_many_pending"]
    assert [d["candidate_id"] for d in ledger.out["admission-decisions"]] == ["C-known"]
    ledger.feed(outcome(S, 5, "O-x", checks=[check("x")]))  # the three waiting ones are decided
    ledger.feed(candidate("C3", cites=("O-x",)))  # the rejected one, published again: decided now
    assert sorted(d["candidate_id"] for d in ledger.out["admission-decisions"]) == ["C-known", "C0", "C1", "C2", "C3"]
    # The default cap keeps the waiting index (the largest record: one [position, id] per candidate) in one message.
    worst_entry = len(orjson.dumps([2**63 - 1, "\U0010ffff" * 512]))
    assert LedgerConfig().max_pending_candidates * (worst_entry + 1) < MAX_MESSAGE_BYTES


def test_an_accepted_candidate_is_a_publishable_failure_record():
    """A check_subject over 512 characters cannot be published
    (FailureVerification.check_subject: 1–512): rule 4 rejects it."""
    record = candidate("C1", subject="s" * 600)
    decision = decisions(Ledger().feed(FAILED, record).flush())["C1"]
    assert (decision["decision"], decision["reasons"]) == ("rejected", ["check_subject_too_long"])
    accepted = candidate("C2", subject="s" * 512)
    assert decisions(Ledger().feed(FAILED, accepted).flush())["C2"]["decision"] == "accepted"
    ExperienceContent.model_validate(accepted["value"]["content"])


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    cue=st.text(max_size=40),
    subject=st.one_of(st.text(max_size=40), st.builds(lambda n, c: c * n, st.integers(500, 600), st.sampled_from(["s", "\u200b", "\ufb01"]))),
    condition=st.text(max_size=40),
)
def test_property_accepted_content_validates_as_experience_content(cue, subject, condition):
    """Whatever the cue, subject and condition: accepted content is a
    publishable ExperienceContent; rejected content names a reason."""
    record = candidate("C1", cue=cue, subject=subject, condition=condition)
    ledger = Ledger().feed(FAILED, record).flush()
    if ledger.reasons():  # e.g. a lone surrogate: bad input, dead-lettered
        assert ledger.reasons() == ["invalid_value"] and not ledger.out["admission-decisions"]
        return
    decision = decisions(ledger)["C1"]
    if decision["decision"] == "accepted":
        ExperienceContent.model_validate(record["value"]["content"])
    else:
        assert decision["reasons"]


# --------------------------------------------------------------------- hostile cues (held up)


@pytest.mark.parametrize(
    ("cue", "outcome_text", "reasons", "key"),
    [
        ("\U0001F600" * 512, "o", [], "\U0001F600" * 512),  # astral: code points, not UTF-16 units
        ("\U0001F600" * 513, "o", ["cue_too_long"], "\U0001F600" * 513),
        ("e" + "\u0301" * 511, "o", [], None),  # 512 code points with combining marks
        ("e\u0301" * 256 + "x", "o", [], None),  # 513 written, 257 after NFC: the NFC form counts (rev. 2)
        ("\ufb01" * 512, "o", [], "fi" * 512),  # NFKC doubles the length: still accepted
        ("\u200b\ufeff\u200b", "o", ["empty_cue"], None),  # format characters only
        ("\x00port\x7f", "o", [], "port"),
        ("ＴＨＥ tests FAILED!!", "the tests failed", ["cue_restates_outcome"], "the tests failed"),
        ("  ", "", ["empty_cue"], None),
    ],
    ids=["astral-512", "astral-513", "combining-512", "combining-513-written", "nfkc-expands", "zero-width", "controls",
         "fullwidth-restatement", "blank-both"],
)
def test_hostile_cues_are_decided_not_dead_lettered(cue, outcome_text, reasons, key):
    ledger = Ledger().feed(FAILED, candidate("C1", cue=cue, outcome_text=outcome_text)).flush()
    assert ledger.reasons() == []
    d = decisions(ledger)["C1"]
    assert d["reasons"] == reasons
    assert d["signature_key"] == (normalize(cue) or None)
    if key is not None:
        assert d["signature_key"] == key


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ({"journal_position": 2**63}, "invalid_value"),
        ({"journal_position": -1}, "invalid_value"),
        ({"journal_position": 5.0}, "wrong_type"),
        ({"journal_position": True}, "wrong_type"),
        ({"candidate_id": "C\x1f"}, "invalid_value"),
        ({"candidate_id": "C" * 513}, "too_long"),
        ({"artifact_id": ""}, "invalid_value"),
        ({"cited_sources": [{"source_type": "task_outcome", "source_id": f"O{i}"} for i in range(257)]}, "too_long"),
        ({"cited_sources": [{"source_type": "experience", "source_id": "x"}]}, "invalid_value"),
        ({"cited_sources": {"source_type": "task_outcome"}}, "wrong_type"),
        ({"extra": 1}, "unexpected_field"),
    ],
    ids=["pos-2^63", "pos-negative", "pos-float", "pos-bool", "id-control", "id-513", "artifact-blank", "257-citations",
         "source-type", "citations-object", "extra-field"],
)
def test_bad_candidate_envelopes_go_to_dead_letter_with_a_reason(value, reason):
    record = candidate("C1")
    record["value"].update(value)
    ledger = Ledger().feed(FAILED, record).flush()
    assert ledger.reasons() == [reason]
    assert ledger.out["admission-decisions"] == []


def test_a_lone_surrogate_in_a_candidate_is_dead_lettered():
    raw = json.dumps(candidate("C1")).replace("port already bound", "\\ud800 bound").encode()
    ledger = Ledger().feed(FAILED, raw).flush()
    assert ledger.reasons() == ["invalid_value"] and ledger.out["admission-decisions"] == []


def test_a_candidate_at_the_largest_position_waits_until_the_end_of_the_journal():
    ledger = Ledger(LedgerConfig(provenance_horizon=1)).feed(FAILED, candidate("C1", position=2**63 - 1, cites=("O-never",)))
    ledger.feed(outcome(S, 10**12, "O-other", status="completed"))
    assert ledger.out["admission-decisions"] == []
    ledger.flush()
    assert decisions(ledger)["C1"]["reasons"] == ["missing_source"]


# --------------------------------------------------------------------- citations (held up)


def test_citations_are_carried_unchanged_and_failure_refs_are_not_repeated():
    cites = ("O-fail",) * 200
    record = candidate("C1", cites=cites, receipts=("R1", "O-fail") * 28)
    d = decisions(Ledger().feed(FAILED, record).flush())["C1"]
    assert d["cited_sources"] == record["value"]["cited_sources"]
    assert len(d["failure_refs"]) == 1 and d["missing_sources"] == []


def test_a_handoff_receipt_citation_with_an_outcome_id_is_not_an_outcome():
    d = decisions(Ledger().feed(FAILED, candidate("C1", cites=(), receipts=("O-fail",))).flush())["C1"]
    assert d["reasons"] == ["no_failure_evidence"] and d["failure_refs"] == []


def test_an_outcome_of_another_scope_is_missing_and_candidate_ids_are_per_scope():
    other = candidate("C1")
    other["value"]["scope_id"] = "other"
    ledger = Ledger().feed(FAILED, other, candidate("C1")).flush()
    by_scope = {d["scope_id"]: d for d in ledger.out["admission-decisions"]}
    assert by_scope["other"]["reasons"] == ["missing_source"]
    assert by_scope["other"]["missing_sources"] == [{"source_type": "task_outcome", "source_id": "O-fail"}]
    assert by_scope[S]["decision"] == "accepted"
    assert ledger.reasons() == []


# --------------------------------------------------------------------- waking (held up)


def test_duplicate_and_conflicting_outcomes_do_not_wake_or_redecide():
    ledger = Ledger().feed(FAILED, candidate("C1", cites=("O-fail", "O-late")))
    ledger.feed(FAILED)  # duplicate: nothing
    ledger.feed(outcome(S, 9, "O-fail", checks=[check("other")]))  # identity conflict
    assert ledger.out["admission-decisions"] == [] and ledger.reasons() == ["identity_conflict"]
    ledger.feed(outcome(S, 1, "O-late", checks=[check("x")]))  # position conflict: not applied
    assert ledger.out["admission-decisions"] == [] and ledger.reasons()[-1] == "position_conflict"
    ledger.feed(outcome(S, 2, "O-late", checks=[check("x")]))  # now valid: wakes
    [d] = ledger.out["admission-decisions"]
    assert [r["task_outcome_ref"]["source_id"] for r in d["failure_refs"]] == ["O-fail", "O-late"]
    assert d["failure_refs"][0]["item_digest"] == digest(FAILED["value"]["checks"][0])  # the first version
    ledger.flush()
    assert len(ledger.out["admission-decisions"]) == 1


def test_many_candidates_waiting_on_one_outcome_are_each_decided_once():
    ledger = Ledger().feed(*[candidate(f"C{i:03d}", position=1000 - i, cites=("O-x",)) for i in range(300)])
    assert ledger.out["admission-decisions"] == []
    ledger.feed(outcome(S, 1, "O-x", checks=[check("port already bound")]))
    ids = [d["candidate_id"] for d in ledger.out["admission-decisions"]]
    assert sorted(ids) == [f"C{i:03d}" for i in range(300)] and all(
        d["decision"] == "accepted" for d in ledger.out["admission-decisions"])
    ledger.flush()
    assert len(ledger.out["admission-decisions"]) == 300
    assert not [key for key in ledger.processor.state.store if key[0].startswith("candidate_")]


def test_the_outcome_that_passes_the_horizon_is_used_before_the_horizon_decides():
    ledger = Ledger(LedgerConfig(provenance_horizon=5)).feed(candidate("C1", position=3, cites=("O-x",)))
    ledger.feed(outcome(S, 8, "O-x", checks=[check("port already bound")]))  # 3 + 5 == 8
    [d] = ledger.out["admission-decisions"]
    assert d["decision"] == "accepted" and d["missing_sources"] == []


def test_a_candidate_arriving_past_its_own_horizon_is_decided_at_once():
    ledger = Ledger(LedgerConfig(provenance_horizon=5)).feed(outcome(S, 8, "O-other", status="completed"))
    ledger.feed(candidate("C-edge", position=3, cites=("O-x",)), candidate("C-inside", position=4, cites=("O-x",)))
    assert [d["candidate_id"] for d in ledger.out["admission-decisions"]] == ["C-edge"]
    assert ledger.out["admission-decisions"][0]["reasons"] == ["missing_source"]


def test_a_waiting_candidate_sees_the_heads_current_when_it_is_decided():
    ledger = Ledger().feed(candidate("C1", cites=("O-x",), cue="a b c d e f"))
    ledger.feed(experience(S, 10, "E1", cue="a b c d e f"), experience(S, 11, "E1", revision=2, cue="a b c d e g"))
    ledger.feed(outcome(S, 12, "O-x", checks=[check("z")]))
    [d] = ledger.out["admission-decisions"]
    assert [(n["artifact_ref"]["revision"], n["score"], n["same_cue"]) for n in d["near_duplicates"]] == [(2, 0.8, False)]


# --------------------------------------------------------------------- the bigram index under head changes


CUE_WORDS = st.sampled_from(["port", "Already", "bound", "of", "the", "sandbox", "\ufb01x", "fix", "  ", "!"])
CUES = st.lists(CUE_WORDS, min_size=1, max_size=6).map(" ".join)


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    revisions=st.lists(st.tuples(st.integers(0, 4), st.integers(1, 4), st.one_of(st.none(), CUES)), max_size=30),
    probes=st.lists(st.tuples(CUES, st.one_of(st.none(), st.integers(0, 4))), min_size=1, max_size=4),
)
def test_near_duplicates_equal_brute_force_over_current_heads(revisions, probes):
    """Out-of-order revisions, heads losing or changing their failure block,
    NFKC-equal words, and ``artifact_id`` exclusion: the index finds exactly
    the heads a full scan finds."""
    records, seen = [], {}
    for i, (artifact, revision, cue) in enumerate(revisions):
        if cue is not None and not normalize(cue):
            cue = "x"
        records.append(experience(S, 10 + i, f"E{artifact}", revision=revision, cue=cue or "x", failure=cue is not None))
        seen.setdefault((artifact, revision), cue)
    heads: dict[int, tuple[int, str | None]] = {}
    for (artifact, revision), cue in seen.items():
        if artifact not in heads or revision > heads[artifact][0]:
            heads[artifact] = (revision, cue)
    ledger = Ledger().feed(FAILED, *records)
    ledger.feed(*[candidate(f"C{i}", cue=cue, artifact_id=None if own is None else f"E{own}") for i, (cue, own) in enumerate(probes)])
    got = decisions(ledger)
    for i, (cue, own) in enumerate(probes):
        key, expected = normalize(cue), []
        for artifact, (revision, head_cue) in heads.items():
            if head_cue is None or artifact == own or not key:
                continue
            head_key = normalize(head_cue)
            shared, total = admission.dice_parts(admission.cue_bigrams(key), admission.cue_bigrams(head_key))
            if admission.is_near_duplicate(shared, total):
                expected.append((-round(shared / total, 4), f"E{artifact}", revision, head_key == key))
        actual = [(-n["score"], n["artifact_ref"]["artifact_id"], n["artifact_ref"]["revision"], n["same_cue"])
                  for n in got[f"C{i}"]["near_duplicates"]]
        assert actual == sorted(expected)


# --------------------------------------------------------------------- wire format


def test_decisions_with_float_scores_round_trip_through_avro_byte_for_byte():
    ledger = Ledger().feed(FAILED, experience(S, 10, "E-a", cue="a b c d e f"), experience(S, 11, "E-b", cue="a b c d e g"),
                           experience(S, 12, "E-c", cue="a b c d e f g h i j"))
    ledger.feed(candidate("C1", cue="a b c d e f"), candidate("C2", cue="a b c d e f g h i k"), candidate("C3", failure=False))
    scores = sorted(n["score"] for d in ledger.out["admission-decisions"] for n in d["near_duplicates"])
    assert scores == [0.8, 0.8889, 1.0]
    for value in ledger.out["admission-decisions"]:
        back = avro.decode("AdmissionDecision", avro.encode("AdmissionDecision", value))
        assert orjson.dumps(back, option=orjson.OPT_SORT_KEYS) == orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
        assert back["decision_digest"] == digest({k: v for k, v in back.items() if k != "decision_digest"})
        AdmissionDecision.model_validate(back)


# --------------------------------------------------------------------- revision statistics vs top_revisions, determinism


def _last_rows(out: dict) -> dict[tuple, dict]:
    return {(r["scope_id"], r["artifact_ref"]["artifact_id"], r["artifact_ref"]["revision"]): r for r in out["revision-statistics"]}


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_revision_rows_agree_with_observations_top_revisions_and_a_rebuild(seed):
    records = list(generate_journal(Workload(scopes=3, outcomes_per_scope=60, heads_per_scope=6, handoffs=3, seed=seed, candidates=0.4)))
    out = Ledger(LedgerConfig(review_threshold=2)).feed(*records).flush().out
    rows = _last_rows(out)
    counted: dict[tuple, Counter] = defaultdict(Counter)
    for o in out["recurrence-observations"]:
        counted[(o["scope_id"], o["artifact_ref"]["artifact_id"], o["artifact_ref"]["revision"])][o["event"]] += 1
    assert set(rows) == set(counted)
    for key, counts in counted.items():
        assert [rows[key][e] for e in ("selected", "recurred", "avoided")] == [counts[e] for e in ("selected", "recurred", "avoided")]
        RevisionStatistics.model_validate(rows[key])
    latest = {s["scope_id"]: s for s in out["recurrence-statistics"]}
    for scope_id, stats in latest.items():
        for row in stats["top_revisions"]:
            own = rows[(scope_id, row["artifact_ref"]["artifact_id"], row["artifact_ref"]["revision"])]
            assert {k: own[k] for k in row} == row
        assert stats["needing_review"] == sum(1 for k, r in rows.items() if k[0] == scope_id and r["needs_review"])
    previous: dict[tuple, dict] = {}
    for r in out["revision-statistics"]:  # re-published only when it changes
        key = (r["scope_id"], r["artifact_ref"]["artifact_id"], r["artifact_ref"]["revision"])
        assert previous.get(key) != r
        previous[key] = r
    shuffled = list(out["recurrence-observations"])
    random.Random(seed).shuffle(shuffled)
    surfaces = surfaces_from(out["recurrence-statistics"], out["revision-statistics"])
    assert compare_revisions(rebuild_revisions(shuffled, review_threshold=2, surfaces=surfaces), out["revision-statistics"]) == []


def _files(ledger: Ledger) -> dict[str, list[bytes]]:
    return {t: [orjson.dumps(v, option=orjson.OPT_SORT_KEYS) for v in vs] for t, vs in ledger.out.items() if t != "dead-letter" and vs}


def _pool_record():
    position = st.integers(0, 40)
    return st.one_of(
        st.builds(lambda p, a, r, c, f: experience(S, p, a, revision=r, cue=c, failure=f), position,
                  st.sampled_from(["E1", "E2", "E3"]), st.integers(1, 3), st.sampled_from(["a b c", "a b d", "x y", "a b c d"]), st.booleans()),
        st.builds(lambda p, o, s, n, r: outcome(S, p, o, status=s, receipt_id=r, observations=[claim("a b c")],
                                                 checks=[check(["a b c", "x y", "zz"][i % 3], status=["failed", "passed"][i % 2]) for i in range(n)]),
                  position, st.sampled_from(["O1", "O2", "O3"]), st.sampled_from(["failed", "completed", "blocked"]), st.integers(0, 3),
                  st.sampled_from([None, "R1"])),
        st.builds(lambda p, c, cites, cue, art: candidate(c, position=p, cites=tuple(cites), cue=cue, artifact_id=art), position,
                  st.sampled_from(["C1", "C2", "C3", "C4"]), st.lists(st.sampled_from(["O1", "O2", "O3", "O-never"]), max_size=3),
                  st.sampled_from(["a b c", "a b d", "x y", "", "the tests failed"]), st.sampled_from([None, "E1"])),
        st.builds(lambda p, cites: handoff(S, p, "H1", cites), position,
                  st.lists(st.tuples(st.sampled_from(["E1", "E2"]), st.integers(1, 2)), max_size=3, unique=True)),
        st.builds(lambda p: receipt(S, p, "R1", "H1"), position),
    )


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(records=st.lists(_pool_record(), max_size=40), horizon=st.sampled_from([None, 1, 3, 10]),
       window=st.tuples(st.integers(0, 40), st.integers(0, 40)))
def test_any_interleaving_decides_each_candidate_once_and_a_replayed_slice_changes_nothing(records, horizon, window):
    config = LedgerConfig(provenance_horizon=horizon)
    ledger = Ledger(config).feed(*records).flush()
    ids = [d["candidate_id"] for d in ledger.out["admission-decisions"]]
    assert len(ids) == len(set(ids))
    store = ledger.processor.state.store
    assert {key[2] for key in store if key[0] == "candidate"} == set(ids)
    assert not [key for key in store if key[0].startswith("candidate_")]  # nothing left waiting
    first, last = sorted(window)
    assert _files(Ledger(config).feed(*records, *records[first:last]).flush()) == _files(ledger)
