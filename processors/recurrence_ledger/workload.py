"""A deterministic synthetic journal for benchmarks, load tests and property
tests: many scopes, each with failure-bearing Experience heads, Handoffs,
Receipts and a mix of Task Outcomes that select, recur, avoid, stay unknown,
go unlinked or hit ambiguous matches.

``generate_journal`` yields journal records (``{"topic", "value"}``, the
``docs/journals.md`` format) in journal order; the same arguments always give
the same records.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass


@dataclass(frozen=True)
class Workload:
    """Shape of a generated journal.

    ``scopes``: number of scopes. ``outcomes_per_scope``: Task Outcomes per
    scope. ``heads_per_scope``: failure-bearing Experience artifacts per scope
    (each gets revision 1; every 10th also a revision 2 later). ``handoffs``:
    Handoff revisions (and receipts) per scope. ``seed``: RNG seed.
    ``candidates``: probability that an admission candidate follows
    a Task Outcome — citing it, or the next one (so it waits), with the cue
    of a head, a near-duplicate of one or a new one, and now and then no
    repair_surface. 0 (the default) draws nothing, so journals of the other
    fields are unchanged. ``shared_cues``: the first this many failure
    cues of every scope are the same in all scopes (signature patterns
    across scopes, contract §23); ``groups``: with n > 0, scope i is
    ``group-<i mod n>/scope-<i>`` (pattern groups with the separator
    ``/``). Both 0 by default: journals unchanged. ``severities``: the
    failure of head k gets the severity :data:`SEVERITIES` ``[k mod 5]``
    (contract §22: head 0 — a shared cue, experience_content — is critical,
    so its runs get review candidates from the first recurrence); False
    (the default) rates none: journals unchanged.
    """

    scopes: int = 100
    outcomes_per_scope: int = 100
    heads_per_scope: int = 10
    handoffs: int = 5
    seed: int = 7
    candidates: float = 0.0
    shared_cues: int = 0
    groups: int = 0
    severities: bool = False


#: The severity of head k's failure with ``Workload.severities`` (None: unrated).
SEVERITIES: tuple[str | None, ...] = ("critical", None, "high", "low", "medium")


def _ref(family: str, artifact_id: str, revision: int) -> dict:
    return {"family": family, "artifact_id": artifact_id, "revision": revision}


def _exact(ref: str) -> list[dict]:
    return [{"kind": "exact", "ref": ref}]


class _Scope:
    def __init__(self, index: int, shape: Workload, rng: random.Random):
        self.id = f"scope-{index:05d}" if not shape.groups else f"group-{index % shape.groups}/scope-{index:05d}"
        self.shape = shape
        self.rng = rng
        self.position = 0
        self.surfaces = ("experience_content", "recall_policy", "working_state", "acceptance_check")

    def next_position(self) -> int:
        self.position += 1
        return self.position

    def cue(self, k: int) -> str:
        if k < self.shape.shared_cues:
            return f"Failure {k} recurred in many scopes"
        return f"Failure {k} of {self.id} recurred"

    def experience(self, k: int, revision: int) -> dict:
        record = self._experience(k, revision)
        severity = SEVERITIES[k % len(SEVERITIES)] if self.shape.severities else None
        if severity is not None:
            record["value"]["content"]["failure"]["severity"] = severity
        return record

    def _experience(self, k: int, revision: int) -> dict:
        return {"topic": "experience-revisions", "value": {
            "scope_id": self.id, "journal_position": self.next_position(),
            "artifact_ref": _ref("experience", f"E{k}", revision),
            "content": {
                "situation": f"situation {k}", "action": f"action {k}", "outcome": f"outcome {k}",
                "lesson": f"lesson {k} r{revision}",
                "failure": {
                    "signature": {"recall_cue": self.cue(k), "symptom": None},
                    "repair_surface": self.surfaces[k % 4],
                    "verification": {"condition": f"condition {k} occurred", "check_subject": f"check {k} ran"},
                },
            },
        }}

    def handoff(self, h: int, cited: list[int]) -> dict:
        return {"topic": "handoff-revisions", "value": {
            "scope_id": self.id, "journal_position": self.next_position(),
            "artifact_ref": _ref("handoff", f"H{h}", 1),
            "artifact_citations": [{"artifact_ref": _ref("experience", f"E{k}", 1)} for k in cited],
            "memory_citations": [],
        }}

    def receipt(self, h: int, accepted: bool) -> dict:
        ref = _ref("handoff", f"H{h}", 1)
        return {"topic": "handoff-receipts", "value": {
            "scope_id": self.id, "journal_position": self.next_position(),
            "source_ref": {"source_type": "handoff_receipt", "source_id": f"R{h}"},
            "status": "accepted" if accepted else "rejected", "selection": "exact",
            "selected_revision": ref, "current_revision": ref, "evidence_status": "available",
        }}

    def outcome(self, n: int, cited: list[int] | None, receipt: int | None) -> dict:
        rng = self.rng
        heads = self.shape.heads_per_scope
        target = rng.choice(cited) if cited else rng.randrange(heads)
        kind = rng.random()
        observations: list[dict] = []
        checks: list[dict] = []
        status = "completed"
        if kind < 0.45:  # recurrence of the target's failure
            status = "failed"
            checks.append({"name": self.cue(target).upper(), "status": rng.choice(["failed", "timed_out", "unavailable"]),
                           "basis": "verified", "evidence": _exact(f"ci:{n}"), "details": None})
        elif kind < 0.80:  # the bound check ran and passed: avoided when linked
            observations.append({"text": f"Condition {target} occurred.", "basis": "verified", "evidence": _exact(f"trace:{n}")})
            checks.append({"name": f"check {target} ran", "status": "passed", "basis": "verified",
                           "evidence": _exact(f"ci:{n}"), "details": None})
        elif kind < 0.90:  # declared only: unknown
            checks.append({"name": f"check {target} ran", "status": "passed", "basis": "declared", "evidence": [], "details": None})
        elif kind < 0.95:  # two failure items for one revision: no verdict
            status = "failed"
            checks += [{"name": self.cue(target), "status": "failed", "basis": "verified", "evidence": _exact(f"ci:{n}:{i}"),
                        "details": None} for i in range(2)]
        else:  # a failure nobody recorded
            status = "failed"
            checks.append({"name": f"unrecorded failure {n}", "status": "failed", "basis": "verified",
                           "evidence": _exact(f"ci:{n}"), "details": None})
        checks.append({"name": "lint", "status": "passed", "basis": "verified", "evidence": _exact(f"lint:{n}"), "details": None})
        return {"topic": "task-outcomes", "value": {
            "scope_id": self.id, "journal_position": self.next_position(),
            "source_ref": {"source_type": "task_outcome", "source_id": f"O{n}"},
            "status": status,
            "handoff_receipt_ref": None if receipt is None else {"source_type": "handoff_receipt", "source_id": f"R{receipt}"},
            "observations": observations, "checks": checks,
        }}

    def candidate(self, n: int) -> dict:
        rng = self.rng
        k = rng.randrange(self.shape.heads_per_scope)
        style = rng.random()
        cue = self.cue(k) if style < 0.3 else f"{self.cue(k)} once more" if style < 0.6 else f"novel failure {n} in {self.id}"
        # The next outcome, when there is one: a journal's end decides a
        # waiting candidate in the embedded runner but not on Kafka.
        cited = n if rng.random() < 0.7 or n + 1 == self.shape.outcomes_per_scope else n + 1
        return {"topic": "experience-candidates", "value": {
            "candidate_id": f"C{n}", "scope_id": self.id, "journal_position": self.next_position(), "artifact_id": None,
            "content": {
                "situation": f"situation {n}", "action": f"action {n}", "outcome": f"outcome {n}", "lesson": f"lesson {n}",
                "failure": {
                    "signature": {"recall_cue": cue, "symptom": None},
                    "repair_surface": None if rng.random() < 0.1 else self.surfaces[k % 4],
                    "verification": {"condition": f"condition {k} occurred", "check_subject": f"check {k} ran"},
                },
            },
            "cited_sources": [{"source_type": "task_outcome", "source_id": f"O{cited}"}],
        }}

    def records(self) -> Iterator[dict]:
        rng, shape = self.rng, self.shape
        for k in range(shape.heads_per_scope):
            yield self.experience(k, 1)
        cited_by: dict[int, list[int]] = {}
        for h in range(shape.handoffs):
            cited = sorted(rng.sample(range(shape.heads_per_scope), min(3, shape.heads_per_scope)))
            cited_by[h] = cited
            yield self.handoff(h, cited)
            yield self.receipt(h, accepted=h % 5 != 4)
        for n in range(shape.outcomes_per_scope):
            if n == shape.outcomes_per_scope // 2:
                for k in range(0, shape.heads_per_scope, 10):
                    yield self.experience(k, 2)
            if shape.handoffs and rng.random() < 0.6:
                h = rng.randrange(shape.handoffs)
                yield self.outcome(n, cited_by[h], h)
            else:
                yield self.outcome(n, None, None)
            if shape.candidates and rng.random() < shape.candidates:
                yield self.candidate(n)


def generate_journal(shape: Workload) -> Iterator[dict]:
    """Journal records for ``shape``, scopes interleaved round-robin (each
    scope's records stay in journal-position order)."""
    rng = random.Random(shape.seed)
    streams = [_Scope(i, shape, rng).records() for i in range(shape.scopes)]
    while streams:
        alive = []
        for stream in streams:
            record = next(stream, None)
            if record is not None:
                yield record
                alive.append(stream)
        streams = alive
