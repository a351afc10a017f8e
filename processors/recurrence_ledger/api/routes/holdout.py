"""``GET /holdout/assign``: the verified holdout assignment (contract
§21.5) over HTTP, for a platform's recall that is not written in Python —
the same function as ``recurrence_ledger.holdout.assign`` and
``recurrence-ledger holdout assign``. It reads no view: it answers without
Redis."""

from __future__ import annotations

from typing import Annotated

from fastapi import FastAPI, HTTPException, Query
from pydantic import BaseModel, ConfigDict, Field

from recurrence_ledger.api.responses import ERRORS
from recurrence_ledger.holdout import assign, assignment_hash, check_rate
from recurrence_ledger.ledger.models import MAX_ID_LENGTH
from recurrence_ledger.policy import parse_exact_fraction


class HoldoutAssignment(BaseModel):
    """The arm of one Experience artifact in one Handoff artifact (§21.5)."""

    model_config = ConfigDict(frozen=True)

    scope_id: str
    handoff_artifact_id: str
    experience_artifact_id: str
    rate: str = Field(description="The holdout rate as an exact fraction (1/4).")
    hash: str = Field(description="u: the first 16 hex digits of the sha256 of the assignment's canonical JSON.")
    withheld: bool = Field(description="True: the lesson is to be withheld from this Handoff (u < rate · 2⁶⁴).")


def register(app: FastAPI) -> None:
    """Add ``GET /holdout/assign`` to ``app``."""

    @app.get("/holdout/assign", response_model=HoldoutAssignment, responses={400: ERRORS[400]}, tags=["holdout"])
    def holdout_assign(
        salt: Annotated[str, Query(description="The deployment's holdout salt (policy holdout_salt).")],
        rate: Annotated[str, Query(description="The deployment's holdout rate, an exact fraction in [0, 1/2] (1/4 or 0.25).")],
        scope_id: Annotated[str, Query(min_length=1, max_length=MAX_ID_LENGTH)],
        handoff_artifact_id: Annotated[str, Query(min_length=1, max_length=MAX_ID_LENGTH)],
        experience_artifact_id: Annotated[str, Query(min_length=1, max_length=MAX_ID_LENGTH)],
    ) -> HoldoutAssignment:
        """Whether the Experience artifact is to be withheld from the Handoff
        artifact (contract §21.5); 400 for a rate that is not an exact
        fraction in [0, 1/2]."""
        try:
            fraction = check_rate(parse_exact_fraction(rate))
        except ValueError:
            raise HTTPException(400, f"rate must be an exact fraction in [0, 1/2] (like 1/4), got {rate[:80]!r}") from None
        try:
            u = assignment_hash(salt, scope_id, handoff_artifact_id, experience_artifact_id)
            withheld = assign(salt, fraction, scope_id, handoff_artifact_id, experience_artifact_id)
        except ValueError as error:
            raise HTTPException(400, str(error)) from None
        return HoldoutAssignment(
            scope_id=scope_id, handoff_artifact_id=handoff_artifact_id, experience_artifact_id=experience_artifact_id,
            rate=str(fraction), hash=f"{u:016x}", withheld=withheld,
        )
