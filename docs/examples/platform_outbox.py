"""A complete, runnable example of an agent platform publishing to the
recurrence ledger with ``recurrence_ledger.client`` (docs/integrating.md).

The platform keeps its own objects in SQLite (lessons, handoffs, task runs)
and, in the same database transaction as each change, writes the ledger
event it causes to an outbox table, with the scope's next journal position.
A relay then publishes the outbox in order through a ``Publisher`` and marks
rows sent only after the broker acknowledged them (``flush``).

    python docs/examples/platform_outbox.py [--bootstrap localhost:9092] \
        [--schema-registry-url URL] [--topic-prefix dev.] \
        [--kafka-config client.properties] [--journal-out events.jsonl] \
        [--candidate-id sha256:...]

Without a flag, its setting comes from the environment as every
``recurrence-ledger`` command reads it (``KAFKA_BOOTSTRAP_SERVERS``,
``KAFKA_CONFIG_FILE``, ``SCHEMA_REGISTRY_URL``, ``RL_TOPIC_PREFIX``:
``client.Publisher.from_environment``).

``--dry-run`` builds and checks every event without Kafka and prints the
journal (``{"topic": kind, "value": event}`` per line: ``recurrence-ledger
run-journal`` reads it). ``--candidate-id`` adds a reviewer's decision on a
review candidate the ledger published (its ``candidate_id`` on the
``review-candidates`` topic or in the review inbox).
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
from pathlib import Path

from recurrence_ledger import client

SCOPE = "platform-outbox"  #: a scope of its own: the packaged example's billing-api may be on the same topics
SCHEMA = """
create table if not exists scopes (scope_id text primary key, last_position integer not null);
create table if not exists lessons (lesson_id text, revision integer, lesson text, primary key (lesson_id, revision));
create table if not exists outbox (id integer primary key autoincrement, scope_id text not null, kind text not null,
                                   value text not null, sent integer not null default 0);
"""


class Platform:
    """The platform's store: every change and the ledger event it causes
    are written in one transaction (the outbox pattern)."""

    def __init__(self, database: sqlite3.Connection):
        self.db = database
        self.db.executescript(SCHEMA)

    def _next_position(self, scope_id: str) -> int:
        """The scope's next journal position, taken inside the caller's
        transaction: strictly increasing per scope, never reused."""
        row = self.db.execute("select last_position from scopes where scope_id = ?", (scope_id,)).fetchone()
        position = (row[0] if row else 0) + 1
        self.db.execute("insert into scopes values (?, ?) on conflict(scope_id) do update set last_position = excluded.last_position",
                        (scope_id, position))
        return position

    def _emit(self, event: client.TaskOutcome | object) -> None:
        """Queue a built (and so already checked) event in the outbox."""
        self.db.execute("insert into outbox (scope_id, kind, value) values (?, ?, ?)",
                        (event.scope_id, client.kind_of(event), event.model_dump_json()))  # type: ignore[attr-defined]

    def publish_lesson(self, lesson_id: str, revision: int, lesson: str, recall_cue: str, check_subject: str) -> None:
        """A lesson (Experience revision, immutable once published)."""
        with self.db:
            self.db.execute("insert into lessons values (?, ?, ?)", (lesson_id, revision, lesson))
            self._emit(client.experience_revision(
                scope_id=SCOPE, journal_position=self._next_position(SCOPE),
                artifact_ref={"family": "experience", "artifact_id": lesson_id, "revision": revision},
                content={"situation": "The agent changed the billing OpenAPI contract", "action": "Edited the YAML and pushed",
                         "outcome": "CI failed: the generated client no longer matched", "lesson": lesson,
                         "failure": {"signature": {"recall_cue": recall_cue, "symptom": None},
                                     "repair_surface": "experience_content",
                                     "verification": {"condition": "Edited openapi/billing.yaml", "check_subject": check_subject}}},
            ))

    def publish_handoff(self, handoff_id: str, lesson_id: str, lesson_revision: int) -> None:
        """A handoff note for the next agent, citing the lesson it carries."""
        with self.db:
            self._emit(client.handoff_revision(
                scope_id=SCOPE, journal_position=self._next_position(SCOPE),
                artifact_ref={"family": "handoff", "artifact_id": handoff_id, "revision": 1},
                artifact_citations=[{"artifact_ref": {"family": "experience", "artifact_id": lesson_id, "revision": lesson_revision}}],
            ))

    def agent_received(self, receipt_id: str, handoff_id: str) -> None:
        """The successor agent's session started with this handoff: the receipt."""
        with self.db:
            handoff = {"family": "handoff", "artifact_id": handoff_id, "revision": 1}
            self._emit(client.handoff_receipt(
                scope_id=SCOPE, journal_position=self._next_position(SCOPE),
                source_ref={"source_type": "handoff_receipt", "source_id": receipt_id},
                status="accepted", selection="exact", selected_revision=handoff, current_revision=handoff,
                evidence_status="available",
            ))

    def task_ended(self, task_id: str, receipt_id: str | None, check: str, passed: bool, ci_job: str) -> None:
        """A task run ended: its outcome, with the check the lesson is bound to."""
        with self.db:
            self._emit(client.task_outcome(
                scope_id=SCOPE, journal_position=self._next_position(SCOPE),
                source_ref={"source_type": "task_outcome", "source_id": task_id},
                status="completed" if passed else "failed",
                handoff_receipt_ref={"source_type": "handoff_receipt", "source_id": receipt_id} if receipt_id else None,
                checks=[{"name": check, "status": "passed" if passed else "failed", "basis": "verified",
                         "evidence": [{"kind": "exact", "ref": f"ci:job/{ci_job}"}], "details": None}],
            ))

    def propose_lesson(self, candidate_id: str, task_id: str, lesson: str, recall_cue: str, check_subject: str) -> None:
        """An agent proposes a new lesson: an admission candidate."""
        with self.db:
            self._emit(client.experience_candidate(
                candidate_id=candidate_id, scope_id=SCOPE, journal_position=self._next_position(SCOPE), artifact_id=None,
                content={"situation": "A contract edit left the generated billing client stale", "action": "Regenerated the client",
                         "outcome": "CI passed after make codegen", "lesson": lesson,
                         "failure": {"signature": {"recall_cue": recall_cue, "symptom": None}, "repair_surface": "acceptance_check",
                                     "verification": {"condition": "Edited openapi/billing.yaml", "check_subject": check_subject}}},
                cited_sources=[{"source_type": "task_outcome", "source_id": task_id}],
            ))

    def reviewer_decided(self, candidate_id: str, decision_id: str) -> None:
        """A reviewer rejected a review candidate in the platform's own UI."""
        with self.db:
            self._emit(client.review_decision(
                scope_id=SCOPE, decision_id=decision_id, candidate_id=candidate_id, journal_position=self._next_position(SCOPE),
                decision="rejected", reason="The CI runner was broken, not the lesson", reviewer="qa-lead",
                decided_at="2025-03-04T08:30:00Z", fix_revision=None,
            ))

    def unsent(self) -> list[tuple[int, str, str]]:
        """``(outbox id, kind, value JSON)`` not yet published, in order."""
        return self.db.execute("select id, kind, value from outbox where sent = 0 order by id").fetchall()

    def relay(self, publisher: client.Publisher) -> int:
        """Publish the outbox in order; mark rows sent once the broker has
        acknowledged them all. A crash before the mark publishes them again:
        the ledger counts a repeated event (same identity, same content) once."""
        rows = self.unsent()
        for _, kind, value in rows:
            publisher.publish(client.event(kind, json.loads(value)))
        publisher.flush()
        with self.db:
            self.db.executemany("update outbox set sent = 1 where id = ?", [(row_id,) for row_id, _, _ in rows])
        return len(rows)


