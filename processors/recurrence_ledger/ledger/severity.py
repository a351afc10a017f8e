"""contract §22 (rev. 4): severity, and §24 (rev. 4): review reasons and the
promotion rate — the rules, stated once.

A failure record may carry a ``severity`` (``low``, ``medium``, ``high``,
``critical``; absent or null: unrated). A **critical** revision is reviewed
at ``critical_review_threshold`` (policy, default 1) instead of the review
threshold: its ``needs_review``, the scope's ``needing_review``, its review
candidates (§8's runs with that threshold) and the repair status ``failed``
of a critical fix revision (§18). ``binding_suspect`` (§17) keeps the
review threshold. Recurred verdicts are counted by their revision's
severity (``recurred_by_severity``).

A rejected review decision may carry a ``reason_code``; the scope counts
its rejected candidates by reason (``rejected_by_reason``, ``unspecified``
for none) and its ``promotion_rate`` = approved / (approved + rejected).

Stored figures (in the scope record, JSON): ``recurred_by_severity`` holds
the counts of the four rated severities only and ``rejected_by_reason``
those of the six codes only; ``unrated`` and ``unspecified`` are the rest of
``recurred`` and ``rejected``. So a scope recorded before revision 4 (every
verdict unrated, every rejection unspecified) publishes figures that sum up
without a state rebuild.

This module is pure: it imports the policy and the core's ratio rule only.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import get_args

from recurrence_ledger.ledger.models import RejectionReason, Severity
from recurrence_ledger.ledger.ratios import published_ratio

#: The severities of contract §22, lowest first (the Severity literal).
SEVERITIES: tuple[str, ...] = get_args(Severity)
#: The one severity with its own review threshold and alert.
CRITICAL = "critical"
#: The bucket of a revision without a severity.
UNRATED = "unrated"
#: ScopeStatistics' ``recurred_by_severity`` keys, in the contract's order.
SEVERITY_BUCKETS: tuple[str, ...] = ("critical", "high", "medium", "low", UNRATED)

#: The reason codes of contract §24 (the RejectionReason literal).
REASON_CODES: tuple[str, ...] = get_args(RejectionReason)
#: The bucket of a rejection without a reason code.
UNSPECIFIED = "unspecified"
#: ``reviews.rejected_by_reason`` keys, in the contract's order.
REASON_BUCKETS: tuple[str, ...] = (*REASON_CODES, UNSPECIFIED)


def severity_of(revision: Mapping | None) -> str | None:
    """The severity of a revision, or None (unrated). ``revision`` is any
    of the core's forms of an Experience revision: the event in canonical
    form (``{"content": {"failure": {…, "severity": …}}}``), the core's
    ``experience`` record or a failure block (``{"severity": …}``, the
    state's ``failure`` or a streak record), or None."""
    if not revision:
        return None
    if "content" in revision:
        revision = revision["content"].get("failure")
    elif "failure" in revision:
        revision = revision["failure"]
    return (revision or {}).get("severity")


def is_critical(revision: Mapping | None) -> bool:
    """contract §22: whether a revision is critical — its failure record's
    severity is ``critical``. Takes what :func:`severity_of` takes. A
    critical revision goes to review at its first recurrence (by default)
    and is never withheld from recall (§21)."""
    return severity_of(revision) == CRITICAL


def severity_review_threshold(severity: str | None, review_threshold: int, critical_review_threshold: int) -> int:
    """contract §22.2: the review threshold of a revision of ``severity``:
    ``critical_review_threshold`` for a critical one, else the deployment's
    ``review_threshold``. What ``needs_review``, ``needing_review``, review
    candidates and a fix revision's ``failed`` compare with."""
    return critical_review_threshold if severity == CRITICAL else review_threshold


def count_recurred(scope: dict, severity: str | None) -> None:
    """One more recurred verdict of a revision of ``severity`` in the scope
    record (a rated one is kept; unrated ones are the rest of
    ``recurred``)."""
    if severity is not None:
        counts = scope.setdefault("recurred_by_severity", {})
        counts[severity] = counts.get(severity, 0) + 1


def recurred_by_severity(scope: Mapping) -> dict[str, int]:
    """ScopeStatistics' ``recurred_by_severity`` (contract §22.3): recurred
    verdicts by their revision's severity, every bucket present, in the
    contract's order, summing to ``recurred``."""
    rated = scope.get("recurred_by_severity") or {}
    counts = {severity: rated.get(severity, 0) for severity in SEVERITY_BUCKETS[:-1]}
    counts[UNRATED] = scope["recurred"] - sum(counts.values())
    return counts


def rejected_by_reason(rejected: int, coded: Mapping | None) -> dict[str, int]:
    """``reviews.rejected_by_reason`` (contract §24): the scope's rejected
    candidates by their decision's reason code, ``coded`` being the counts
    of the six codes kept in the scope record; ``unspecified`` is the rest
    of ``rejected``."""
    coded = coded or {}
    counts = {code: coded.get(code, 0) for code in REASON_CODES}
    counts[UNSPECIFIED] = rejected - sum(counts.values())
    return counts


def promotion_rate(approved: int, rejected: int) -> float | None:
    """contract §24: approved / (approved + rejected), a §19.3 ratio (4
    decimals, ties to even, on the exact fraction); None without a
    decision."""
    return published_ratio(approved, approved + rejected)
