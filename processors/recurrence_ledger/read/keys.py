"""The Redis key layout of the read side, defined here once.

The view (``recurrence_ledger.read.projection``), the read models of the
history (``recurrence_ledger.read.history``) and every reader (the API, the
CLI) build key names through :class:`Keys`; nothing else spells a key.

The view
--------

Every key lives under a namespace `ns` (default `rl`; a deployment with the
topic prefix `prod.` uses `rl:prod.`, see `default_namespace`). `{scope}` is the
scope id with `%` written as `%25` and `:` as `%3A`, so that no scope id can
reach another scope's keys (a scope named `a:top` would otherwise own the
sorted set of scope `a`); scope ids without those two characters appear
verbatim.

| key | type | content |
| --- | --- | --- |
| `{ns}:scopes` | set | the scope ids (verbatim, not escaped) |
| `{ns}:scope:{scope}` | hash | `as_of_position`, `selected`, `recurred`, `avoided`, `unknown`, `unlinked_handoff_citations`, `needing_review`, `pending_outcomes`, `late_revisions`, and since revision 3 `forward_references`, `ambiguous_matches`, `unmatched_failures`, `binding_suspects` as integer strings; `unknown_reasons` (canonical JSON object: every contract §17 reason with its count); `top_revisions` (canonical JSON list, contract §8 order); `record` (the whole ScopeStatistics record as canonical JSON, contract §4); `review_threshold` (integer string: the writer's review threshold — the worker's `--review-threshold` — which decided the review set; absent in views written before it was stored) |
| `{ns}:scope:{scope}:top` | sorted set | member = canonical JSON `{"artifact_ref": {…}, "signature_key": "…"}`, score = `terminal_recurred_streak`; only the rows of `top_revisions` |
| `{ns}:scope:{scope}:review` | set | the same member strings, for the rows of `top_revisions` whose streak ≥ the view's review threshold (default 3) |
| `{ns}:scope:{scope}:revisions` | hash | one field per Experience revision of the scope with a selection or a verdict, every revision and not only the top N: field = `revision_member(artifact_ref)`, the canonical JSON of the ArtifactRef (`{"artifact_id":"P1","family":"experience","revision":1}`); value = that revision's last RevisionStatistics record as canonical JSON (contract §4: scope_id, artifact_ref, signature_key, terminal_recurred_streak, needs_review, repair_surface, selected, recurred, avoided, yield, low_yield; since revision 3 unknown, unknown_reasons, ambiguous, binding_suspect) |
| `{ns}:scopes:by:{sort}` | sorted set | the scope index of `GET /scopes?sort=`: member = scope id, score from `scope_index` (`scope_id`: 0, so that Redis orders the members by their bytes; the counters negated, so that ascending order is largest first with ties by scope id) |

The read models of the history
------------------------------

Under the same namespace; ``{artifact}`` is escaped as ``{scope}`` is,
``{revision}`` is the revision number. Positions written as 19 digits (zero
padded) compare exactly as text; sorted-set scores are doubles, exact up to
2^53.

| key | type | content |
| --- | --- | --- |
| ``{ns}:scope:{scope}:history:{artifact}:{revision}`` | sorted set | the newest N (``history_limit``, default 1,000) selected / recurred / avoided observations of the revision, score = task_outcome_position, member = JSON ``[position, event, task outcome source_id, failure item_kind, item_index, item_digest, observation id prefix]`` (the failure item null but for recurred) |
| ``{ns}:scope:{scope}:history-meta:{artifact}:{revision}`` | hash | ``total`` and ``selected`` / ``recurred`` / ``avoided``: observations ever applied (not only the N kept); ``signature_key``; ``c:{candidate_id}`` = ``{run start, 19 digits or empty for null}|{repair_surface}`` for each review candidate of the revision whose run is still the revision's current run (no avoided verdict since: the timeline's ``review_candidate`` of a run) |
| ``{ns}:scope:{scope}:avoided:{artifact}:{revision}`` | sorted set | every avoided verdict's position (member = 19 digits, score = position): names the runs of the oldest kept verdicts, ends the run of a review candidate |
| ``{ns}:scope:{scope}:trend`` | sorted set | the newest N (``trend_limit``, default 1,000) trend points of the scope: one per ScopeStatistics record read, score = as_of_position, member = JSON ``[partition, offset, Kafka timestamp ms, as_of_position, selected, recurred, avoided, unknown, unlinked_handoff_citations, pending_outcomes, needing_review, repeat_failure_rate]`` |
| ``{ns}:trend-totals`` | hash | scope id → trend points ever applied |
| ``{ns}:review-queue:items`` | hash | candidate_id → JSON ``{"candidate": ReviewCandidate, "timestamp": ms}``: every review candidate applied (kept whatever its status) |
| ``{ns}:review-status`` | hash | candidate_id → the candidate's last ReviewStatus record (contract §18) as canonical JSON |
| ``{ns}:review-queue:{filter}`` | sorted set | the review candidates of every scope whose status passes ``filter`` (:data:`REVIEW_FILTERS`: ``open``, ``superseded``, ``approved``, ``rejected``, ``decided`` = approved or rejected, ``all``), member = candidate_id, score = the candidate record's Kafka timestamp in ms (oldest first); a candidate without a ReviewStatus yet is ``open`` |
| ``{ns}:scope:{scope}:review-queue:{filter}`` | sorted set | the scope's candidates, as ``{ns}:review-queue:{filter}`` |
| ``{ns}:review-repairs`` | hash | repair status (``pending``, ``held``, ``recurring``, ``failed``) → the ReviewStatus rows whose ``repair`` has it |
| ``{ns}:follow-applied`` | hash | ``{logical topic}:{partition}`` → the next offset of that partition to apply to the read models |
| ``{ns}:scopes:by:{sort}`` | sorted set | the scope index (``recurrence_ledger.read.projection.scope_index``), written with each scope by every writer of the view |

The keys the Lua scripts get
----------------------------

The scripts (``recurrence_ledger/read/lua/``, run through
``recurrence_ledger.read.scripts``) spell no key: Python passes every key
they touch, built here.

| script | KEYS | keys inside ARGV |
| --- | --- | --- |
| ``guarded_write`` | scope hash, ``:top``, ``:review``, ``{ns}:scopes``, ``:revisions``, then :meth:`Keys.scope_index_keys` | none |
| ``scope_page`` | the sort's :meth:`Keys.scope_index`, the ``needing_review`` one | none |
| ``apply_observations`` | :attr:`Keys.applied` | per record: :meth:`Keys.history`, :meth:`Keys.history_meta`, :meth:`Keys.avoided` |
| ``apply_candidates`` | :attr:`Keys.applied`, :attr:`Keys.queue_items`, :attr:`Keys.review_status` | the prefix :attr:`Keys.queue_prefix`; per record: :meth:`Keys.history_meta`, :meth:`Keys.avoided` and the prefix :meth:`Keys.scope_queue_prefix` (the scripts append a filter name: :meth:`Keys.queue`, :meth:`Keys.scope_queue`) |
| ``apply_review_status`` | :attr:`Keys.applied`, :attr:`Keys.queue_items`, :attr:`Keys.review_status`, :attr:`Keys.review_repairs` | the prefix :attr:`Keys.queue_prefix`; per record: :meth:`Keys.scope_queue_prefix` |
| ``apply_trend`` | :attr:`Keys.applied`, :attr:`Keys.trend_totals` | per record: :meth:`Keys.trend` |

The ``follow-applied`` fields (``{logical topic}:{partition}``) are
:meth:`Keys.applied_field`. Keys passed inside ARGV are not declared to
Redis: like the view's transactions, the scripts need a single Redis, not
Redis Cluster.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: The orders of ``GET /scopes?sort=``, one ``{ns}:scopes:by:{sort}`` sorted set each.
SCOPE_SORTS: tuple[str, ...] = ("scope_id", "needing_review", "recurred", "repeat_failure_rate")


#: The filters of the review queue (``GET /review-queue?status=``), one
#: ``{ns}:review-queue:{filter}`` sorted set each (and one per scope): the
#: four statuses of contract §18, ``decided`` (approved or rejected) and
#: ``all``.
REVIEW_FILTERS: tuple[str, ...] = ("open", "superseded", "approved", "rejected", "decided", "all")

#: Key patterns (after ``{ns}:``) of the read models of ``recurrence_ledger.read.history``:
#: :meth:`RedisView.clear` deletes them with the view. (``review-queue``,
#: ``scope:…:review-queue`` and ``review-queue:surface:…`` are the review
#: queue's keys before contract §18: matched so that ``clear`` and ``view
#: rebuild`` remove them.)
READ_MODEL_KEYS = (
    r"scope:[^:]+:(trend|review-queue(:[a-z]+)?|(history|history-meta|avoided):[^:]+:[0-9]+)"
    r"|review-queue(:items|:surface:[a-z_]+|:[a-z]+)?|review-status|review-repairs|trend-totals|follow-applied"
)


def default_namespace(topic_prefix: str) -> str:
    """The namespace of a deployment: "rl" without a topic prefix, else
    ``"rl:" + topic_prefix`` ("rl:prod." for the prefix "prod."), as the
    worker names it. ``clear`` of "rl" never touches "rl:prod.:…" keys (it
    deletes this layout's keys only)."""
    return f"rl:{topic_prefix}" if topic_prefix else "rl"


def escape_scope(scope_id: str) -> str:
    """The ``{scope}`` part of a key: ``%`` → ``%25``, ``:`` → ``%3A``; every
    other character verbatim. Injective, and the result has no ``:``."""
    return scope_id.replace("%", "%25").replace(":", "%3A")


def glob_escape(text: str) -> str:
    """``text`` with the glob characters of SCAN MATCH escaped."""
    return re.sub(r"([*?\[\]\\])", r"\\\1", text)



@dataclass(frozen=True)
class Keys:
    """Every key name of one namespace (the layout in the module docstring):
    the one place that spells a Redis key of the read side."""

    namespace: str

    def scope(self, scope_id: str) -> str:
        """``{ns}:scope:{scope}``: the scope's hash."""
        return f"{self.namespace}:scope:{escape_scope(scope_id)}"

    def top(self, scope_id: str) -> str:
        """``{ns}:scope:{scope}:top``: the sorted set of ``top_revisions``."""
        return f"{self.scope(scope_id)}:top"

    def review(self, scope_id: str) -> str:
        """``{ns}:scope:{scope}:review``: the review set."""
        return f"{self.scope(scope_id)}:review"

    def revisions(self, scope_id: str) -> str:
        """``{ns}:scope:{scope}:revisions``: the revisions hash."""
        return f"{self.scope(scope_id)}:revisions"

    def history(self, scope_id: str, artifact_id: str, revision: int) -> str:
        """``{ns}:scope:{scope}:history:{artifact}:{revision}``: the revision's kept observations."""
        return f"{self.scope(scope_id)}:history:{escape_scope(artifact_id)}:{revision}"

    def history_meta(self, scope_id: str, artifact_id: str, revision: int) -> str:
        """``{ns}:scope:{scope}:history-meta:{artifact}:{revision}``: the revision's counts and open candidates."""
        return f"{self.scope(scope_id)}:history-meta:{escape_scope(artifact_id)}:{revision}"

    def avoided(self, scope_id: str, artifact_id: str, revision: int) -> str:
        """``{ns}:scope:{scope}:avoided:{artifact}:{revision}``: the revision's avoided positions."""
        return f"{self.scope(scope_id)}:avoided:{escape_scope(artifact_id)}:{revision}"

    def trend(self, scope_id: str) -> str:
        """``{ns}:scope:{scope}:trend``: the scope's trend points."""
        return f"{self.scope(scope_id)}:trend"

    def scope_queue_prefix(self, scope_id: str) -> str:
        """``{ns}:scope:{scope}:review-queue:``: the prefix of the scope's
        :meth:`scope_queue` keys (passed to the review scripts)."""
        return f"{self.scope(scope_id)}:review-queue:"

    def scope_queue(self, scope_id: str, review_filter: str) -> str:
        """``{ns}:scope:{scope}:review-queue:{filter}``: the scope's review
        candidates passing one of :data:`REVIEW_FILTERS`."""
        return self.scope_queue_prefix(scope_id) + review_filter

    @property
    def queue_prefix(self) -> str:
        """``{ns}:review-queue:``: the prefix of the :meth:`queue` keys
        (passed to the review scripts)."""
        return f"{self.namespace}:review-queue:"

    def queue(self, review_filter: str) -> str:
        """``{ns}:review-queue:{filter}``: the review candidates of every
        scope passing one of :data:`REVIEW_FILTERS`."""
        return self.queue_prefix + review_filter

    @property
    def queue_items(self) -> str:
        """``{ns}:review-queue:items``: candidate_id → queue item."""
        return f"{self.namespace}:review-queue:items"

    @property
    def review_status(self) -> str:
        """``{ns}:review-status``: candidate_id → its last ReviewStatus (contract §18)."""
        return f"{self.namespace}:review-status"

    @property
    def review_repairs(self) -> str:
        """``{ns}:review-repairs``: repair status → ReviewStatus rows with it."""
        return f"{self.namespace}:review-repairs"

    @property
    def trend_totals(self) -> str:
        """``{ns}:trend-totals``: scope id → trend points ever applied."""
        return f"{self.namespace}:trend-totals"

    @property
    def applied(self) -> str:
        """``{ns}:follow-applied``: the next offset to apply per topic partition."""
        return f"{self.namespace}:follow-applied"

    @staticmethod
    def applied_field(topic: str, partition: int) -> str:
        """The field of :attr:`applied` of one partition of a logical topic:
        ``{topic}:{partition}``."""
        return f"{topic}:{partition}"

    def scope_index(self, sort: str) -> str:
        """``{ns}:scopes:by:{sort}``: the scope index in one order of :data:`SCOPE_SORTS`."""
        return f"{self.scope_index_prefix}{sort}"

    def scope_index_keys(self) -> tuple[str, ...]:
        """The :meth:`scope_index` key of every sort, in :data:`SCOPE_SORTS` order."""
        return tuple(self.scope_index(sort) for sort in SCOPE_SORTS)

    @property
    def scopes(self) -> str:
        """``{ns}:scopes``: the set of scope ids."""
        return f"{self.namespace}:scopes"

    @property
    def scope_index_prefix(self) -> str:
        """The common prefix of the :meth:`scope_index` keys."""
        return f"{self.namespace}:scopes:by:"

    def glob(self) -> str:
        """SCAN pattern of every key of the namespace (its glob characters escaped)."""
        return f"{glob_escape(self.namespace)}:*"

    def layout_pattern(self) -> re.Pattern:
        """Full match of every key of this layout in the namespace (view and
        read models): what ``clear`` deletes, never another namespace's keys."""
        return re.compile(rf"{re.escape(self.namespace)}:(scopes|scope:[^:]+(:top|:review|:revisions)?|scopes:by:[a-z_]+|{READ_MODEL_KEYS})")

    def read_model_pattern(self) -> re.Pattern:
        """Full match of every read-model key of the namespace (not the
        view's own keys, nor the scope index)."""
        return re.compile(rf"{re.escape(self.namespace)}:({READ_MODEL_KEYS})")

    def read_model_kind(self, key: str) -> str | None:
        """What a key of the namespace holds, for ``ReadModels.memory``:
        ``history`` (the three per-revision keys), ``trend`` (a trend or the
        trend totals), ``review_queue`` (every review-queue key, the review
        status and the repair counts) or
        ``applied`` (``follow-applied``); None for a key that is not a read
        model of this namespace."""
        if not self.read_model_pattern().fullmatch(key):
            return None
        parts = key[len(self.namespace) + 1 :].split(":")
        name = parts[2] if parts[0] == "scope" else parts[0]
        if name in ("history", "history-meta", "avoided"):
            return "history"
        if name in ("trend", "trend-totals"):
            return "trend"
        return "review_queue" if name in ("review-queue", "review-status", "review-repairs") else "applied"
