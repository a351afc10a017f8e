"""The core's deployment policy (``LedgerConfig``): the
:mod:`recurrence_ledger.policy` settings the ledger's decisions depend on.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from recurrence_ledger import policy
from recurrence_ledger.ledger.severity import is_critical


@dataclass(frozen=True)
class LedgerConfig:
    """Deployment policy (contract §5, §8, §12, §21, §22, §23); every default and bound is
    the :mod:`recurrence_ledger.policy` setting of the same name.

    - ``review_threshold``: streak at which a revision needs review.
    - ``critical_review_threshold``: the same for a critical revision
      (contract §22: ``needs_review``, ``needing_review``, its review
      candidates and a critical fix revision's ``failed``).
    - ``top_revisions_limit``: N of ``top_revisions``.
    - ``provenance_horizon``: how many journal positions a pending outcome
      may wait, counted on its scope's ``as_of_position``, before it is
      decided as unlinked (missing provenance). None waits until ``flush``
      (end of a journal file in the embedded runner). Positions, not wall
      time, so the decision is the same on every replay.
    - ``max_pending_candidates``: how many admission candidates one scope
      may hold while they wait for cited Task Outcomes; one more that would
      wait goes to dead-letter (``too_many_pending``) and may be published
      again later. Review decisions waiting for their candidate (contract
      §18) are bounded by the same number, counted apart. It bounds the
      per-scope waiting index: 5,000 entries of
      the longest ids (512 four-byte characters) are ~10 MB, below a 16 MiB
      changelog record.
    - ``near_duplicate_threshold``: admission rule 5's Sørensen–Dice score
      at which a current head is a near-duplicate of a candidate (§12), an
      exact fraction in (0, 1] (default 4/5), compared exactly.
    - ``pattern_threshold``: contributing scopes at which a signature of a
      pattern group becomes a PatternCandidate (§23.4).
    - ``pattern_group_separator``: None puts every scope in the group
      ``""``; a text cuts a scope_id at its first occurrence (§23.1). An
      empty text is refused.

    - ``effect_min_resolved``, ``effect_probability``: §21.4's effect
      verdict — each arm needs that many resolved observations, and a
      lesson helps at probability_helps ≥ ``effect_probability`` (an exact
      fraction in [1/2, 1], default 19/20), harms at ≤ 1 − it.
    - ``holdout_salt``, ``holdout_rate``: §21.5's verified assignment, both
      set or both None (unverified); the rate an exact fraction in
      [0, 1/2].

    Raises ValueError for a value below its setting's minimum (or above its
    maximum), a near-duplicate threshold that is not a fraction in (0, 1],
    or one of the holdout pair without the other.
    """

    review_threshold: int = policy.REVIEW_THRESHOLD.default
    top_revisions_limit: int = policy.TOP_REVISIONS.default
    provenance_horizon: int | None = policy.PROVENANCE_HORIZON.default
    max_pending_candidates: int = policy.MAX_PENDING_CANDIDATES.default
    near_duplicate_threshold: Fraction = policy.NEAR_DUPLICATE_THRESHOLD.default
    effect_min_resolved: int = policy.EFFECT_MIN_RESOLVED.default
    effect_probability: Fraction = policy.EFFECT_PROBABILITY.default
    holdout_salt: str | None = policy.HOLDOUT_SALT.default
    holdout_rate: Fraction | None = policy.HOLDOUT_RATE.default
    critical_review_threshold: int = policy.CRITICAL_REVIEW_THRESHOLD.default
    pattern_threshold: int = policy.PATTERN_THRESHOLD.default
    pattern_group_separator: str | None = policy.PATTERN_GROUP_SEPARATOR.default

    def __post_init__(self) -> None:
        policy.REVIEW_THRESHOLD.check(self.review_threshold)
        policy.CRITICAL_REVIEW_THRESHOLD.check(self.critical_review_threshold)
        policy.TOP_REVISIONS.check(self.top_revisions_limit)
        policy.PROVENANCE_HORIZON.check(self.provenance_horizon)
        policy.MAX_PENDING_CANDIDATES.check(self.max_pending_candidates)
        policy.NEAR_DUPLICATE_THRESHOLD.check(self.near_duplicate_threshold)
        policy.PATTERN_THRESHOLD.check(self.pattern_threshold)
        if self.pattern_group_separator is not None and not (isinstance(self.pattern_group_separator, str) and self.pattern_group_separator):
            raise ValueError(f"pattern_group_separator must be a non-empty text or None, got {self.pattern_group_separator!r}")
        if not isinstance(self.near_duplicate_threshold, Fraction) or not 0 < self.near_duplicate_threshold <= 1:
            raise ValueError(f"near_duplicate_threshold must be a Fraction in (0, 1], got {self.near_duplicate_threshold!r}")
        policy.EFFECT_MIN_RESOLVED.check(self.effect_min_resolved)
        policy.EFFECT_PROBABILITY.check(self.effect_probability)
        policy.HOLDOUT_SALT.check(self.holdout_salt)
        policy.HOLDOUT_RATE.check(self.holdout_rate)
        if not isinstance(self.effect_probability, Fraction):
            raise ValueError(f"effect_probability must be a Fraction, got {self.effect_probability!r}")
        if self.holdout_rate is not None and not isinstance(self.holdout_rate, Fraction):
            raise ValueError(f"holdout_rate must be a Fraction, got {self.holdout_rate!r}")
        if (self.holdout_salt is None) != (self.holdout_rate is None):
            raise ValueError("holdout_salt and holdout_rate are set together (contract §21.5), or neither")


def review_threshold_of(config: LedgerConfig, failure: dict | None) -> int:
    """The review threshold of one revision, given its failure block
    (contract §8; None: a revision without one): the number of recurred
    verdicts in a row at which it needs review, a run of it publishes its
    ReviewCandidate, and — as a fix revision — its repair has failed
    (§18). Every rule that needs a revision's threshold asks here, so a
    threshold of its own for some revisions (§22: critical ones) is one
    change. A critical revision (§22, ``severity.is_critical``) has
    ``config.critical_review_threshold``, every other
    ``config.review_threshold``."""
    return config.critical_review_threshold if is_critical(failure) else config.review_threshold
