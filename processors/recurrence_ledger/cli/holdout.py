"""``recurrence-ledger holdout``: the verified holdout assignment (contract
§21.5) — ``holdout assign``, the same function as
``recurrence_ledger.holdout.assign`` and ``GET /holdout/assign``."""

from __future__ import annotations

import json
from fractions import Fraction
from typing import Annotated

import typer

from recurrence_ledger import policy
from recurrence_ledger.cli.options import bounded_fraction_parser
from recurrence_ledger.holdout import assign, assignment_hash

holdout_app = typer.Typer(help="The verified holdout assignment (contract §21.5).", no_args_is_help=True, rich_markup_mode="rich")


@holdout_app.command("assign")
def holdout_assign_command(
    scope_id: Annotated[str, typer.Argument(help="The scope.")],
    handoff_artifact_id: Annotated[str, typer.Argument(help="The Handoff artifact (not a revision).")],
    experience_artifact_ids: Annotated[list[str], typer.Argument(help="One or more Experience artifacts (not revisions).")],
    salt: Annotated[str, typer.Option(policy.HOLDOUT_SALT.option, envvar=policy.HOLDOUT_SALT.env, help="The deployment's holdout salt.")],
    rate: Annotated[
        Fraction,
        typer.Option(policy.HOLDOUT_RATE.option, envvar=policy.HOLDOUT_RATE.env, parser=bounded_fraction_parser(policy.HOLDOUT_RATE),
                     metavar="FRACTION", help="The deployment's holdout rate, an exact fraction in [0, 1/2]."),
    ],
) -> None:
    """Which lessons a Handoff is to withhold.

    One JSON line per Experience artifact: scope_id, handoff_artifact_id,
    experience_artifact_id, rate, hash (u, 16 hex digits) and withheld (true:
    leave the lesson out of this Handoff and name it in withheld_citations).
    It depends on artifacts, not revisions. A critical lesson (contract §22)
    is never to be withheld, whatever this says."""
    for experience_artifact_id in experience_artifact_ids:
        u = assignment_hash(salt, scope_id, handoff_artifact_id, experience_artifact_id)
        print(json.dumps({
            "scope_id": scope_id, "handoff_artifact_id": handoff_artifact_id, "experience_artifact_id": experience_artifact_id,
            "rate": str(rate), "hash": f"{u:016x}", "withheld": assign(salt, rate, scope_id, handoff_artifact_id, experience_artifact_id),
        }, ensure_ascii=False))
