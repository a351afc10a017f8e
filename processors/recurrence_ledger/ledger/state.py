"""Ledger state behind a small mapping interface (contract §3, §5–§8).

The source of truth is a ``MutableMapping[tuple, JSON value]`` — a plain dict
in the embedded runner, a changelog-backed partition store in the worker — so
every write must be an explicit ``store[key] = value`` (a changelog store only
records a change on ``__setitem__``/``__delitem__``). Keys are tuples of str
and int, e.g. ``("outcome", scope_id, source_id)``; values are JSON-compatible:
dicts, lists, str, int, None.

State is proportional to live entities: one small record per source event
identity (for duplicate and conflict detection, contract §3), the holders of
journal positions by ranges (``STATE_FORMAT``), one per
RecurrenceMatch decision (replay rule, §6), per revision with verdicts its
counts and the compact positions of its terminal verdicts, grouped in runs
(streak and review, §8, ``streaks.py``), the held content of pending outcomes only while they are pending
(§5), and per-scope indexes (current heads, recall cues). Raw events are never
kept once decided. A reference to an event not seen yet keeps the referring
event's position until it arrives (``forward_wait``, contract §16,
``causal.py``).

Derived in-memory caches (the scope_heads index and the streak ranking) are
rebuilt from the store on demand; the worker calls
:meth:`LedgerState.invalidate_caches` on every rebalance.
"""

from __future__ import annotations

import hashlib
import sys
import unicodedata
from collections.abc import Callable, MutableMapping
from fractions import Fraction
from typing import Any

from sortedcontainers import SortedList

from recurrence_ledger.errors import RecurrenceLedgerError

Key = tuple
Store = MutableMapping[Key, Any]

_SEP = "\x1f"  # ids are validated free of control characters (recurrence_ledger.ledger.models.Id)


def ref_key(ref: dict) -> str:
    """Compact key of an ArtifactRef dict: ``artifact_id<US>revision``."""
    return f"{ref['artifact_id']}{_SEP}{ref['revision']}"


def experience_ref(artifact_id: str, revision: int) -> dict:
    """ArtifactRef dict of an Experience revision."""
    return {"family": "experience", "artifact_id": artifact_id, "revision": revision}


def ref_order(ref: dict) -> tuple[str, str, int]:
    """ArtifactRef total order (contract §2)."""
    return (ref["family"], ref["artifact_id"], ref["revision"])


#: Store key of the Unicode version the state was built with (contract §10
#: rev. 2): normalize() keys depend on the runtime's Unicode database.
UNICODE_VERSION_KEY: Key = ("deployment", "unicode_version")


class UnicodeVersionChanged(Exception):
    """The state was built on another Unicode version than this runtime's
    (contract §10): refuse to start unless the operator accepts the change."""

    def __init__(self, recorded: str, runtime: str, where: str = "this deployment's state"):
        super().__init__(
            f"{where} was built with Unicode {recorded}, but this runtime has Unicode {runtime} "
            f"(Python {_python_version()}): normalize() may give other keys for characters that changed between "
            f"the two. Run on a Python with Unicode {recorded}, rebuild the state (docs/upgrading.md), or start "
            f"with --accept-unicode-change to accept the change and record Unicode {runtime}."
        )
        self.recorded, self.runtime = recorded, runtime


def _python_version() -> str:
    return ".".join(map(str, sys.version_info[:3]))


def pin_unicode_version(store: Store, accept_change: bool = False, runtime: str = unicodedata.unidata_version) -> str | None:
    """Check the Unicode version recorded in ``store`` against the
    ``runtime``'s and record it (contract §10 rev. 2). A store with none
    (new, or built before the pin existed) records the runtime's; a
    different one raises :class:`UnicodeVersionChanged` naming both, unless
    ``accept_change``, which records the runtime's instead. Returns the
    version recorded before (None if none); writes only on a change, so a
    changelog store records it once."""
    return _pin(store, UNICODE_VERSION_KEY, runtime, accept_change, UnicodeVersionChanged)


def _pin(store: Store, key: Key, current: Any, accept_change: bool, changed: Callable[[Any, Any], Exception]) -> Any:
    """The rule of a deployment's pins: ``store[key]`` is ``current`` when
    it holds nothing yet or the same; another value raises
    ``changed(recorded, current)`` unless ``accept_change``, which records
    ``current``. Returns the value recorded before (None if none); writes
    only on a change."""
    recorded = store.get(key)
    if recorded == current:
        return recorded
    if recorded is not None and not accept_change:
        raise changed(recorded, current)
    store[key] = current
    return recorded


