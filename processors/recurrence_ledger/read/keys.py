"""The Redis key layout of the read side, defined here once.

The view (``recurrence_ledger.read.projection``), the read models of the
history (``recurrence_ledger.read.history``) and every reader (the API, the
CLI) build key names through :class:`Keys`; nothing else spells a key.

Layout version 2 (:data:`LAYOUT_VERSION`, kept in ``{ns}:{{ns}}:layout``)
works on a single Redis and on Redis Cluster alike. Every key lives under a
namespace ``ns`` (default ``rl``; a deployment with the topic prefix
``prod.`` uses ``rl:prod.``, see :func:`default_namespace`) and carries a
Redis Cluster hash tag (the part between the first ``{`` and the next
``}``, which alone decides the key's slot):

- the keys of one scope carry the scope, ``{ns}:scope:{<scope>}…``: one
  slot per scope, so each scope's transaction and each per-scope Lua script
  touches one slot;
- the cross-scope keys (the scope set and index, the review queue of every
  scope, the candidates and review statuses by id, the repair counts, the
  ``follow-applied`` offsets of the review scripts, the layout marker) carry
  the namespace, ``{ns}:{<ns>}:…``: one slot for them all, written by their
  own scripts and commands, never in the same one as a scope's keys.

``<scope>`` is the scope id with ``%`` written as ``%25``, ``:`` as
``%3A``, ``{`` as ``%7B`` and ``}`` as ``%7D`` (:func:`escape_scope`), so
that no scope id reaches another scope's keys nor breaks its hash tag;
scope ids without those characters appear verbatim. In the tables,
``{ns}`` and ``{scope}`` are placeholders; the braces of ``{<scope>}`` and
``{<ns>}`` are in the key.

The view
--------

| key | type | content |
| --- | --- | --- |
| ``{ns}:scope:{<scope>}`` | hash | every plain integer field of the ScopeStatistics record (``recurrence_ledger.read.projection.COUNTER_FIELDS``, derived from the model: its position, counters, gauges and the review threshold the ledger applied) as integer strings; ``unknown_reasons`` (canonical JSON object: every contract §17 reason with its count); ``top_revisions`` (canonical JSON list, contract §8 order); ``record`` (the whole ScopeStatistics record as canonical JSON, contract §4) |
| ``{ns}:scope:{<scope>}:top`` | sorted set | member = canonical JSON ``{"artifact_ref": {…}, "signature_key": "…"}``, score = ``terminal_recurred_streak``; only the rows of ``top_revisions`` |
| ``{ns}:scope:{<scope>}:review`` | set | the same member strings, for the rows of ``top_revisions`` the ledger flagged ``needs_review`` |
| ``{ns}:scope:{<scope>}:revisions`` | hash | one field per Experience revision of the scope with a selection or a verdict: field = ``revision_member(artifact_ref)``, the canonical JSON of the ArtifactRef (``{"artifact_id":"P1","family":"experience","revision":1}``); value = that revision's last RevisionStatistics record as canonical JSON (contract §4) |
| ``{ns}:{<ns>}:scopes`` | set | the scope ids (verbatim, not escaped) |
| ``{ns}:{<ns>}:scopes:by:{sort}`` | sorted set | the scope index of ``GET /scopes?sort=``: member = scope id, score from ``scope_index`` (``scope_id``: 0, so that Redis orders the members by their bytes; the counters negated, so that ascending order is largest first with ties by scope id) |
| ``{ns}:{<ns>}:scopes:at`` | hash | scope id → the ``as_of_position`` (19 digits) of the record the scope set and index were last written with: they are written after the scope's own keys, by a script that never puts back an older position |
| ``{ns}:{<ns>}:layout`` | string | the layout version (``2``) |
| ``{ns}:group:{<group>}:patterns`` | hash | the signature patterns of one pattern group (contract §23.3): field = signature_key, value = the last SignaturePattern record of (group, signature_key) as canonical JSON (contract §4), never replaced by one with fewer recurred verdicts (``apply_patterns``); ``<group>`` is the group name escaped as a scope id is, the group ``""`` (no group separator: every scope) as ``%`` — one slot per group, and no key holds two groups' patterns (§23.1) |
| ``{ns}:{<ns>}:decision-request:{digest}`` | string | written by the API, not the workers: the answer to the review decision sent with one ``Idempotency-Key`` (``recurrence_ledger.api.idempotency``), JSON, expiring after minutes |

The read models of the history
------------------------------

``{artifact}`` is escaped as a scope is, ``{revision}`` is the revision
number. Positions written as 19 digits (zero padded) compare exactly as
text; sorted-set scores are doubles, exact up to 2^53.

| key | type | content |
| --- | --- | --- |
| ``{ns}:scope:{<scope>}:history:{artifact}:{revision}`` | sorted set | the newest N (``history_limit``, default 1,000) selected / recurred / avoided observations of the revision, score = task_outcome_position, member = JSON ``[position, event, task outcome source_id, failure item_kind, item_index, item_digest, observation id prefix]`` (the failure item null but for recurred) |
| ``{ns}:scope:{<scope>}:history-meta:{artifact}:{revision}`` | hash | ``total`` and ``selected`` / ``recurred`` / ``avoided``: observations ever applied (not only the N kept); ``signature_key``; ``c:{candidate_id}`` = ``{run start, 19 digits or empty for null}|{repair_surface}`` for each review candidate of the revision whose run is still the revision's current run |
| ``{ns}:scope:{<scope>}:avoided:{artifact}:{revision}`` | sorted set | every avoided verdict's position (member = 19 digits, score = position) |
| ``{ns}:scope:{<scope>}:trend`` | sorted set | the newest N (``trend_limit``, default 1,000) trend points of the scope: one per ScopeStatistics record read, score = as_of_position, member = JSON ``[partition, offset, Kafka timestamp ms, as_of_position, selected, recurred, avoided, unknown, unlinked_handoff_citations, pending_outcomes, needing_review, repeat_failure_rate]`` |
| ``{ns}:scope:{<scope>}:trend-meta`` | hash | ``total``: trend points of the scope ever applied |
| ``{ns}:scope:{<scope>}:review-queue:{filter}`` | sorted set | the scope's review candidates whose status passes ``filter`` (:data:`REVIEW_FILTERS`), member = candidate_id, score = the candidate record's Kafka timestamp in ms |
| ``{ns}:scope:{<scope>}:review-state`` | hash | ``t:{candidate_id}`` = the candidate record's Kafka timestamp (ms) of each candidate of the scope applied; ``s:{candidate_id}`` = the status of its last ReviewStatus applied: what files the candidate in the scope's queue |
| ``{ns}:scope:{<scope>}:applied`` | hash | ``{logical topic}:{partition}`` → the next offset of that partition to apply to the scope's read models (the scope's records of it; exactly once per scope) |
| ``{ns}:{<ns>}:review-queue:items`` | hash | candidate_id → JSON ``{"candidate": ReviewCandidate, "timestamp": ms}``: every review candidate applied |
| ``{ns}:{<ns>}:review-status`` | hash | candidate_id → the candidate's last ReviewStatus record (contract §18) as canonical JSON |
| ``{ns}:{<ns>}:review-queue:{filter}`` | sorted set | the review candidates of every scope whose status passes ``filter`` (``open``, ``superseded``, ``approved``, ``rejected``, ``decided`` = approved or rejected, ``all``), member = candidate_id, score = the candidate record's Kafka timestamp in ms (oldest first); a candidate without a ReviewStatus yet is ``open`` |
| ``{ns}:{<ns>}:review-repairs`` | hash | repair status (``pending``, ``held``, ``recurring``, ``failed``) → the ReviewStatus rows whose ``repair`` has it |
| ``{ns}:{<ns>}:follow-applied`` | hash | ``{logical topic}:{partition}`` → the next offset of that partition to apply to the cross-scope review keys above |
| ``{ns}:{<ns>}:follow-position`` | hash | ``{logical topic}:{partition}`` → the next offset of every followed partition after the last batch the view followers wrote whole (``recurrence_ledger.read.positions``): a Redis that comes back from an older snapshot holds a lower one, and the follower reads again from there |

The keys the Lua scripts get
----------------------------

The scripts (``recurrence_ledger/read/lua/``, run through
``recurrence_ledger.read.scripts``) spell no key: Python passes every key
they touch, built here, as KEYS or inside ARGV — and every key of one call
is of one slot (a scope's, or the namespace's), which Redis Cluster checks
(the scripts start with ``#!lua``: a script touching a key of another slot
than its KEYS fails).

| script | slot | KEYS | keys inside ARGV |
| --- | --- | --- | --- |
| ``guarded_write`` | scope | scope hash, ``:top``, ``:review``, ``:revisions`` | none |
| ``apply_patterns`` | group | :meth:`Keys.group_patterns` | none |
| ``index_scope`` | namespace | :attr:`Keys.scopes`, :attr:`Keys.scopes_at`, then :meth:`Keys.scope_index_keys` | none |
| ``scope_page`` | namespace | the sort's :meth:`Keys.scope_index`, the ``needing_review`` one | none |
| ``apply_observations`` | scope | :meth:`Keys.scope_applied` | per record: :meth:`Keys.history`, :meth:`Keys.history_meta`, :meth:`Keys.avoided` |
| ``apply_trend`` | scope | :meth:`Keys.scope_applied`, :meth:`Keys.trend_meta`, :meth:`Keys.trend` | none |
| ``apply_scope_candidates`` | scope | :meth:`Keys.scope_applied`, :meth:`Keys.review_state` | the prefix :meth:`Keys.scope_queue_prefix`; per record: :meth:`Keys.history_meta`, :meth:`Keys.avoided` |
| ``apply_scope_review_status`` | scope | :meth:`Keys.scope_applied`, :meth:`Keys.review_state` | the prefix :meth:`Keys.scope_queue_prefix` |
| ``apply_candidates`` | namespace | :attr:`Keys.applied`, :attr:`Keys.queue_items`, :attr:`Keys.review_status` | the prefix :attr:`Keys.queue_prefix` |
| ``apply_review_status`` | namespace | :attr:`Keys.applied`, :attr:`Keys.queue_items`, :attr:`Keys.review_status`, :attr:`Keys.review_repairs` | the prefix :attr:`Keys.queue_prefix` |

The ``applied`` fields (``{logical topic}:{partition}``) are
:meth:`Keys.applied_field`.

Layout 1
--------

Versions before layout 2 wrote the same keys without hash tags
(``{ns}:scope:{scope}``, ``{ns}:scopes``, ``{ns}:scopes:by:{sort}``,
``{ns}:review-queue:…``, ``{ns}:trend-totals``, ``{ns}:follow-applied``, …)
on a single Redis. :data:`LEGACY_KEYS` matches them: ``clear`` (and so
``view rebuild``, the upgrade, docs/upgrading.md) deletes them, and the
follower refuses to write beside them (``recurrence_ledger.read.layout``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import get_args

from recurrence_ledger.ledger.models import ReviewState

#: The version of the key layout this module spells (module docstring),
#: kept in :attr:`Keys.layout_marker`.
LAYOUT_VERSION = 2

#: The orders of ``GET /scopes?sort=``, one ``{ns}:{<ns>}:scopes:by:{sort}`` sorted set each.
SCOPE_SORTS: tuple[str, ...] = ("scope_id", "needing_review", "recurred", "repeat_failure_rate")


#: The filters of the review queue (``GET /review-queue?status=``), one
#: ``{ns}:{<ns>}:review-queue:{filter}`` sorted set each (and one per scope): the
#: four statuses of contract §18, ``decided`` (approved or rejected) and
#: ``all``.
REVIEW_FILTERS: tuple[str, ...] = (*get_args(ReviewState), "decided", "all")

#: Key patterns (after ``{ns}:``) of the read models of layout 2: of a scope
#: (after ``scope:{<scope>}``) and of the namespace (after ``{<ns>}:``).
_SCOPE_READ_MODELS = r"(trend|trend-meta|review-state|applied|review-queue:[a-z]+|(history|history-meta|avoided):[^:]+:[0-9]+)"
_GLOBAL_READ_MODELS = r"(review-queue:[a-z]+|review-status|review-repairs|follow-applied)"

#: Key patterns (after ``{ns}:``) of layout 1 (module docstring), view and
#: read models (``review-queue``, ``scope:…:review-queue`` and
#: ``review-queue:surface:…`` are the review queue's keys before contract §18).
LEGACY_READ_MODEL_KEYS = (
    r"scope:[^:]+:(trend|review-queue(:[a-z]+)?|(history|history-meta|avoided):[^:]+:[0-9]+)"
    r"|review-queue(:items|:surface:[a-z_]+|:[a-z]+)?|review-status|review-repairs|trend-totals|follow-applied"
)
LEGACY_KEYS = rf"scopes|scope:[^:]+(:top|:review|:revisions)?|scopes:by:[a-z_]+|{LEGACY_READ_MODEL_KEYS}"


def default_namespace(topic_prefix: str) -> str:
    """The namespace of a deployment: "rl" without a topic prefix, else
    ``"rl:" + topic_prefix`` ("rl:prod." for the prefix "prod."), as the
    worker names it. ``clear`` of "rl" never touches "rl:prod.:…" keys (it
    deletes this layout's keys only)."""
    return f"rl:{topic_prefix}" if topic_prefix else "rl"


def escape_scope(scope_id: str) -> str:
    """The ``<scope>`` part of a key: ``%`` → ``%25``, ``:`` → ``%3A``,
    ``{`` → ``%7B``, ``}`` → ``%7D``; every other character verbatim.
    Injective, and the result has no ``:`` nor brace (so a hash tag
    ``{<scope>}`` is the whole escaped id). The empty id (never a scope:
    contract §3; only a reader's filter) is ``%``, which no other id gives,
    so that its keys still share one hash tag on Redis Cluster (an empty
    tag ``{}`` would hash each key by its whole name)."""
    if not scope_id:
        return "%"
    return scope_id.replace("%", "%25").replace(":", "%3A").replace("{", "%7B").replace("}", "%7D")


def glob_escape(text: str) -> str:
    """``text`` with the glob characters of SCAN MATCH escaped."""
    return re.sub(r"([*?\[\]\\])", r"\\\1", text)


@dataclass(frozen=True)
class Keys:
    """Every key name of one namespace (the layout in the module docstring):
    the one place that spells a Redis key of the read side. Raises
    ValueError for a namespace with a brace (it would break the hash tags)."""

    namespace: str

    def __post_init__(self) -> None:
        if "{" in self.namespace or "}" in self.namespace:
            raise ValueError(f"a Redis namespace must not contain {{ or }}: {self.namespace!r}")

    # -- the keys of one scope (its slot: the hash tag {<scope>})

    def scope(self, scope_id: str) -> str:
        """``{ns}:scope:{<scope>}``: the scope's hash."""
        return f"{self.namespace}:scope:{{{escape_scope(scope_id)}}}"

    def top(self, scope_id: str) -> str:
        """``{ns}:scope:{<scope>}:top``: the sorted set of ``top_revisions``."""
        return f"{self.scope(scope_id)}:top"

    def review(self, scope_id: str) -> str:
        """``{ns}:scope:{<scope>}:review``: the review set."""
        return f"{self.scope(scope_id)}:review"

    def revisions(self, scope_id: str) -> str:
        """``{ns}:scope:{<scope>}:revisions``: the revisions hash."""
        return f"{self.scope(scope_id)}:revisions"

    def history(self, scope_id: str, artifact_id: str, revision: int) -> str:
        """``{ns}:scope:{<scope>}:history:{artifact}:{revision}``: the revision's kept observations."""
        return f"{self.scope(scope_id)}:history:{escape_scope(artifact_id)}:{revision}"

    def history_meta(self, scope_id: str, artifact_id: str, revision: int) -> str:
        """``{ns}:scope:{<scope>}:history-meta:{artifact}:{revision}``: the revision's counts and open candidates."""
        return f"{self.scope(scope_id)}:history-meta:{escape_scope(artifact_id)}:{revision}"

    def avoided(self, scope_id: str, artifact_id: str, revision: int) -> str:
        """``{ns}:scope:{<scope>}:avoided:{artifact}:{revision}``: the revision's avoided positions."""
        return f"{self.scope(scope_id)}:avoided:{escape_scope(artifact_id)}:{revision}"

    def trend(self, scope_id: str) -> str:
        """``{ns}:scope:{<scope>}:trend``: the scope's trend points."""
        return f"{self.scope(scope_id)}:trend"

    def trend_meta(self, scope_id: str) -> str:
        """``{ns}:scope:{<scope>}:trend-meta``: ``total``, the scope's trend points ever applied."""
        return f"{self.scope(scope_id)}:trend-meta"

    def scope_queue_prefix(self, scope_id: str) -> str:
        """``{ns}:scope:{<scope>}:review-queue:``: the prefix of the scope's
        :meth:`scope_queue` keys (passed to the review scripts)."""
        return f"{self.scope(scope_id)}:review-queue:"

    def scope_queue(self, scope_id: str, review_filter: str) -> str:
        """``{ns}:scope:{<scope>}:review-queue:{filter}``: the scope's review
        candidates passing one of :data:`REVIEW_FILTERS`."""
        return self.scope_queue_prefix(scope_id) + review_filter

    def review_state(self, scope_id: str) -> str:
        """``{ns}:scope:{<scope>}:review-state``: timestamp and status of each candidate of the scope."""
        return f"{self.scope(scope_id)}:review-state"

    def scope_applied(self, scope_id: str) -> str:
        """``{ns}:scope:{<scope>}:applied``: the next offset to apply to the scope's read models, per topic partition."""
        return f"{self.scope(scope_id)}:applied"

    # -- the keys of one pattern group (its slot: the hash tag {<group>})

    def group_patterns(self, group: str) -> str:
        """``{ns}:group:{<group>}:patterns``: the group's signature patterns
        (contract §23.3), field = signature_key."""
        return f"{self.namespace}:group:{{{escape_scope(group)}}}:patterns"

    # -- the cross-scope keys (the namespace's slot: the hash tag {<ns>})

    def _global(self, name: str) -> str:
        return f"{self.namespace}:{{{self.namespace}}}:{name}"

    @property
    def queue_prefix(self) -> str:
        """``{ns}:{<ns>}:review-queue:``: the prefix of the :meth:`queue` keys
        (passed to the review scripts)."""
        return self._global("review-queue:")

    def queue(self, review_filter: str) -> str:
        """``{ns}:{<ns>}:review-queue:{filter}``: the review candidates of every
        scope passing one of :data:`REVIEW_FILTERS`."""
        return self.queue_prefix + review_filter

    @property
    def queue_items(self) -> str:
        """``{ns}:{<ns>}:review-queue:items``: candidate_id → queue item."""
        return self._global("review-queue:items")

    @property
    def review_status(self) -> str:
        """``{ns}:{<ns>}:review-status``: candidate_id → its last ReviewStatus (contract §18)."""
        return self._global("review-status")

    @property
    def review_repairs(self) -> str:
        """``{ns}:{<ns>}:review-repairs``: repair status → ReviewStatus rows with it."""
        return self._global("review-repairs")

    @property
    def applied(self) -> str:
        """``{ns}:{<ns>}:follow-applied``: the next offset to apply to the cross-scope review keys, per topic partition."""
        return self._global("follow-applied")

    @property
    def position(self) -> str:
        """``{ns}:{<ns>}:follow-position``: the next offset of every followed partition after the followers' last whole batch."""
        return self._global("follow-position")

    @staticmethod
    def applied_field(topic: str, partition: int) -> str:
        """The field of :attr:`applied` and :meth:`scope_applied` of one
        partition of a logical topic: ``{topic}:{partition}``."""
        return f"{topic}:{partition}"

    def scope_index(self, sort: str) -> str:
        """``{ns}:{<ns>}:scopes:by:{sort}``: the scope index in one order of :data:`SCOPE_SORTS`."""
        return f"{self.scope_index_prefix}{sort}"

    def scope_index_keys(self) -> tuple[str, ...]:
        """The :meth:`scope_index` key of every sort, in :data:`SCOPE_SORTS` order."""
        return tuple(self.scope_index(sort) for sort in SCOPE_SORTS)

    @property
    def scopes(self) -> str:
        """``{ns}:{<ns>}:scopes``: the set of scope ids."""
        return self._global("scopes")

    @property
    def scopes_at(self) -> str:
        """``{ns}:{<ns>}:scopes:at``: scope id → the position its index entries were written with."""
        return self._global("scopes:at")

    @property
    def scope_index_prefix(self) -> str:
        """The common prefix of the :meth:`scope_index` keys."""
        return self._global("scopes:by:")

    @property
    def layout_marker(self) -> str:
        """``{ns}:{<ns>}:layout``: the layout version of the namespace's keys."""
        return self._global("layout")

    def decision_request(self, request_digest: str) -> str:
        """``{ns}:{<ns>}:decision-request:{digest}``: the answer of the
        review decision sent with one idempotency key (``digest``: 64 hex
        digits of the reviewer and the key; ``recurrence_ledger.api.idempotency``)."""
        if re.fullmatch(r"[0-9a-f]{64}", request_digest) is None:
            raise ValueError(f"a decision request digest is 64 hex digits, not {request_digest!r}")
        return self._global(f"decision-request:{request_digest}")

    @property
    def legacy_scopes(self) -> str:
        """``{ns}:scopes``: the scope set of layout 1, whose presence says
        that the namespace holds keys of a version before layout 2."""
        return f"{self.namespace}:scopes"

    # -- patterns

    def glob(self) -> str:
        """SCAN pattern of every key of the namespace (its glob characters escaped)."""
        return f"{glob_escape(self.namespace)}:*"

    def _patterns(self, view: bool) -> str:
        ns = re.escape(self.namespace)
        scope = r"scope:\{[^:{}]+\}"
        if view:
            return (
                rf"{ns}:{scope}(:top|:review|:revisions|:{_SCOPE_READ_MODELS})?|{ns}:group:\{{[^:{{}}]+\}}:patterns"
                rf"|{ns}:\{{{ns}\}}:(scopes|scopes:at|scopes:by:[a-z_]+|layout|follow-position|review-queue:items|decision-request:[0-9a-f]{{64}}|{_GLOBAL_READ_MODELS})"
                rf"|{ns}:({LEGACY_KEYS})"
            )
        return (
            rf"{ns}:{scope}:{_SCOPE_READ_MODELS}|{ns}:\{{{ns}\}}:(review-queue:items|{_GLOBAL_READ_MODELS})"
            rf"|{ns}:({LEGACY_READ_MODEL_KEYS})"
        )

    def layout_pattern(self) -> re.Pattern:
        """Full match of every key of this layout in the namespace (view and
        read models), and of layout 1's: what ``clear`` deletes, never
        another namespace's keys."""
        return re.compile(self._patterns(view=True))

    def read_model_pattern(self) -> re.Pattern:
        """Full match of every read-model key of the namespace (not the
        view's own keys, nor the scope index), layout 1's included."""
        return re.compile(self._patterns(view=False))

    def read_model_kind(self, key: str) -> str | None:
        """What a key of the namespace holds, for ``ReadModels.memory``:
        ``history`` (the three per-revision keys), ``trend`` (a trend or its
        total), ``review_queue`` (every review-queue key, the review
        state and status and the repair counts) or ``applied`` (the
        ``follow-applied`` offsets and the scopes' ``applied``); None for a
        key that is not a read model of this namespace."""
        if not self.read_model_pattern().fullmatch(key):
            return None
        rest = key[len(self.namespace) + 1 :]
        if rest.startswith("scope:"):
            name = rest.split("}", 1)[1].split(":")[1] if "}" in rest else rest.split(":")[2]
        else:
            name = rest.split("}", 1)[1].lstrip(":").split(":")[0] if rest.startswith("{") else rest.split(":")[0]
        if name in ("history", "history-meta", "avoided"):
            return "history"
        if name in ("trend", "trend-meta", "trend-totals"):
            return "trend"
        return "review_queue" if name in ("review-queue", "review-status", "review-repairs", "review-state") else "applied"
