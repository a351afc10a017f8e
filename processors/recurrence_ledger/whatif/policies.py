"""The policy of a deployment (contract §20) and how a what-if runs many
policies in as few passes over the inputs as the rules allow.

A :class:`Policy` is the four settings §20 names: review threshold,
provenance horizon, top-N of ``top_revisions`` and near-duplicate
threshold, and the two of §23: pattern threshold and pattern group
separator. Which of them need their own pass:

- the **provenance horizon** decides when a pending outcome stops waiting,
  so it changes matches, verdicts and everything after them: one pass (one
  processor) per distinct horizon;
- the **review threshold** (and the **critical review threshold**, §22,
  for critical revisions) only decides which runs of terminal verdicts
  raise a ReviewCandidate and which revisions need review; the verdicts
  themselves do not depend on it, so every threshold is computed from the
  verdicts of one pass (:class:`~recurrence_ledger.whatif.shadow.WhatIfProcessor`);
- the **near-duplicate threshold** only decides the ``near_duplicates`` of
  an admission decision, which is computed when the decision is made from
  the bigram index of that moment: every threshold from one pass;
- **top-N** only cuts the ``top_revisions`` rows of a view: read off the
  final state;
- the **pattern threshold** and **group separator** only decide how the
  final counts of recurred verdicts per (scope, signature) add up to
  patterns and candidates (contract §23): read off the final state too;
- the **effect minimum** and **effect probability** (§21.4) only decide the
  verdict of a revision's final arms, not the arms: every pair is computed
  from the final arms of one pass (:func:`~recurrence_ledger.whatif.results.policy_effects`);
- the **holdout salt** and **rate** (§21.5) decide which pairs are
  assignment mismatches, left out of both arms: one pass per distinct
  (provenance horizon, salt, rate).

:func:`passes` groups policies into :class:`Pass` es accordingly.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from fractions import Fraction
from typing import Any

from recurrence_ledger import policy
from recurrence_ledger.ledger.config import LedgerConfig

#: The settings of a what-if policy, by the name a sweep gives them (the
#: option without its dashes): ``--sweep review-threshold=2..8``.
SETTINGS: dict[str, policy.Setting] = {
    setting.option.removeprefix("--"): setting
    for setting in (policy.REVIEW_THRESHOLD, policy.PROVENANCE_HORIZON, policy.NEAR_DUPLICATE_THRESHOLD, policy.TOP_REVISIONS,
                    policy.CRITICAL_REVIEW_THRESHOLD, policy.PATTERN_THRESHOLD, policy.EFFECT_MIN_RESOLVED, policy.EFFECT_PROBABILITY)
}
#: Policy attribute of each setting (``LedgerConfig``'s name, except top-N).
ATTRIBUTES: dict[str, str] = {
    policy.REVIEW_THRESHOLD.name: "review_threshold",
    policy.PROVENANCE_HORIZON.name: "provenance_horizon",
    policy.NEAR_DUPLICATE_THRESHOLD.name: "near_duplicate_threshold",
    policy.TOP_REVISIONS.name: "top_revisions",
    policy.CRITICAL_REVIEW_THRESHOLD.name: "critical_review_threshold",
    policy.PATTERN_THRESHOLD.name: "pattern_threshold",
    policy.PATTERN_GROUP_SEPARATOR.name: "pattern_group_separator",
    policy.EFFECT_MIN_RESOLVED.name: "effect_min_resolved",
    policy.EFFECT_PROBABILITY.name: "effect_probability",
    policy.HOLDOUT_SALT.name: "holdout_salt",
    policy.HOLDOUT_RATE.name: "holdout_rate",
}


@dataclass(frozen=True)
class Policy:
    """One policy (contract §20): ``review_threshold`` (§8),
    ``provenance_horizon`` (§5; None waits until the end of the inputs),
    ``near_duplicate_threshold`` (§12 rule 5, an exact fraction) and
    ``top_revisions`` (N of ``top_revisions``, §8), and since revision 4
    ``critical_review_threshold`` (§22: the review threshold of critical
    revisions), ``pattern_threshold`` and ``pattern_group_separator``
    (§23), ``effect_min_resolved`` and ``effect_probability`` (§21.4) and
    ``holdout_salt`` with ``holdout_rate`` (§21.5, set together or
    neither). Defaults are the
    :mod:`recurrence_ledger.policy` settings'. Raises ValueError for a value
    the core refuses (:class:`LedgerConfig`)."""

    review_threshold: int = policy.REVIEW_THRESHOLD.default
    provenance_horizon: int | None = policy.PROVENANCE_HORIZON.default
    near_duplicate_threshold: Fraction = policy.NEAR_DUPLICATE_THRESHOLD.default
    top_revisions: int = policy.TOP_REVISIONS.default
    critical_review_threshold: int = policy.CRITICAL_REVIEW_THRESHOLD.default
    pattern_threshold: int = policy.PATTERN_THRESHOLD.default
    pattern_group_separator: str | None = policy.PATTERN_GROUP_SEPARATOR.default
    effect_min_resolved: int = policy.EFFECT_MIN_RESOLVED.default
    effect_probability: Fraction = policy.EFFECT_PROBABILITY.default
    holdout_salt: str | None = policy.HOLDOUT_SALT.default
    holdout_rate: Fraction | None = policy.HOLDOUT_RATE.default

    def __post_init__(self) -> None:
        self.config()

    def config(self, max_pending_candidates: int = policy.MAX_PENDING_CANDIDATES.default) -> LedgerConfig:
        """The core's LedgerConfig of this policy."""
        return LedgerConfig(
            review_threshold=self.review_threshold, top_revisions_limit=self.top_revisions,
            provenance_horizon=self.provenance_horizon, max_pending_candidates=max_pending_candidates,
            near_duplicate_threshold=self.near_duplicate_threshold, critical_review_threshold=self.critical_review_threshold,
            pattern_threshold=self.pattern_threshold, pattern_group_separator=self.pattern_group_separator,
            effect_min_resolved=self.effect_min_resolved, effect_probability=self.effect_probability,
            holdout_salt=self.holdout_salt, holdout_rate=self.holdout_rate,
        )

    def with_setting(self, setting: policy.Setting, value: Any) -> Policy:
        """This policy with one setting changed (ValueError when refused)."""
        return replace(self, **{ATTRIBUTES[setting.name]: value})

    def value(self, setting: policy.Setting) -> Any:
        """This policy's value of ``setting``."""
        return getattr(self, ATTRIBUTES[setting.name])

    def as_json(self) -> dict[str, Any]:
        """The policy as JSON: the near-duplicate threshold, the effect
        probability and the holdout rate as the exact fraction's text
        (``"4/5"``)."""
        return {
            "review_threshold": self.review_threshold,
            "provenance_horizon": self.provenance_horizon,
            "near_duplicate_threshold": str(self.near_duplicate_threshold),
            "top_revisions": self.top_revisions,
            "critical_review_threshold": self.critical_review_threshold,
            "pattern_threshold": self.pattern_threshold,
            "pattern_group_separator": self.pattern_group_separator,
            "effect_min_resolved": self.effect_min_resolved,
            "effect_probability": str(self.effect_probability),
            "holdout_salt": self.holdout_salt,
            "holdout_rate": None if self.holdout_rate is None else str(self.holdout_rate),
        }

    def differences(self, other: Policy) -> list[str]:
        """The attribute names whose values differ from ``other``'s."""
        return [name for name in ATTRIBUTES.values() if getattr(self, name) != getattr(other, name)]


