"""Given/when/then helpers: build journal records and run them through the
same intake + core as the embedded runner, without files."""

from __future__ import annotations

import copy
import json
from collections import defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from recurrence_ledger.ledger.intake import Coordinates, ingest_journal_line
from recurrence_ledger.ledger.normalize import normalize
from recurrence_ledger.ledger.processor import LedgerConfig, LedgerProcessor
from recurrence_ledger.ledger.streaks import review_candidate_id
from recurrence_ledger.catalogue import OUTPUT_TOPICS


def ev(ref: str = "ci:run") -> list[dict]:
    """Non-empty exact evidence."""
    return [{"kind": "exact", "ref": ref}]


def experience(scope, position, artifact_id, revision=1, cue="port already bound", surface="experience_content",
               condition="tests started in sandbox", subject="ports free before pytest", failure=True, severity=None) -> dict:
    """An experience-revisions journal record (failure block unless
    failure=False; with ``severity``, contract §22, when one is given)."""
    block = None
    if failure:
        block = {
            "signature": {"recall_cue": cue, "symptom": None},
            "repair_surface": surface,
            "verification": {"condition": condition, "check_subject": subject},
        }
        if severity is not None:
            block["severity"] = severity
    return {"topic": "experience-revisions", "value": {
        "scope_id": scope, "journal_position": position,
        "artifact_ref": {"family": "experience", "artifact_id": artifact_id, "revision": revision},
        "content": {"situation": "s", "action": "a", "outcome": "o", "lesson": f"lesson {artifact_id} r{revision}", "failure": block},
    }}


def handoff(scope, position, artifact_id, cites, revision=1) -> dict:
    """A handoff-revisions record citing ``cites`` = [(artifact_id, revision), …]."""
    return {"topic": "handoff-revisions", "value": {
        "scope_id": scope, "journal_position": position,
        "artifact_ref": {"family": "handoff", "artifact_id": artifact_id, "revision": revision},
        "artifact_citations": [
            {"artifact_ref": {"family": "experience", "artifact_id": a, "revision": r}} for a, r in cites
        ],
        "memory_citations": [],
    }}


def receipt(scope, position, source_id, handoff_id, handoff_revision=1, status="accepted", selection="exact",
            evidence_status="available") -> dict:
    """A handoff-receipts record selecting ``handoff_id``."""
    ref = {"family": "handoff", "artifact_id": handoff_id, "revision": handoff_revision}
    return {"topic": "handoff-receipts", "value": {
        "scope_id": scope, "journal_position": position,
        "source_ref": {"source_type": "handoff_receipt", "source_id": source_id},
        "status": status, "selection": selection, "selected_revision": ref, "current_revision": ref,
        "evidence_status": evidence_status,
    }}


def check(name, status="failed", basis="verified", evidence=None) -> dict:
    """A TaskCheck."""
    return {"name": name, "status": status, "basis": basis,
            "evidence": ev() if evidence is None else evidence, "details": None}


def claim(text, basis="verified", evidence=None) -> dict:
    """A WorkClaim observation."""
    return {"text": text, "basis": basis, "evidence": ev("trace:1") if evidence is None else evidence}


def outcome(scope, position, source_id, status="failed", receipt_id=None, checks=(), observations=()) -> dict:
    """A task-outcomes record."""
    return {"topic": "task-outcomes", "value": {
        "scope_id": scope, "journal_position": position,
        "source_ref": {"source_type": "task_outcome", "source_id": source_id},
        "status": status,
        "handoff_receipt_ref": None if receipt_id is None else {"source_type": "handoff_receipt", "source_id": receipt_id},
        "observations": list(observations), "checks": list(checks),
    }}


def line(record: dict) -> bytes:
    """A journal line."""
    return json.dumps(record).encode()


def write_journal(path: Path, lines: Iterable[dict | bytes]) -> Path:
    """A journal file, one record (dict) or literal line (bytes) per line."""
    path.write_bytes(b"".join((item if isinstance(item, bytes) else line(item)) + b"\n" for item in lines))
    return path


#: The fixture cases whose facts do not depend on arrival order (contract
#: §16): every :func:`causal_order` of their journal gives the same facts
#: and final views (tests/cases/README.md).
CAUSAL_CASES = ("forward_refs", "unknown_reasons", "holdout_rules", "holdout_effects")


def causal_order(order: list[dict]) -> list[dict]:
    """``order`` with each Task Outcome moved after every Experience
    revision at an earlier position; an order that already keeps the rule
    is returned unchanged (the same dicts), so every such order can be drawn.

    The arrival orders of CAUSAL_CASES that must give the same result keep
    clear of the two rules of earlier revisions that stay arrival-dependent
    on purpose: an Experience revision that arrives after an unlinked
    outcome at a later position was decided does not reopen its frozen
    ``scope_heads`` match (contract §1, ``late_revisions``) — hence this
    rule; and a review candidate keeps the failure refs known when it is
    published (§8) — those journals bring no run to the review threshold.
    The provenance horizon (10,000 positions) never passes inside them:
    only the end of the journal decides what still waits."""
    waiting, arrived = list(order), []
    while waiting:
        for index, record in enumerate(waiting):
            value = record["value"]
            if record["topic"] == "task-outcomes" and any(
                other["topic"] == "experience-revisions" and other["value"]["journal_position"] < value["journal_position"]
                for other in waiting
            ):
                continue
            arrived.append(waiting.pop(index))
            break
    return arrived