#: Store key of the holdout policy a partition's state was built with
#: (:func:`pin_holdout_policy`).
HOLDOUT_POLICY_KEY: Key = ("deployment", "holdout_policy")


def holdout_policy(salt: str | None, rate: Fraction | None) -> dict:
    """What a partition's state records of the holdout policy (contract
    §21.5; a deployment's ``holdout_salt`` and ``holdout_rate``):
    ``{"rate": "1/4", "salt_sha256": the first 16 hex digits of sha256 of
    the salt}``, both None without the policy. Not the salt: the changelog
    is read by more people than the deployment's settings."""
    if salt is None or rate is None:
        return {"rate": None, "salt_sha256": None}
    return {"rate": str(rate), "salt_sha256": hashlib.sha256(salt.encode("utf-8", "surrogatepass")).hexdigest()[:16]}


def describe_holdout_policy(recorded: dict) -> str:
    """One phrase for a :func:`holdout_policy` record."""
    if recorded.get("rate") is None:
        return "no holdout policy"
    return f"holdout rate {recorded['rate']} with a salt whose sha256 begins {recorded['salt_sha256']}"


class HoldoutPolicyChanged(RecurrenceLedgerError):
    """The state was built under another holdout policy (§21.5) than this
    worker's: refuse to start unless the operator accepts the change."""

    def __init__(self, recorded: dict, configured: dict, where: str = "this deployment's state"):
        super().__init__(
            f"{where} was built with {describe_holdout_policy(recorded)}, but this worker has {describe_holdout_policy(configured)}: "
            "outcomes before and after would be assigned to the arms differently (contract §21.5), so no effect would measure one policy. "
            "Start with the recorded holdout salt and rate, start a new deployment for a clean measurement, or start with "
            "--accept-holdout-change to accept the change and record the new policy."
        )
        self.recorded, self.configured = recorded, configured


def pin_holdout_policy(store: Store, configured: dict, accept_change: bool = False) -> dict | None:
    """Check the holdout policy recorded in a partition's ``store`` against
    ``configured`` (:func:`holdout_policy`) and record it (as
    :func:`pin_unicode_version` does the Unicode version): a store without
    one (new, or built before the pin existed) records ``configured``; a
    different one raises :class:`HoldoutPolicyChanged`, unless
    ``accept_change``, which records ``configured``. Returns the record
    before (None if none); writes only on a change."""
    return _pin(store, HOLDOUT_POLICY_KEY, configured, accept_change, HoldoutPolicyChanged)


#: Store key of the state layout's format (docs/upgrading.md, "State format
#: 3"); a store without one was written before formats were recorded
#: (format 1) — or is new.
STATE_FORMAT_KEY: Key = ("deployment", "state_format")
#: Store key of the mark that a store written in format 1 keeps its
#: per-position records in force (``LedgerState.legacy_positions``): set
#: when such a store first gets a format record.
LEGACY_POSITIONS_KEY: Key = ("deployment", "legacy_positions")
#: The layout this code writes. 3: the lists that grow with a revision's
#: history — an artifact's review candidate ids, a revision's avoided
#: positions and its run names with a candidate — are kept in chunks
#: (``ledger.chunks``), so adding an entry rewrites one chunk, not the list
#: (a list of format 2 becomes chunks when it next grows). 2: the holders of a
#: scope's journal positions (contract §3 ``position_conflict``) are kept
#: by ranges of ``POSITION_BUCKET`` positions: the scope's highest range in
#: its scope record (written on every event anyway), the others one record
#: per range, ``("positions", scope_id, position // POSITION_BUCKET)`` →
#: ``{str(position): holder}`` (``LedgerState.claim_position``) — so an
#: event no longer writes a record of its own for its position; and the
#: streak ranking is the scope record's ``ranked`` (``set_streak_rank``),
#: not a ``("ranked", scope_id)`` record. 1: one
#: ``("position", scope_id, position)`` → holder record per position (still
#: read, see ``LedgerState.legacy_positions``).
STATE_FORMAT = 3
#: Journal positions per position record (state format 2).
POSITION_BUCKET = 64


class StateFormatError(RecurrenceLedgerError):
    """The state was written by a newer version of recurrence-ledger, in a
    layout this version does not know: run the newer version, or rebuild
    the state (docs/upgrading.md)."""

    def __init__(self, recorded: object):
        super().__init__(
            f"the state has format {recorded!r}, but this version of recurrence-ledger reads formats 1 to {STATE_FORMAT}: "
            f"run the version that wrote it, or rebuild the state with a new --app-id (docs/upgrading.md, \"State format 3\")"
        )
        self.recorded = recorded


