"""The verified holdout assignment (contract §21.5), for platforms and the
ledger alike.

Whether an Experience artifact is withheld from a Handoff must not be up to
the platform's judgement, or the two arms of §21.4 compare different tasks.
With a deployment's ``holdout_salt`` and ``holdout_rate`` the arm is fixed:

    u = int(first 16 hex digits of sha256(canonical_json([salt, scope_id,
            handoff artifact_id, experience artifact_id])), 16)
    withheld  ⇔  u < rate · 2⁶⁴

It depends on the artifacts, not their revisions, so revising a Handoff or
a lesson keeps the arm. (A ``critical`` revision, §22, is never to be
withheld; the ledger applies that on top of :func:`assign`.)

This module is a leaf: it imports nothing of the package and no Kafka or
Redis client, so a platform's recall can ``from recurrence_ledger.holdout
import assign`` and decide exactly as the ledger verifies. The same
function answers ``recurrence-ledger holdout assign`` and the API's
``GET /holdout/assign``.
"""

from __future__ import annotations

import hashlib
import json
from fractions import Fraction

#: 2⁶⁴: u is a 64-bit unsigned integer.
HASH_SPACE = 1 << 64


def assignment_preimage(salt: str, scope_id: str, handoff_artifact_id: str, experience_artifact_id: str) -> bytes:
    """canonical_json([salt, scope_id, handoff_artifact_id,
    experience_artifact_id]) (§4: UTF-8, no insignificant whitespace, no
    ASCII escaping). Raises ValueError on a lone surrogate."""
    text = json.dumps([salt, scope_id, handoff_artifact_id, experience_artifact_id], ensure_ascii=False, separators=(",", ":"))
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as error:
        raise ValueError(f"not canonical-JSON encodable: {error}") from None


def assignment_hash(salt: str, scope_id: str, handoff_artifact_id: str, experience_artifact_id: str) -> int:
    """u: the integer of the first 16 hex digits of sha256 of
    :func:`assignment_preimage`, in [0, 2⁶⁴)."""
    return int(hashlib.sha256(assignment_preimage(salt, scope_id, handoff_artifact_id, experience_artifact_id)).hexdigest()[:16], 16)


def check_rate(rate: Fraction) -> Fraction:
    """``rate`` when it is an exact fraction in [0, 1/2]; ValueError otherwise."""
    if not isinstance(rate, (Fraction, int)) or isinstance(rate, bool) or not 0 <= rate <= Fraction(1, 2):
        raise ValueError(f"holdout_rate must be an exact fraction in [0, 1/2], got {rate!r}")
    return Fraction(rate)


def assign(salt: str, rate: Fraction, scope_id: str, handoff_artifact_id: str, experience_artifact_id: str) -> bool:
    """True when the Experience artifact is to be withheld from the Handoff
    artifact in scope ``scope_id`` (§21.5): u < rate · 2⁶⁴, compared
    exactly. ``rate`` is a Fraction (or int) in [0, 1/2]; raises ValueError
    otherwise.

    >>> assign("s", Fraction(0), "scope", "H1", "E1"), assign("s", Fraction(1, 2), "scope", "H1", "E1")
    (False, True)
    """
    rate = check_rate(rate)
    # u < r·2⁶⁴ ⇔ u·den < num·2⁶⁴ (exact, no float)
    return assignment_hash(salt, scope_id, handoff_artifact_id, experience_artifact_id) * rate.denominator < rate.numerator * HASH_SPACE