def story(platform: Platform, candidate_id: str | None) -> None:
    """What happens on the platform: a lesson, a handoff that carries it, a
    receipt, task runs whose bound check passes and then fails again, a
    proposed lesson, and (given a candidate id) a reviewer's decision."""
    check = "Codegen check: generated client matches contract"
    cue = "Generated client out of date after contract edit"
    platform.publish_lesson("EXP-schema-drift", 1, "Run make codegen after editing the contract", cue, check)
    platform.publish_handoff("HO-billing-1", "EXP-schema-drift", 1)
    platform.agent_received("RCPT-billing-1", "HO-billing-1")
    platform.task_ended("task-1", "RCPT-billing-1", check, True, "4411")
    for number in (2, 3, 4):
        platform.task_ended(f"task-{number}", "RCPT-billing-1", cue, False, f"45{number}0")
    platform.propose_lesson("cand-client-regen", "task-4", "Regenerate clients/ whenever openapi/ changes", cue, check)
    if candidate_id:
        platform.reviewer_decided(candidate_id, "review-1")


def main(argv: list[str] | None = None) -> int:
    """Run the example; returns the exit code."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bootstrap", help="default: KAFKA_BOOTSTRAP_SERVERS")
    parser.add_argument("--kafka-config", type=Path, help="default: KAFKA_CONFIG_FILE")
    parser.add_argument("--schema-registry-url", help="default: SCHEMA_REGISTRY_URL (none: the fixed schema ids)")
    parser.add_argument("--topic-prefix", help="default: RL_TOPIC_PREFIX")
    parser.add_argument("--per-kind", action="store_true")
    parser.add_argument("--database", default=":memory:")
    parser.add_argument("--journal-out", type=Path)
    parser.add_argument("--candidate-id")
    parser.add_argument("--dry-run", action="store_true")
    args = parser.parse_args(argv)

    platform = Platform(sqlite3.connect(args.database))
    story(platform, args.candidate_id)
    journal = "".join(json.dumps({"topic": kind, "value": json.loads(value)}) + "\n" for _, kind, value in platform.unsent())
    if args.journal_out:
        args.journal_out.write_text(journal, encoding="utf-8")
    if args.dry_run:
        sys.stdout.write(journal)
        return 0
    given = {"bootstrap": args.bootstrap, "kafka_config": args.kafka_config, "schema_registry_url": args.schema_registry_url,
             "topic_prefix": args.topic_prefix}
    with client.Publisher.from_environment(**{name: value for name, value in given.items() if value is not None},
                                           per_kind=args.per_kind) as publisher:
        sent = platform.relay(publisher)
    print(f"published {sent} events to {', '.join(publisher.topics)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