def new_scope_record() -> dict:
    """Counters and watermarks of one scope (contract §8 statistics inputs)."""
    return {
        "as_of_position": None,
        "selected": 0,
        "recurred": 0,
        "avoided": 0,
        "linked_verdicts": 0,  # terminal verdicts on linked outcomes; unknown = selected - this
        "unlinked_handoff_citations": 0,
        "needing_review": 0,
        "pending_outcomes": 0,
        "late_revisions": 0,
        "linked_recurred": 0,  # recurred verdicts on linked outcomes (repeat_failure_rate)
        "stale_revision_selections": 0,
        "by_repair_surface": {},  # surface -> {selected, recurred, avoided}
        "max_experience_position": -1,
        "max_unlinked_position": -1,
        # revision 3 (a record written before has none of them: read with .get)
        "forward_references": 0,  # contract §16
        "unknown_reasons": {},  # contract §17: reason -> unknown selections
        "ambiguous_matches": 0,
        "unmatched_failures": 0,
        "binding_suspects": 0,
        "reviews": {},  # contract §18: review candidates by ReviewStatus status
        "repairs": {},  # and the fix revisions by repair status (ledger.reviews)
    }


#: Resolved Handoff chains kept in memory (``LedgerState.cache_chain``).
CHAIN_CACHE_SIZE = 100_000


