"""A simulated agent platform (``recurrence-ledger simulate``): a realistic,
seeded stream of the six input events, built with the client library's
constructors and published through its :class:`Publisher`, consulting the
advisory through its :class:`Advisor` the way a recall ranker would.

What the platform does, per scope (``checkout-web``, ``billing-api``, …):
it publishes a few lessons (Experience revisions with a failure block, all
``experience_content``) and a handoff citing them, then runs tasks — a
receipt of the current handoff and a Task Outcome linked to it, aimed at one
cited lesson. Each lesson behaves one way:

- ``helps``: its condition is seen and its bound check passes (avoided),
  now and then it recurs anyway;
- ``recurs``: the failure its cue names comes back (recurred) most times;
- ``silent``: its condition is seen but its bound check never runs
  (``skipped``): no verdict, a binding suspect (contract §17);
- ``critical``: like ``recurs``, with ``severity: critical`` (contract §22).

With a holdout (the deployment's salt and rate, contract §21.5) each
scope has four handoffs, each withholding the lessons the assignment says
(``holdout.assign``; never a critical one): a task whose handoff withheld
its lesson gets no verdict for it, and its failure comes back more often.

When a lesson's run of recurrences reaches the review threshold (the
ledger publishes a review candidate, contract §8), a reviewer decides
after a while (most candidates): approves it with a fix — the next
revision of the lesson, which helps, and a new handoff citing it — or
rejects it with a reason. The candidate's id is the ledger's own
(``ledger.streaks.review_candidate_id`` over the run the platform knows it
caused). Now and then a task ends with a failure no lesson names, nothing
linked, and an agent proposes a lesson (an admission candidate).

The stream depends only on the seed: the same seed gives the same events
(scope ids carry the seed, ``sim<seed>-checkout-web``, so runs with
different seeds never share a journal position). The advisory informs the
ranking the simulator reports, never the events.
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from fractions import Fraction

from recurrence_ledger import policy
from recurrence_ledger.client import events as build
from recurrence_ledger.client.advisor import Advice, Advisor
from recurrence_ledger.client.publisher import Publisher
from recurrence_ledger.holdout import assign
from recurrence_ledger.ledger.models import Value
from recurrence_ledger.ledger.normalize import normalize
from recurrence_ledger.ledger.streaks import review_candidate_id

#: The scopes a simulation runs, in order (``--scopes N`` takes the first N).
SCOPE_NAMES: tuple[str, ...] = ("checkout-web", "billing-api", "search-indexer", "mobile-sync", "payments-ledger", "docs-site")
#: What a lesson can be like (module docstring), cycled over a scope's lessons after a seeded shuffle.
BEHAVIOURS: tuple[str, ...] = ("helps", "recurs", "silent", "critical", "helps", "recurs")
#: Lesson templates: (recall cue, condition, bound check, lesson).
LESSONS: tuple[tuple[str, str, str, str], ...] = (
    ("Generated client drifts from the OpenAPI contract", "Edited the OpenAPI contract", "codegen check: generated client matches contract",
     "Regenerate the client whenever the contract changes."),
    ("Payment form submits twice on a slow network", "Changed the submit handler", "e2e: single submit on slow network",
     "Disable the submit button until the request settles."),
    ("Migration locks the orders table", "Added a database migration", "migration lint: no table lock",
     "Split the migration and backfill in batches."),
    ("Feature flag default differs between services", "Added a feature flag", "flag defaults consistent across services",
     "Declare flag defaults in the shared registry only."),
    ("Cache key ignores the tenant", "Touched a cache key", "cache keys include the tenant id",
     "Build cache keys with the tenant helper."),
    ("Retry storm after a dependency timeout", "Changed a client timeout", "load test: retries stay bounded",
     "Use jittered backoff with a retry budget."),
)
#: Handoffs per scope with a holdout (each its own arm of the assignment, contract §21.5).
HANDOFFS_WITH_HOLDOUT = 4
#: The synthetic clock of the decisions' ``decided_at`` (a decision's time is shown, never ordered by).
CLOCK_START = datetime(2026, 1, 1, tzinfo=timezone.utc)


def _exact(ref: str) -> list[dict]:
    return [{"kind": "exact", "ref": ref}]


@dataclass
class Lesson:
    """One lesson of a scope: its artifact, current revision, behaviour
    and the run of recurrences of its current revision the platform caused
    (in journal order: ``streak`` recurred verdicts since the avoided one at
    ``run_start``; None: the start of the revision's history)."""

    artifact_id: str
    template: int
    revision: int
    behaviour: str
    threshold: int = policy.REVIEW_THRESHOLD.default
    streak: int = 0
    run_start: int | None = None
    reviewed_run: tuple[int, int | None] | None = None

    @property
    def cue(self) -> str:
        return LESSONS[self.template][0]

    @property
    def ref(self) -> dict:
        return {"family": "experience", "artifact_id": self.artifact_id, "revision": self.revision}


@dataclass
class ScopeState:
    """One simulated scope: its journal position counter, lessons, its
    handoff artifacts (id → current revision) and the one the current task
    received, task counter and the decisions it will make."""

    scope_id: str
    lessons: list[Lesson]
    handoffs: dict[str, int] = field(default_factory=dict)
    current_handoff: str = ""
    position: int = 0
    tasks: int = 0
    decisions: list[tuple[int, Lesson, str, int]] = field(default_factory=list)

    def next_position(self) -> int:
        self.position += 1
        return self.position


class SimulatedPlatform:
    """The seeded event stream (module docstring). ``seed``: the RNG seed
    (and part of every scope id); ``scopes``: 1–6; ``lessons``: lessons per
    scope, 1–6; ``decision_share``: the share of review candidates a
    reviewer decides; ``review_threshold`` and
    ``critical_review_threshold``: the workers' (policy; a decision on a
    candidate the workers never published would be dead-lettered as
    ``unknown_candidate``); ``advisor``: asked before each task (None: no
    advisory); ``holdout``: ``(salt, rate)`` of the deployment's holdout
    assignment (contract §21.5): each scope then has four handoffs, and
    each withholds the lessons ``holdout.assign`` says (never a critical
    one) in its ``withheld_citations`` — a task without its lesson recurs
    more often; None: one handoff citing every lesson.
    :meth:`events` yields the events, endlessly;
    ``ranking`` counts what a ranker did with the advice."""

    def __init__(self, seed: int = 7, scopes: int = 4, lessons: int = 4, decision_share: float = 0.7, advisor: Advisor | None = None, *,
                 review_threshold: int = policy.REVIEW_THRESHOLD.default,
                 critical_review_threshold: int = policy.CRITICAL_REVIEW_THRESHOLD.default,
                 holdout: tuple[str, Fraction] | None = None):
        if not 1 <= scopes <= len(SCOPE_NAMES) or not 1 <= lessons <= len(LESSONS):
            raise ValueError(f"scopes must be 1–{len(SCOPE_NAMES)} and lessons 1–{len(LESSONS)}")
        self.rng = random.Random(seed)
        self.seed = seed
        self.decision_share = decision_share
        self.advisor = advisor
        self.ranking: Counter[str] = Counter()
        self.scopes: list[ScopeState] = []
        for s, name in enumerate(SCOPE_NAMES[:scopes]):
            behaviours = list(BEHAVIOURS)
            self.rng.shuffle(behaviours)
            templates = [(s + k) % len(LESSONS) for k in range(lessons)]
            self.scopes.append(ScopeState(f"sim{seed}-{name}", [
                Lesson(f"EXP-{name}-{k + 1}", template, 1, behaviour,
                       critical_review_threshold if behaviour == "critical" else review_threshold)
                for k, template in enumerate(templates) for behaviour in [behaviours[k % len(behaviours)]]
            ]))
        self.review_threshold = review_threshold
        self.holdout = holdout
        for scope in self.scopes:
            names = [f"HO-{scope.scope_id}"] if holdout is None else [f"HO-{scope.scope_id}-{k}" for k in range(HANDOFFS_WITH_HOLDOUT)]
            scope.handoffs = dict.fromkeys(names, 0)
            scope.current_handoff = names[0]

    # -- the events

    def events(self) -> Iterator[Value]:
        """The stream, endless: every scope's lessons and handoff, then
        tasks, proposals and decisions over the scopes at random."""
        for scope in self.scopes:
            for lesson in scope.lessons:
                yield self.lesson_revision(scope, lesson)
            yield from self.handoff(scope)
        while True:
            scope = self.rng.choice(self.scopes)
            yield from self.step(scope)

    def step(self, scope: ScopeState) -> Iterator[Value]:
        """One step of ``scope``: a decision that is due, else a task (and
        now and then a proposed lesson after a failure)."""
        due = [entry for entry in scope.decisions if entry[0] <= scope.tasks]
        if due:
            scope.decisions.remove(due[0])
            yield from self.decide(scope, due[0][1], due[0][2])
            return
        scope.tasks += 1
        roll = self.rng.random()
        if roll < 0.05:
            yield self.unlinked_failure(scope)
            if self.rng.random() < 0.5:
                yield self.proposal(scope)
            return
        lesson = self.rng.choice(scope.lessons)
        if self.holdout is not None:
            scope.current_handoff = self.rng.choice(sorted(scope.handoffs))
        self.consult(scope)
        yield self.receipt(scope)
        yield self.outcome(scope, lesson)

    def lesson_revision(self, scope: ScopeState, lesson: Lesson) -> Value:
        """The Experience revision of ``lesson``'s current revision."""
        cue, condition, check, text = LESSONS[lesson.template]
        failure: dict = {
            "signature": {"recall_cue": cue, "symptom": None}, "repair_surface": "experience_content",
            "verification": {"condition": condition, "check_subject": check},
        }
        if lesson.behaviour == "critical":
            failure["severity"] = "critical"
        return build.experience_revision(
            scope_id=scope.scope_id, journal_position=scope.next_position(), artifact_ref=lesson.ref,
            content={"situation": f"{cue} ({scope.scope_id})", "action": f"revision {lesson.revision}", "outcome": cue,
                     "lesson": text if lesson.revision == 1 else f"{text} (revised after review, r{lesson.revision})", "failure": failure},
        )

    def withheld(self, scope: ScopeState, handoff_id: str, lesson: Lesson) -> bool:
        """Whether the handoff withholds the lesson: the holdout assignment
        (contract §21.5), never for a critical lesson (§22)."""
        if self.holdout is None or lesson.behaviour == "critical":
            return False
        salt, rate = self.holdout
        return assign(salt, rate, scope.scope_id, handoff_id, lesson.artifact_id)

    def handoff(self, scope: ScopeState) -> Iterator[Value]:
        """A new revision of each of the scope's handoffs, citing every
        lesson's current revision it does not withhold, and naming the
        others in ``withheld_citations``."""
        for handoff_id in sorted(scope.handoffs):
            scope.handoffs[handoff_id] += 1
            kept = [lesson for lesson in scope.lessons if not self.withheld(scope, handoff_id, lesson)]
            withheld = [lesson for lesson in scope.lessons if self.withheld(scope, handoff_id, lesson)]
            yield build.handoff_revision(
                scope_id=scope.scope_id, journal_position=scope.next_position(),
                artifact_ref={"family": "handoff", "artifact_id": handoff_id, "revision": scope.handoffs[handoff_id]},
                artifact_citations=[{"artifact_ref": lesson.ref} for lesson in kept], memory_citations=[],
                **({"withheld_citations": [{"artifact_ref": lesson.ref} for lesson in withheld]} if withheld else {}),
            )

    def receipt(self, scope: ScopeState) -> Value:
        """The receipt of the current task's handoff by its agent (accepted, exact, available)."""
        handoff = {"family": "handoff", "artifact_id": scope.current_handoff, "revision": scope.handoffs[scope.current_handoff]}
        return build.handoff_receipt(
            scope_id=scope.scope_id, journal_position=scope.next_position(),
            source_ref={"source_type": "handoff_receipt", "source_id": f"rcpt-{scope.tasks}"}, status="accepted", selection="exact",
            selected_revision=handoff, current_revision=handoff, evidence_status="available",
        )

    def outcome(self, scope: ScopeState, lesson: Lesson) -> Value:
        """The Task Outcome of the current task, aimed at ``lesson`` and
        linked to the task's receipt; the platform's count of the lesson's
        run follows what the ledger will decide (module docstring)."""
        n = scope.tasks
        cue, condition, check, _ = LESSONS[lesson.template]
        # A task whose handoff withheld its lesson: the ledger gives the lesson no verdict (a HoldoutObservation,
        # contract §21), so its run does not move; without the lesson a helpful one's failure comes back more often.
        withheld = self.withheld(scope, scope.current_handoff, lesson)
        recur_share = ({"helps": 0.6, "recurs": 0.85, "critical": 0.6, "silent": 0.0} if withheld
                       else {"helps": 0.15, "recurs": 0.8, "critical": 0.6, "silent": 0.0})[lesson.behaviour]
        observations: list[dict] = []
        checks: list[dict] = []
        status = "completed"
        position = scope.next_position()
        if lesson.behaviour == "silent":
            observations.append({"text": f"{condition}.", "basis": "verified", "evidence": _exact(f"trace:{n}")})
            checks.append({"name": check, "status": "skipped", "basis": "verified", "evidence": _exact(f"ci:{n}"), "details": None})
        elif self.rng.random() < recur_share:
            status = "failed"
            checks.append({"name": cue.upper(), "status": "failed", "basis": "verified", "evidence": _exact(f"ci:{n}"), "details": None})
            if not withheld:
                lesson.streak += 1
                self.maybe_review(scope, lesson)
        else:
            observations.append({"text": f"{condition}.", "basis": "verified", "evidence": _exact(f"trace:{n}")})
            checks.append({"name": check, "status": "passed", "basis": "verified", "evidence": _exact(f"ci:{n}"), "details": None})
            if not withheld:
                lesson.streak, lesson.run_start = 0, position
        checks.append({"name": "lint", "status": "passed", "basis": "verified", "evidence": _exact(f"lint:{n}"), "details": None})
        return build.task_outcome(
            scope_id=scope.scope_id, journal_position=position, source_ref={"source_type": "task_outcome", "source_id": f"task-{n}"},
            status=status, handoff_receipt_ref={"source_type": "handoff_receipt", "source_id": f"rcpt-{n}"},
            observations=observations, checks=checks,
        )

    def maybe_review(self, scope: ScopeState, lesson: Lesson) -> None:
        """When the lesson's run reaches its threshold the ledger publishes
        a candidate: schedule a reviewer's decision on it (most of them)."""
        run = (lesson.revision, lesson.run_start)
        if lesson.streak < lesson.threshold or lesson.reviewed_run == run:
            return
        lesson.reviewed_run = run
        if self.rng.random() < self.decision_share:
            candidate_id = review_candidate_id(scope.scope_id, lesson.ref, normalize(lesson.cue), lesson.run_start)
            scope.decisions.append((scope.tasks + self.rng.randrange(2, 12), lesson, candidate_id, lesson.revision))

    def decide(self, scope: ScopeState, lesson: Lesson, candidate_id: str) -> Iterator[Value]:
        """A reviewer's decision on ``lesson``'s candidate: approved with
        the next revision as the fix (then that revision, which helps, and a
        handoff citing it), or rejected with a reason."""
        position = scope.position
        decided_at = (CLOCK_START + timedelta(seconds=position)).strftime("%Y-%m-%dT%H:%M:%SZ")
        common = {"scope_id": scope.scope_id, "decision_id": f"dec-{scope.tasks}-{lesson.artifact_id}", "candidate_id": candidate_id,
                  "journal_position": max(position, 1), "reviewer": "sim-reviewer", "decided_at": decided_at}
        if self.rng.random() < 0.75:
            fix = {**lesson.ref, "revision": lesson.revision + 1}
            yield build.review_decision(**common, decision="approved", reason="the lesson names the wrong step", fix_revision=fix)
            lesson.revision += 1
            lesson.behaviour, lesson.threshold = "helps", self.review_threshold
            lesson.streak, lesson.run_start, lesson.reviewed_run = 0, None, None
            yield self.lesson_revision(scope, lesson)
            yield from self.handoff(scope)
        else:
            yield build.review_decision(**common, decision="rejected", reason="the failure is not caused by this lesson", reason_code="false_cause")

    def unlinked_failure(self, scope: ScopeState) -> Value:
        """A task without a handoff that fails on something no lesson names."""
        n = scope.tasks
        return build.task_outcome(
            scope_id=scope.scope_id, journal_position=scope.next_position(), source_ref={"source_type": "task_outcome", "source_id": f"task-{n}"},
            status="failed", handoff_receipt_ref=None, observations=[],
            checks=[{"name": f"flaky integration test {n % 7}", "status": "failed", "basis": "verified", "evidence": _exact(f"ci:{n}"),
                     "details": None}],
        )

    def proposal(self, scope: ScopeState) -> Value:
        """An agent's proposed lesson about the last unlinked failure (an admission candidate, contract §12)."""
        n = scope.tasks
        return build.experience_candidate(
            candidate_id=f"prop-{n}", scope_id=scope.scope_id, journal_position=scope.position, artifact_id=None,
            content={"situation": f"task-{n} failed", "action": "retried", "outcome": "failed again", "lesson": "Quarantine the flaky test.",
                     "failure": {"signature": {"recall_cue": f"flaky integration test {n % 7}", "symptom": None},
                                 "repair_surface": "acceptance_check",
                                 "verification": {"condition": "Ran the integration suite", "check_subject": f"flaky integration test {n % 7}"}}},
            cited_sources=[{"source_type": "task_outcome", "source_id": f"task-{n}"}],
        )

    # -- the recall

    def consult(self, scope: ScopeState) -> list[Advice] | None:
        """Ask the advisory about the handoff's lessons as a recall ranker
        would before a task, and count what it would do: ``kept`` (no
        warning), ``demoted`` (a warning), ``dropped`` (superseded),
        ``unknown`` (the ledger does not know it yet), ``unanswered`` (the
        advisory did not answer: the recall went on without it)."""
        if self.advisor is None:
            return None
        advices = self.advisor.advise(scope.scope_id, [lesson.ref for lesson in scope.lessons])
        for advice in advices:
            if not advice.available:
                self.ranking["unanswered"] += 1
            elif not advice.known:
                self.ranking["unknown"] += 1
            elif advice.superseded_by is not None:
                self.ranking["dropped"] += 1
            elif advice.advice == "no warning":
                self.ranking["kept"] += 1
            else:
                self.ranking["demoted"] += 1
        return advices


#: What a recall ranker did with each lesson's advice (:meth:`SimulatedPlatform.consult`), in the order the summary gives them.
RANKING_OUTCOMES: tuple[str, ...] = ("kept", "demoted", "dropped", "unknown", "unanswered")


@dataclass
class SimulationSummary:
    """What a simulation published: ``published`` events, ``by_kind``
    (input topic → count), ``seconds`` it ran, the ``ranking`` counts of
    the advisory (empty without one) and the scope ids."""

    published: int
    by_kind: dict[str, int]
    seconds: float
    ranking: dict[str, int]
    scopes: list[str]


def parse_rate(text: str) -> float | None:
    """Events per second of ``--rate``: ``200``, ``200/s``, ``12000/min``;
    ``0`` or ``max``: as fast as the producer takes them (None). Raises
    ValueError otherwise."""
    value = text.strip().lower()
    if value in ("0", "max"):
        return None
    number, _, unit = value.partition("/")
    per = {"": 1.0, "s": 1.0, "sec": 1.0, "min": 60.0, "m": 60.0}.get(unit)
    try:
        rate = float(number)
    except ValueError:
        rate = -1.0
    if per is None or not rate > 0:
        raise ValueError(f"a rate is N, N/s or N/min (N > 0), or max: not {text!r}")
    return rate / per


def simulate(platform: SimulatedPlatform, publisher: Publisher, *, events: int | None = None, rate: float | None = None,
             stop: threading.Event | None = None, progress: Callable[[int, float], None] | None = None,
             clock: Callable[[], float] = time.monotonic, flush_every: int = 1000) -> SimulationSummary:
    """Publish ``platform``'s events through the open ``publisher``:
    ``events`` of them (None: until ``stop`` is set), at ``rate`` per
    second (None: as fast as the producer takes them), flushing every
    ``flush_every`` events and at the end; ``progress(published, seconds)``
    is called after each flush. Raises what :meth:`Publisher.publish` and
    ``flush`` raise (PublishError: a record the broker refused)."""
    by_kind: Counter[str] = Counter()
    started = clock()
    published = 0
    for value in platform.events():
        if events is not None and published >= events or stop is not None and stop.is_set():
            break
        if rate is not None:
            wait = started + published / rate - clock()
            if wait > 0:
                time.sleep(wait)
        publisher.publish(value)
        by_kind[build.kind_of(value)] += 1
        published += 1
        if published % flush_every == 0:
            publisher.flush()
            if progress is not None:
                progress(published, clock() - started)
    publisher.flush()
    return SimulationSummary(published, dict(by_kind), clock() - started, dict(platform.ranking), [scope.scope_id for scope in platform.scopes])