def stale_selection_journal(scope: str) -> list[dict]:
    """E1 r1 cited by H1 (received through R1), Task Outcomes selecting it
    at positions 10, 20 and 30, and E1 r2 at position 15 (the fifth
    record): in journal order the selections at 20 and 30 are stale
    (contract §14)."""
    return [
        experience(scope, 1, "E1"), handoff(scope, 2, "H1", [("E1", 1)]), receipt(scope, 3, "R1", "H1"),
        outcome(scope, 10, "O10", status="completed", receipt_id="R1"),
        experience(scope, 15, "E1", revision=2),
        *(outcome(scope, p, f"O{p}", status="completed", receipt_id="R1") for p in (20, 30)),
    ]


def fix_journal(scope: str, history: list[bool], approve: bool, fix_surface: str = "experience_content") -> list[dict]:
    """A candidate and its fix revision (contract §18): E1 r1, three
    unlinked recurrences of its cue (positions 5–7, its first run: the
    candidate), E1 r2 (position 20, repair surface ``fix_surface``) cited
    by H2 and received through R2, and one linked Task Outcome of r2 per
    ``history`` entry (True: recurred, False: avoided) at positions 30, 40,
    …; with ``approve`` a decision at the end approves the candidate with
    fix r2 (else the candidate is superseded by r2: its repair is r2's too)."""
    cue = "port already bound"
    records = [
        experience(scope, 1, "E1", cue=cue),
        *(outcome(scope, p, f"U{p}", checks=[check(cue)]) for p in (5, 6, 7)),
        experience(scope, 20, "E1", revision=2, cue=cue, surface=fix_surface),
        handoff(scope, 21, "H2", [("E1", 2)]), receipt(scope, 22, "R2", "H2"),
    ]
    for number, recurred in enumerate(history):
        p = 30 + 10 * number
        if recurred:
            records.append(outcome(scope, p, f"O{p}", receipt_id="R2", checks=[check(cue)]))
        else:
            records.append(outcome(scope, p, f"O{p}", status="completed", receipt_id="R2",
                                   observations=[claim("tests started in sandbox")], checks=[check("ports free before pytest", status="passed")]))
    if approve:
        candidate = review_candidate_id(scope, {"family": "experience", "artifact_id": "E1", "revision": 1}, normalize(cue), None)
        records.append({"topic": "review-decisions", "value": {
            "scope_id": scope, "decision_id": "D1", "candidate_id": candidate, "journal_position": 30 + 10 * len(history),
            "decision": "approved", "reason": None, "reviewer": "rev-1", "decided_at": "2025-03-01T09:00:00Z",
            "fix_revision": {"family": "experience", "artifact_id": "E1", "revision": 2},
        }})
    return records


def mutated(record: dict, path: Sequence, value: Any = None, *, delete: bool = False) -> dict:
    """A deep copy of ``record`` with ``path`` set to ``value`` (or deleted)."""
    record = copy.deepcopy(record)
    target = record
    for part in path[:-1]:
        target = target[part]
    if delete:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return record


class Ledger:
    """A processor fed journal records; ``out`` collects values per topic.

    The views are published every ``view_batch`` records (contract §8;
    1 by default, so every record's view changes are visible at once)."""

    def __init__(self, config: LedgerConfig | None = None, view_batch: int = 1):
        self.processor = LedgerProcessor(config=config, validate_outputs=True)
        self.out: dict[str, list[dict]] = defaultdict(list)
        self.offset = 0
        self.view_batch = view_batch

    def feed(self, *records: dict | bytes) -> Ledger:
        """Apply records (dicts or raw lines) in order."""
        for record in records:
            raw = record if isinstance(record, bytes) else line(record)
            for emit in ingest_journal_line(self.processor, raw, Coordinates("source-journal", None, self.offset, None)):
                self.out[emit.topic].append(emit.value)
            self.offset += 1
            if self.offset % self.view_batch == 0:
                self.end_batch()
        return self

    def end_batch(self) -> Ledger:
        """Publish the batch's view records."""
        for emit in self.processor.end_batch():
            self.out[emit.topic].append(emit.value)
        return self

    def flush(self) -> Ledger:
        """End of journal (the last batch ends too)."""
        for emit in self.processor.flush():
            self.out[emit.topic].append(emit.value)
        return self.end_batch()

    def stats(self, scope: str) -> dict:
        """Last statistics record of ``scope``."""
        return [s for s in self.out["recurrence-statistics"] if s["scope_id"] == scope][-1]

    def observations(self) -> list[str]:
        """``"<event> <artifact>r<rev> <outcome>"`` in publication order."""
        return [
            f"{o['event']} {o['artifact_ref']['artifact_id']}r{o['artifact_ref']['revision']} {o['task_outcome_ref']['source_id']}"
            for o in self.out["recurrence-observations"]
        ]

    def matches(self) -> list[tuple]:
        """``(outcome, kind, index, mode, result, target or None)`` per match."""
        return [
            (m["task_outcome_ref"]["source_id"], m["failure_ref"]["item_kind"], m["failure_ref"]["item_index"],
             m["candidate_set_mode"], m["result"],
             None if m["artifact_ref"] is None else f"{m['artifact_ref']['artifact_id']}r{m['artifact_ref']['revision']}")
            for m in self.out["recurrence-matches"]
        ]

    def candidate_refs(self, match: dict) -> list[dict]:
        """The frozen candidate set of a match: inline, or the CandidateSet
        it names on candidate-sets (contract §6), which must precede it."""
        if match["candidate_refs"] is not None:
            return match["candidate_refs"]
        [found] = [s for s in self.out["candidate-sets"]
                   if (s["scope_id"], s["candidate_set_digest"]) == (match["scope_id"], match["candidate_set_digest"])]
        return found["candidate_refs"]

    def reasons(self) -> list[str]:
        """Dead-letter reason codes in order."""
        return [d["reason"] for d in self.out["dead-letter"]]


def all_topics_empty(ledger: Ledger) -> bool:
    """True when nothing at all was emitted."""
    return all(not ledger.out[topic] for topic in OUTPUT_TOPICS)