class LedgerState:
    """Typed access to the store plus derived caches.

    ``store`` may be any MutableMapping with tuple keys; the embedded runner
    passes a dict, the worker its partition store. Nothing here performs I/O.
    """

    def __init__(self, store: Store | None = None) -> None:
        self.store: Store = {} if store is None else store
        self._heads_index: dict[str, Any] = {}
        self._rankings: dict[str, SortedList] = {}
        self._top: dict[str, tuple[int, list[dict], set[tuple[str, int]]]] = {}
        self._figures: dict[tuple[str, str, int], dict] = {}
        self._chains: dict[tuple[str, str, int], Any] = {}
        self._full_runs: dict[tuple[str, str, int], tuple[int, list]] = {}
        self._candidate_revisions: dict[tuple[str, str], dict[int, list[str]]] = {}
        self._legacy_positions: bool | None = None

    # -- state format ---------------------------------------------------------
    def legacy_positions(self) -> bool:
        """Whether the store may hold format-1 position records (one per
        position) to read besides the format-2 buckets. Decided on first use
        after construction or :meth:`invalidate_caches` — so in the worker
        after the partition's restore — and the store's format record set
        to ``STATE_FORMAT`` then (its later layouts read the earlier ones):
        an empty store (the Unicode pin aside) is new; a store without a
        format record but with other records was written before formats
        were recorded (format 1: its old position records stay in force,
        read as a fallback, and ``LEGACY_POSITIONS_KEY`` says so from now
        on; new positions go to buckets); a store of format 2 or 3 has
        none unless so marked. Raises :class:`StateFormatError` for a
        format newer than this code's — before anything is written."""
        legacy = self._legacy_positions
        if legacy is None:
            store = self.store
            recorded = store.get(STATE_FORMAT_KEY)
            if recorded is None:
                legacy = any(key != UNICODE_VERSION_KEY for key in store)
                if legacy:
                    store[LEGACY_POSITIONS_KEY] = True
            elif isinstance(recorded, int) and 2 <= recorded <= STATE_FORMAT:
                legacy = store.get(LEGACY_POSITIONS_KEY) is True
            else:
                raise StateFormatError(recorded)
            if recorded != STATE_FORMAT:
                store[STATE_FORMAT_KEY] = STATE_FORMAT
            self._legacy_positions = legacy
        return legacy

    def position_holder(self, scope: dict, scope_id: str, position: int) -> str | None:
        """Who holds journal position ``position`` of the scope whose record
        is ``scope`` (contract §3: the identity, as "kind id…"), or None
        when it is free."""
        number = position // POSITION_BUCKET
        open_bucket = scope.get("positions")
        if open_bucket is not None and open_bucket[0] == number:
            holder = open_bucket[1].get(str(position))
        else:
            bucket = self.store.get(("positions", scope_id, number))
            holder = None if bucket is None else bucket.get(str(position))
        if holder is None and self.legacy_positions():
            holder = self.store.get(("position", scope_id, position))
        return holder

    def claim_position(self, scope: dict, scope_id: str, position: int, holder: str) -> None:
        """Record ``holder`` as the holder of a free journal position. The
        scope's highest range of positions is kept open in its scope record
        (``positions``: ``[range number, {str(position): holder}]``, which
        the caller writes, as it does for every event), and moves to its own
        ``("positions", scope_id, number)`` record when a position of a
        higher range arrives; a position of a lower range goes to that
        range's record (state format 2)."""
        number = position // POSITION_BUCKET
        open_bucket = scope.get("positions")
        if open_bucket is None or open_bucket[0] < number:
            if open_bucket is not None:
                key = ("positions", scope_id, open_bucket[0])
                closed = self.store.get(key)
                self.store[key] = open_bucket[1] if closed is None else {**closed, **open_bucket[1]}
            scope["positions"] = [number, {str(position): holder}]
        elif open_bucket[0] == number:
            open_bucket[1][str(position)] = holder
        else:
            key = ("positions", scope_id, number)
            bucket = self.store.get(key)
            if bucket is None:
                bucket = {}
            bucket[str(position)] = holder
            self.store[key] = bucket

    # -- caches ---------------------------------------------------------
    def invalidate_caches(self) -> None:
        """Drop derived caches (call after the store changed underneath,
        e.g. a rebalance recovered or revoked partitions)."""
        self._heads_index.clear()
        self._rankings.clear()
        self._top.clear()
        self._figures.clear()
        self._chains.clear()
        self._full_runs.clear()
        self._candidate_revisions.clear()
        self._legacy_positions = None

    def cached_heads_index(self, scope_id: str) -> Any:
        """The scope's cached ``matching.HeadsIndex`` (its current
        failure-bearing heads), or None when not built yet."""
        return self._heads_index.get(scope_id)

    def cache_heads_index(self, scope_id: str, index: Any) -> None:
        """Remember the scope's HeadsIndex; the processor keeps it in step
        with the ``heads`` record (``matching.head_changed``)."""
        self._heads_index[scope_id] = index

    def cached_chain(self, scope_id: str, handoff_id: str, revision: int) -> Any:
        """The ``chain.CitedChain`` of a Handoff revision, or None when not
        resolved yet (or dropped)."""
        return self._chains.get((scope_id, handoff_id, revision))

    def cache_chain(self, scope_id: str, handoff_id: str, revision: int, chain: Any) -> None:
        """Remember a Handoff revision's resolved chain. At most
        ``CHAIN_CACHE_SIZE`` are kept: when full, the cache starts over
        (every entry can be resolved again from the store)."""
        if len(self._chains) >= CHAIN_CACHE_SIZE:
            self._chains.clear()
        self._chains[(scope_id, handoff_id, revision)] = chain

    def ranking(self, scope_id: str) -> SortedList:
        """Revisions with streak ≥ 1 of a scope, in top_revisions order
        (contract §8): entries ``(-streak, family, artifact_id, revision,
        signature_key)``. Built on first use from the scope record's
        ``ranked`` (state format 2), or from the ``("ranked", scope_id)``
        record a state written before keeps until the ranking next changes
        (:meth:`set_streak_rank`)."""
        ranking = self._rankings.get(scope_id)
        if ranking is None:
            scope = self.store.get(("scope", scope_id))
            ranked = None if scope is None else scope.get("ranked")
            if ranked is None:
                ranked = self.store.get(("ranked", scope_id), {})
            ranking = SortedList(
                (-entry[0], "experience", entry[1], entry[2], entry[3]) for entry in ranked.values()
            )
            self._rankings[scope_id] = ranking
        return ranking

    def cached_top(self, scope_id: str, limit: int) -> list[dict] | None:
        """The cached top_revisions rows of a scope for ``limit``, if any."""
        cached = self._top.get(scope_id)
        return cached[1] if cached is not None and cached[0] == limit else None

    def cache_top(self, scope_id: str, limit: int, rows: list[dict]) -> None:
        """Remember a scope's top_revisions rows until :meth:`forget_top`."""
        keys = {(row["artifact_ref"]["artifact_id"], row["artifact_ref"]["revision"]) for row in rows}
        self._top[scope_id] = (limit, rows, keys)

    def forget_top(self, scope_id: str, ref: dict | None = None) -> None:
        """The ranking of a scope changed (``ref`` None), or the counts of
        revision ``ref``: drop its cached figures, and the cached top rows
        only when it is one of them."""
        if ref is None:
            self._top.pop(scope_id, None)
            return
        key = (ref["artifact_id"], ref["revision"])
        self._figures.pop((scope_id, *key), None)
        cached = self._top.get(scope_id)
        if cached is not None and key in cached[2]:
            del self._top[scope_id]

    def cached_figures(self, scope_id: str, artifact_id: str, revision: int) -> dict | None:
        """A revision's cached yield figures (statistics.revision_figures)."""
        return self._figures.get((scope_id, artifact_id, revision))

    def cache_figures(self, scope_id: str, artifact_id: str, revision: int, figures: dict) -> None:
        """Remember a revision's figures until :meth:`forget_top` names it."""
        self._figures[(scope_id, artifact_id, revision)] = figures

    def cached_full_run_starts(self, parts: tuple[str, str, int], threshold: int) -> list | None:
        """The cached names of the runs of revision ``parts`` (scope_id,
        artifact_id, revision) holding ≥ ``threshold`` recurred verdicts
        (``streaks.full_run_starts``), or None when not read yet for that
        threshold. The caller keeps the list in step with the runs."""
        cached = self._full_runs.get(parts)
        return cached[1] if cached is not None and cached[0] == threshold else None

    def cache_full_run_starts(self, parts: tuple[str, str, int], threshold: int, starts: list) -> None:
        """Remember a revision's run names at ``threshold`` (one threshold per
        revision: another replaces it)."""
        self._full_runs[parts] = (threshold, starts)

    def forget_full_run_starts(self, parts: tuple[str, str, int]) -> None:
        """A revision's runs were rewritten other than by a verdict: read
        them again when next needed."""
        self._full_runs.pop(parts, None)

    def cached_candidate_revisions(self, scope_id: str, artifact_id: str) -> dict[int, list[str]] | None:
        """The cached candidate ids of an artifact by revision
        (``reviews.candidates_by_revision``), or None when not read yet."""
        return self._candidate_revisions.get((scope_id, artifact_id))

    def cache_candidate_revisions(self, scope_id: str, artifact_id: str, known: dict[int, list[str]]) -> None:
        """Remember an artifact's candidate ids by revision; the caller adds each new candidate."""
        self._candidate_revisions[(scope_id, artifact_id)] = known

    def set_streak_rank(self, scope: dict, scope_id: str, ref: dict, signature_key: str, old: int, new: int) -> None:
        """Move one revision in the ranking from streak ``old`` to ``new``.
        The ranking's entries are kept in the scope record ``scope``
        (``ranked``: ref_key → [streak, artifact_id, revision,
        signature_key]), which the caller writes, as it does on every
        event; a ``("ranked", scope_id)`` record written before moves into
        it here (and is deleted), so the ranking costs no record of its
        own per transaction."""
        if old == new:
            return
        self.forget_top(scope_id)
        ranking = self.ranking(scope_id)
        ranked = scope.get("ranked")
        if ranked is None:
            ranked = scope["ranked"] = self.store.get(("ranked", scope_id)) or {}
            self.delete("ranked", scope_id)
        rk = ref_key(ref)
        if old > 0:
            ranking.remove((-old, "experience", ref["artifact_id"], ref["revision"], signature_key))
            ranked.pop(rk, None)
        if new > 0:
            ranking.add((-new, "experience", ref["artifact_id"], ref["revision"], signature_key))
            ranked[rk] = [new, ref["artifact_id"], ref["revision"], signature_key]

    # -- records --------------------------------------------------------
    def get(self, *parts: object, default: Any = None) -> Any:
        """Record at key ``parts`` or ``default``."""
        return self.store.get(parts, default)

    def put(self, value: Any, *parts: object) -> None:
        """Write a record (always explicit, see module docstring)."""
        self.store[parts] = value

    def delete(self, *parts: object) -> None:
        """Delete a record if present."""
        if parts in self.store:
            del self.store[parts]

    def scope(self, scope_id: str) -> dict:
        """The scope record (a fresh one for a new scope; not yet written)."""
        return self.store.get(("scope", scope_id)) or new_scope_record()

    def put_scope(self, scope_id: str, record: dict) -> None:
        """Write the scope record."""
        self.store[("scope", scope_id)] = record

    def append(self, value: Any, *parts: object) -> None:
        """Append ``value`` to the list record at key ``parts``."""
        items = self.store.get(parts) or []
        items.append(value)
        self.store[parts] = items

    def put_nonempty(self, items: list | dict, *parts: object) -> None:
        """Write the list or dict record at key ``parts``, or delete it when
        ``items`` is empty (an empty one is never stored)."""
        if items:
            self.store[parts] = items
        else:
            self.delete(*parts)

    def remove_entries(self, value: object, *parts: object, at: int | None = None) -> None:
        """Remove from the list record at key ``parts`` every entry equal to
        ``value`` (or, with ``at``, whose item ``at`` is): a waiting index
        or a wait list losing one member. An empty list is deleted."""
        items = self.store.get(parts) or []
        self.put_nonempty([entry for entry in items if (entry if at is None else entry[at]) != value], *parts)

    def pop_list(self, *parts: object) -> list:
        """Remove and return the list record at key ``parts`` (or [])."""
        return self.store.pop(parts, None) or []
