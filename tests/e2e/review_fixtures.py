"""Records of the review loop written by hand (contract §8, §18) for the
read-model, API and CLI tests of the review: ReviewCandidates, their
ReviewStatus rows, a scope's statistics record, and the read models fed
with them in Redis (no worker: these tests are about what is done with the
records, the worker's rules are the core's tests)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import redis

from recurrence_ledger.catalogue import REVIEW_CANDIDATES, REVIEW_STATUS
from recurrence_ledger.ledger.normalize import digest
from recurrence_ledger.ledger.records import Repair, ReviewCandidate, ReviewStatus, ScopeStatistics
from recurrence_ledger.ledger.streaks import review_candidate_id
from recurrence_ledger.read.records import Located


def ref(artifact_id: str, revision: int) -> dict:
    """An Experience ArtifactRef."""
    return {"family": "experience", "artifact_id": artifact_id, "revision": revision}


def candidate(scope_id: str, artifact_id: str, revision: int = 1, streak: int = 3, run_start: int | None = None) -> dict:
    """A valid ReviewCandidate of ``artifact_id`` r``revision`` in ``scope_id``
    with one failure item per recurred verdict of the run (task outcomes
    ``{artifact_id}-o1`` …)."""
    failure_refs = [
        {"task_outcome_ref": {"source_type": "task_outcome", "source_id": f"{artifact_id}-o{n}"}, "item_kind": "check", "item_index": 0,
         "item_digest": digest({"n": n, "artifact": artifact_id})}
        for n in range(1, streak + 1)
    ]
    value = {
        "candidate_id": review_candidate_id(scope_id, ref(artifact_id, revision), f"{artifact_id.lower()} fails", run_start),
        "scope_id": scope_id, "artifact_ref": ref(artifact_id, revision), "signature_key": f"{artifact_id.lower()} fails",
        "repair_surface": "experience_content", "streak": streak, "run_start_position": run_start,
        "reason": f"{streak} recurred verdicts in a row", "failure_refs": failure_refs,
    }
    return ReviewCandidate.model_validate(value).model_dump(mode="json")


def status(of: dict, state: str, *, decision: dict | None = None, fix: dict | None = None, repair: dict | None = None,
           reason_code: str | None = None) -> dict:
    """The ReviewStatus row of candidate ``of`` with ``state``."""
    value = {
        "scope_id": of["scope_id"], "candidate_id": of["candidate_id"], "artifact_ref": of["artifact_ref"], "signature_key": of["signature_key"],
        "streak": of["streak"], "status": state, "decision": decision, "fix_revision": fix, "repair": repair, "reason_code": reason_code,
    }
    return ReviewStatus.model_validate(value).model_dump(mode="json")


def applied(decision: str, reviewer: str, decided_at: str, position: int, reason: str | None = None, decision_id: str = "d1") -> dict:
    """The ``decision`` of a ReviewStatus row."""
    return {"decision_id": decision_id, "decision": decision, "reason": reason, "reviewer": reviewer, "decided_at": decided_at, "journal_position": position}


def repair(state: str, selected: int = 0, recurred: int = 0, avoided: int = 0, unknown: int = 0, streak: int = 0) -> dict:
    """The ``repair`` of a ReviewStatus row, as the model dumps it (its §21 ``effect`` at its default)."""
    value = {"status": state, "selected": selected, "recurred": recurred, "avoided": avoided, "unknown": unknown, "terminal_recurred_streak": streak}
    return Repair.model_validate(value).model_dump(mode="json")


def located_candidate(value: dict, partition: int, offset: int, timestamp: int) -> Located:
    """A ReviewCandidate read from ``review-candidates``."""
    return Located(REVIEW_CANDIDATES, partition, offset, timestamp, value)


def located_status(value: dict, partition: int, offset: int) -> Located:
    """A ReviewStatus read from ``review-status``."""
    return Located(REVIEW_STATUS, partition, offset, 10**12 + offset, value)


def statistics(scope_id: str, as_of_position: int) -> dict:
    """A ScopeStatistics record of ``scope_id`` with nothing counted but its position."""
    return ScopeStatistics(
        scope_id=scope_id, as_of_position=as_of_position, selected=0, recurred=0, avoided=0, unknown=0, unlinked_handoff_citations=0,
        needing_review=0, top_revisions=[], pending_outcomes=0, late_revisions=0,
    ).model_dump(mode="json", by_alias=True)


@contextlib.contextmanager
def decision_api(bootstrap: str, redis_url: str, reviewers: tuple[tuple[str, str], ...], candidates: list[dict],
                 api_token: str | None = None) -> Iterator[tuple[str, str]]:
    """A real uvicorn API over a fresh topic prefix whose read models hold
    ``candidates`` (open, their scopes at as_of_position 41) and which
    publishes decisions with ``reviewers``' tokens to the test broker;
    yields ``(prefix, base_url)``. The prefix's topics and namespace are
    removed at exit."""
    from recurrence_ledger.api.settings import ApiSettings
    from recurrence_ledger.read.history import ReadModels
    from recurrence_ledger.read.keys import default_namespace
    from recurrence_ledger.read.projection import RedisView
    from tests.e2e import harness
    from tests.e2e.api_server import running_api

    prefix = harness.new_prefix()
    client = redis.Redis.from_url(redis_url)
    try:
        harness.prepare(bootstrap, prefix, partitions=2)
        view = RedisView(redis_url, namespace=default_namespace(prefix))
        view.submit([statistics(scope, 41) for scope in sorted({value["scope_id"] for value in candidates})])
        assert not view.pending
        view.close()
        ReadModels(client, default_namespace(prefix)).apply(
            [located_candidate(value, 0, offset, 1_700_000_000_000 + offset) for offset, value in enumerate(candidates)])
        settings = ApiSettings(redis_url=redis_url, topic_prefix=prefix, api_token=api_token, reviewer_tokens=reviewers, kafka=bootstrap)
        with running_api(settings) as base_url:
            yield prefix, base_url
    finally:
        harness.remove_prefix(bootstrap, prefix, redis_url)
        client.close()
