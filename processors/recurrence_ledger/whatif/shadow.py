"""One pass of the core, several review and near-duplicate thresholds
(contract §20): :class:`WhatIfProcessor`.

The processor is the core's ``LedgerProcessor`` at one policy (the pass's
*native* policy, whose ledger facts are the core's own) and computes, beside
it and from the same events, what other thresholds would have published:

- **Review thresholds** (§8). Terminal verdicts and the runs they form do
  not depend on the review threshold; only which run publishes a
  ReviewCandidate does. The core publishes a run's candidate at threshold t
  the first time a verdict lengthens (or a late avoided verdict splits off)
  that run and it then holds ≥ t recurred verdicts. So one number per run —
  the most recurred verdicts it has held at such a moment — decides every
  threshold at once: when a verdict takes a run from that number ``before``
  to ``length``, every threshold t with ``before < t ≤ length`` publishes
  the run's candidate now, with the run's failure refs of this moment
  (``streaks.review_candidate``, the core's own record). No state per threshold,
  and no re-run of matching.
- **Near-duplicate thresholds** (§12 rule 5). Admission never changes a
  ledger fact, and a candidate is decided at the same moment whatever the
  threshold; each decision's near-duplicates are looked up again, at that
  moment, at every other threshold (``admission.near_duplicates``).
- **The provenance horizon** (§5) is the pass's own: the outcomes it decided
  unlinked are recorded (``horizon_unlinked``), apart from those the end of
  the inputs decided (``end_unlinked``).

The processor is its own policy hook (``ledger.hooks.PolicyHook``): the
core tells it of three steps — a terminal verdict, an admission decision, an
outcome decided as unlinked because it waited too long — and it changes none
of them: its emits are the core's, byte for byte.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction

from recurrence_ledger.ledger import admission
from recurrence_ledger.ledger.config import LedgerConfig
from recurrence_ledger.ledger.hooks import PolicyHook
from recurrence_ledger.ledger.normalize import digest
from recurrence_ledger.ledger.processor import LedgerProcessor
from recurrence_ledger.ledger.severity import is_critical
from recurrence_ledger.ledger.state import LedgerState
from recurrence_ledger.ledger.streaks import HISTORY_START, review_candidate, run_name_at

#: A review policy: (review threshold, critical review threshold), contract §8, §22.
ReviewPair = tuple[int, int]


def with_near_duplicates(decision: dict, near: list[dict]) -> dict:
    """The AdmissionDecision ``decision`` with another rule-5 list ``near``
    (best first): cut to ``admission.MAX_NEAR_DUPLICATES``, its length in
    ``near_duplicates_total``, the ``decision_digest`` recomputed — the
    record the core decides with ``near`` (``admission.decision``)."""
    record = {name: value for name, value in decision.items() if name != "decision_digest"}
    record["near_duplicates"] = near[: admission.MAX_NEAR_DUPLICATES]
    record["near_duplicates_total"] = len(near)
    record["decision_digest"] = digest(record)
    return record


class WhatIfProcessor(LedgerProcessor, PolicyHook):
    """The core at ``config`` (the native policy), plus the review
    thresholds ``review_thresholds`` and near-duplicate thresholds
    ``near_duplicate_thresholds`` computed from the same pass (each may
    include the native one, which the core itself decides).

    A review threshold is a pair (review threshold, critical review
    threshold), contract §22; a plain number t is (t, the native critical
    review threshold). After the input (``flush``), per threshold:

    - ``candidates[(t, c)]``: the ReviewCandidate records the review
      thresholds t and c publish, in publication order (the native one's are the core's, the
      others' from the runs the core keeps, module docstring);
    - ``decisions[t]``: ``{(scope_id, candidate_id): AdmissionDecision}``
      near-duplicate threshold t decides, in decision order;
    - ``horizon_unlinked`` / ``end_unlinked``: ``{scope_id: {task outcome
      source_id: journal_position}}`` of the outcomes decided unlinked
      because the provenance horizon passed / the input ended;
    - ``review_decisions``: ``{(scope_id, candidate_id): "approved" |
      "rejected"}``, the decision that stands for each candidate a
      ReviewDecision of the input names in its scope (contract §18: the
      first one the core applies or holds; a decision in another scope
      naming the same id is that scope's own), under
      every threshold alike — a decision the native threshold's candidates
      cannot take (it waits in vain) still counts for the threshold whose
      candidate it is.
    """

    def __init__(self, config: LedgerConfig, review_thresholds: Sequence[int | ReviewPair] = (), near_duplicate_thresholds: Sequence[Fraction] = (),
                 validate_outputs: bool = False) -> None:
        super().__init__(config=config, validate_outputs=validate_outputs, hook=self)
        native_review = (config.review_threshold, config.critical_review_threshold)
        native_near = config.near_duplicate_threshold
        self.candidates: dict[ReviewPair, list[dict]] = {native_review: []}
        pairs = ((t, config.critical_review_threshold) if isinstance(t, int) else tuple(t) for t in review_thresholds)
        self._reviews = sorted(t for t in dict.fromkeys(pairs) if t != native_review)
        for threshold in self._reviews:
            self.candidates[threshold] = []
        #: (scope_id, artifact_id, revision, run name) → the most recurred
        #: verdicts the run held when a verdict lengthened or split it off.
        self._longest: dict[tuple, int] = {}
        self.decisions: dict[Fraction, dict[tuple[str, str], dict]] = {native_near: {}}
        self._near = [t for t in dict.fromkeys(near_duplicate_thresholds) if t != native_near]
        for threshold in self._near:
            self.decisions[threshold] = {}
        self.review_decisions: dict[tuple[str, str], str] = {}
        self.horizon_unlinked: dict[str, dict[str, int]] = {}
        self.end_unlinked: dict[str, dict[str, int]] = {}

    # -- the policy hook (ledger.hooks.PolicyHook) --------------------------------
    def review_decision_taken(self, state: LedgerState, scope_id: str, decision: dict) -> None:
        """The first decision the core takes for a candidate of its scope stands (contract §18)."""
        self.review_decisions.setdefault((scope_id, decision["candidate_id"]), decision["decision"])

    def verdict_recorded(self, state: LedgerState, scope_id: str, record: dict, repair_surface: str, published: list[dict]) -> None:
        """The native threshold's candidates are the core's ``published``;
        the other review thresholds' are worked out from the run."""
        self.candidates[(self.config.review_threshold, self.config.critical_review_threshold)] += published
        if self._reviews and repair_surface == "experience_content":
            ref = record["artifact_ref"]
            critical = is_critical(state.get("streak", scope_id, ref["artifact_id"], ref["revision"]))
            self._other_thresholds(state, scope_id, record, repair_surface, critical)

    def _other_thresholds(self, state: LedgerState, scope_id: str, record: dict, repair_surface: str, critical: bool = False) -> None:
        """The candidates the other review thresholds publish for the run
        this verdict (just recorded by the core) lengthened or split off:
        for a recurred verdict the run it falls in (named by the avoided
        verdict before it), for an avoided one the run it opens."""
        ref, position = record["artifact_ref"], record["task_outcome_position"]
        parts = (scope_id, ref["artifact_id"], ref["revision"])
        if record["event"] == "avoided":
            name = position
        else:
            name = run_name_at(state, parts, position, state.get("streak", *parts)["last_avoided"])
        entries = state.get("run", *parts, HISTORY_START if name is None else name, default=[])
        key = (*parts, name)
        before, length = self._longest.get(key, 0), len(entries)
        if length <= before:
            return
        self._longest[key] = length
        for pair in self._reviews:
            threshold = pair[1] if critical else pair[0]  # contract §22: a critical revision's own threshold
            if before < threshold <= length:
                self.candidates[pair].append(
                    review_candidate(state, scope_id, ref, record["signature_key"], repair_surface, name, entries, threshold, critical))

    def admission_decided(self, state: LedgerState, scope_id: str, candidate: dict, decision: dict) -> None:
        """The native threshold's decision is the core's; each other
        near-duplicate threshold looks the near-duplicates up again now."""
        key = (scope_id, candidate["candidate_id"])
        self.decisions[self.config.near_duplicate_threshold][key] = decision
        if self._near:
            cue = admission.signature_key(candidate["content"])
            for threshold in self._near:
                near = admission.near_duplicates(state, scope_id, cue, candidate["artifact_id"], threshold) if cue else []
                self.decisions[threshold][key] = with_near_duplicates(decision, near)

    def outcome_expired(self, state: LedgerState, scope_id: str, outcome_id: str, journal_position: int, end_of_input: bool) -> None:
        """Recorded in ``end_unlinked`` or ``horizon_unlinked``."""
        (self.end_unlinked if end_of_input else self.horizon_unlinked).setdefault(scope_id, {})[outcome_id] = journal_position