def review_pair(chosen: Policy) -> tuple[int, int]:
    """A policy's (review threshold, critical review threshold): what
    decides its review candidates and revisions needing review."""
    return (chosen.review_threshold, chosen.critical_review_threshold)


def matching_key(chosen: Policy) -> tuple[int | None, str | None, Fraction | None]:
    """What a pass's processor must run with because it changes matches or
    arms: the provenance horizon (§5) and the holdout salt and rate (§21.5)."""
    return (chosen.provenance_horizon, chosen.holdout_salt, chosen.holdout_rate)


def show(value: Any) -> str:
    """A setting's value as a person reads it (a horizon of None is "end")."""
    return "end of input" if value is None else str(value)


@dataclass(frozen=True)
class Sweep:
    """One setting over several values (``--sweep review-threshold=2..8``):
    the policies are the fixed policy with each value in turn."""

    setting: policy.Setting
    values: tuple[Any, ...]

    def policies(self, fixed: Policy) -> tuple[Policy, ...]:
        """The swept policies, in the order of :attr:`values`."""
        return tuple(fixed.with_setting(self.setting, value) for value in self.values)


#: Largest number of values of a sweep; of a provenance horizon sweep (each
#: value is a replay of the whole input).
MAX_SWEEP_VALUES = 100
MAX_HORIZON_PASSES = 8


@dataclass
class Pass:
    """Policies that share one processor, i.e. one run of the core over the
    inputs: the same provenance horizon, holdout salt and holdout rate
    (:func:`matching_key`). ``native`` is the policy the core
    runs with (its ledger facts are the core's own); the other review and
    near-duplicate thresholds of ``policies`` are computed beside it."""

    native: Policy
    policies: list[Policy] = field(default_factory=list)

    @property
    def review_thresholds(self) -> tuple[tuple[int, int], ...]:
        """Every pair (review threshold, critical review threshold) of the
        pass (contract §8, §22), the native one first."""
        return tuple(dict.fromkeys([review_pair(self.native), *(review_pair(p) for p in self.policies)]))

    @property
    def near_duplicate_thresholds(self) -> tuple[Fraction, ...]:
        """Every near-duplicate threshold of the pass, the native one first."""
        return tuple(dict.fromkeys([self.native.near_duplicate_threshold, *(p.near_duplicate_threshold for p in self.policies)]))


def passes(policies: Iterable[Policy]) -> list[Pass]:
    """Group ``policies`` (duplicates dropped) into passes by provenance
    horizon, holdout salt and holdout rate (:func:`matching_key`), in order
    of first appearance; the first policy of each group is that pass's
    native one."""
    by_horizon: dict[tuple, Pass] = {}
    for candidate in dict.fromkeys(policies):
        found = by_horizon.get(matching_key(candidate))
        if found is None:
            found = by_horizon[matching_key(candidate)] = Pass(candidate)
        found.policies.append(candidate)
    return list(by_horizon.values())
