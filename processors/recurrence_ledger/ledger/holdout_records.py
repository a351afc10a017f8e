"""Pydantic v2 models of the ledger's §21 output (contract §21.3, §21.4,
revision 4): the effect of a revision (``Effect``, its arms, a scope's
``EffectCounts``, carried by RevisionStatistics and ScopeStatistics in
``recurrence_ledger.ledger.records``) and the HoldoutObservation on
``holdout-observations``. A module of its own beside ``records`` so that
each stays small; the same conventions hold (§13's matrix as model
validators).

This module imports pydantic only: it is part of the pure core's closure.
"""

from __future__ import annotations

from typing import Annotated, Literal, get_args

from pydantic import Field, model_validator

from recurrence_ledger.ledger.models import ArtifactRef, Count, Digest, Id, Position, SourceRef, TaskOutcomeItemRef, Value


class TreatedArm(Value):
    """contract §21.4: the treated arm of a revision's effect — its
    ``selected`` observations outside assignment mismatches; ``resolved``
    those with a terminal verdict, ``recurred`` those with ``recurred``."""

    resolved: Count
    recurred: Count


class WithheldArm(Value):
    """contract §21.4: the withheld arm — ``withheld`` counts every
    HoldoutObservation of the revision (mismatched ones too); ``resolved``
    those outside mismatches with a verdict, ``recurred`` those with
    ``recurred``."""

    withheld: Count
    resolved: Count
    recurred: Count


#: The effect verdicts of contract §21.4, in the contract's order.
EffectVerdict = Literal["helps", "harms", "undecided", "insufficient"]
#: The same verdicts as a tuple, in the order ScopeStatistics ``effects`` lists them.
EFFECT_VERDICTS: tuple[EffectVerdict, ...] = get_args(EffectVerdict)


class Effect(Value):
    """contract §21.4 (rev. 4): the effect of a revision — both arms,
    ``assignment_mismatches`` (its mismatched (revision, outcome) pairs in
    both arms), each arm's recurrence rate (f/n, 4 places, null when n =
    0), ``probability_helps`` = P(p_withheld > p_treated) under uniform
    priors (the exact rational, 4 places ties to even; null while an arm
    has n = 0) and ``verdict`` (``insufficient`` while an arm has fewer
    than effect_min_resolved resolved observations, else ``helps`` when the
    exact P ≥ effect_probability, ``harms`` when P ≤ 1 − it, else
    ``undecided``)."""

    treated: TreatedArm = Field(title="treated", description="The tasks that got the lesson: resolved observations and those that recurred.")
    withheld: WithheldArm = Field(
        title="withheld", description="The tasks the lesson was withheld from: HoldoutObservations, resolved ones and those that recurred."
    )
    assignment_mismatches: Count = Field(
        title="assignment mismatches", description="(revision, outcome) pairs not on their assigned arm (contract §21.5), left out of both arms."
    )
    recurrence_rate_treated: Annotated[float | None, Field(ge=0, le=1)] = Field(
        None, title="recurrence rate treated", description="recurred / resolved with the lesson; null without a resolved observation."
    )
    recurrence_rate_withheld: Annotated[float | None, Field(ge=0, le=1)] = Field(
        None, title="recurrence rate withheld", description="recurred / resolved without the lesson; null without a resolved observation."
    )
    probability_helps: Annotated[float | None, Field(ge=0, le=1)] = Field(
        None, title="probability helps",
        description="Posterior probability that the recurrence rate without the lesson is higher than with it; null while an arm has none resolved.",
    )
    verdict: EffectVerdict = Field(
        title="verdict", description="helps, harms, undecided, or insufficient while an arm has fewer than effect_min_resolved resolved observations."
    )


class EffectCounts(Value):
    """contract §21.4 (rev. 4): a scope's revisions with an effect, by verdict."""

    helps: Count = Field(0, title="helps", description="Lessons that lower the recurrence rate with the effect probability or more.")
    harms: Count = Field(0, title="harms", description="Lessons that raise it: probability_helps at or below 1 minus the effect probability.")
    undecided: Count = Field(0, title="undecided", description="Lessons with enough observations and a probability in between.")
    insufficient: Count = Field(0, title="insufficient", description="Lessons with an arm below effect_min_resolved resolved observations.")


# --------------------------------------------------------------------- §21.3

#: HoldoutObservation ``reason`` values: contract §17's reasons without
#: ``ambiguous`` (a withheld revision is no candidate of any match).
HoldoutReason = Literal[
    "multiple_matches", "condition_empty", "condition_not_observed", "condition_unverified", "condition_duplicated",
    "check_missing", "check_unverified", "check_duplicated", "check_not_run", "check_failed",
]


class HoldoutObservation(Value):
    """contract §21.3 (rev. 4): what a revision withheld from a linked Task
    Outcome's Handoff would have got had it been cited alone — an
    append-only ledger fact on ``holdout-observations`` (key: scope_id),
    one per (scope_id, artifact_ref, task_outcome_ref).

    ``verdict`` ``recurred`` (exactly one failure item of the outcome has
    the revision's cue as its match input: ``failure_ref``), ``avoided``
    (none has, and §7's conditions 2 and 3 hold: ``condition_ref``,
    ``check_ref``) or None with ``reason``, the first of §17's reasons
    that holds (``ambiguous`` skipped). ``assignment``: ``verified`` or
    ``mismatch`` against the deployment's holdout assignment (§21.5),
    ``unverified`` without one. ``observation_id``: digest of the record
    without it."""

    observation_id: Digest
    scope_id: Id
    artifact_ref: ArtifactRef
    signature_key: Annotated[str, Field(min_length=1)]
    task_outcome_ref: SourceRef
    task_outcome_position: Position
    handoff_receipt_ref: SourceRef
    handoff_ref: ArtifactRef
    verdict: Literal["recurred", "avoided"] | None = None
    reason: HoldoutReason | None = None
    failure_ref: TaskOutcomeItemRef | None = None
    condition_ref: TaskOutcomeItemRef | None = None
    check_ref: TaskOutcomeItemRef | None = None
    assignment: Literal["unverified", "verified", "mismatch"] = "unverified"

    @model_validator(mode="after")
    def _matrix(self) -> HoldoutObservation:
        refs = (self.failure_ref is not None, self.condition_ref is not None, self.check_ref is not None)
        expected = {"recurred": (True, False, False), "avoided": (False, True, True), None: (False, False, False)}[self.verdict]
        if refs != expected:
            raise ValueError(f"a {self.verdict or 'null'} holdout verdict carries {'failure_ref' if self.verdict == 'recurred' else 'condition_ref and check_ref' if self.verdict == 'avoided' else 'no item ref'}")
        if (self.reason is None) != (self.verdict is not None):
            raise ValueError("a holdout observation has a verdict or a reason, never both")
        if self.artifact_ref.family != "experience" or self.handoff_ref.family != "handoff":
            raise ValueError("artifact_ref is an Experience revision and handoff_ref a Handoff revision")
        return self
