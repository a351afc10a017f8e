"""The Lua scripts of the read side, and running them.

Each script is a file of ``recurrence_ledger/read/lua/`` (package data),
read once per process with ``importlib.resources`` and registered once per
redis-py client (``register_script``: redis-py sends EVALSHA and loads the
script when Redis lacks it). The scripts never name a key themselves: they
get every key from Python, built by ``recurrence_ledger.read.keys.Keys``, as
KEYS or inside ARGV (what each script takes is in its file's head comment
and in the keys module).

| script | what it does |
| --- | --- |
| ``guarded_write`` | one scope of the view, never replacing a newer row (``FollowerView``) |
| ``index_scope`` | one scope in the scope set and index, never with an older record (after the scope's keys) |
| ``apply_patterns`` | one pattern group's signature patterns (contract §23.3), never replacing one with a pattern of fewer recurred verdicts (``recurrence_ledger.read.patterns``) |
| ``scope_page`` | one filtered page of the scope index, read-only |
| ``apply_once`` | not a script: the head of the six below (each record applied once, by the partition's offset in the ``applied`` hash the script gets) |
| ``review_place`` | not a script: the second head of the four review scripts (where a candidate is filed by its status) |
| ``apply_observations`` | RecurrenceObservations of one partition and scope into the history (an avoided verdict ends the runs of review candidates) |
| ``apply_scope_candidates`` | ReviewCandidates of one partition and scope into the scope's review queue and history meta |
| ``apply_candidates`` | ReviewCandidates of one partition into the review queue of every scope |
| ``apply_scope_review_status`` | ReviewStatus records of one partition and scope (contract §18) into the scope's review queue |
| ``apply_review_status`` | ReviewStatus records of one partition into the review queue of every scope, the statuses and repair counts |
| ``apply_trend`` | ScopeStatistics records of one partition and scope as trend points |
| ``record_position`` | a view follower's positions after a batch, unless Redis lost them since it checked (``recurrence_ledger.read.positions``) |

Every script starts with ``#!lua`` (Redis ≥ 7; ``flags=no-writes`` for
the read-only ``scope_page``): Redis then refuses a script that touches a
key of another slot than its KEYS, on a single Redis in cluster mode as on
Redis Cluster, so no call can span slots unnoticed.

:func:`run_calls` runs many script calls in one round trip: on a single
Redis in one MULTI/EXEC, on Redis Cluster (where EVALSHA cannot be
pipelined through redis-py's script objects, nor a transaction span slots)
as a pipeline of EVALSHA commands per primary, each call atomic by itself,
slot by slot through an online reshard (:func:`run_cluster_calls`).
"""

from __future__ import annotations

import functools
import logging
import time
from dataclasses import dataclass, fields
from importlib import resources

import redis
from redis.commands.core import Script

from recurrence_ledger.read.connect import is_cluster

log = logging.getLogger(__name__)

#: The attribute of a redis-py client that holds its registered scripts.
_REGISTERED = "_recurrence_ledger_scripts"
#: The attribute of a Redis Cluster client set once its scripts are loaded on every primary.
_LOADED = "_recurrence_ledger_scripts_loaded"


#: The scripts that start with ``lua/apply_once.lua`` (exactly-once
#: application of one partition's records, shared by them).
APPLY_SCRIPTS = (
    "apply_observations", "apply_candidates", "apply_scope_candidates", "apply_review_status", "apply_scope_review_status", "apply_trend",
)
#: The scripts that also start with ``lua/review_place.lua`` (after ``apply_once``).
REVIEW_SCRIPTS = ("apply_candidates", "apply_scope_candidates", "apply_review_status", "apply_scope_review_status")
#: The read-only scripts (``#!lua flags=no-writes``: EVALSHA_RO runs them).
READ_ONLY_SCRIPTS = ("scope_page",)


@functools.cache
def source(name: str) -> str:
    """The text of the script ``name``: the shebang (``#!lua``, with
    ``flags=no-writes`` for the :data:`READ_ONLY_SCRIPTS`), then
    ``lua/{name}.lua``, after ``lua/apply_once.lua`` for the
    :data:`APPLY_SCRIPTS` and ``lua/review_place.lua`` for the
    :data:`REVIEW_SCRIPTS`. Raises FileNotFoundError for a name that is not
    one of the package's scripts."""
    def read(file: str) -> str:
        return resources.files(__package__).joinpath("lua", f"{file}.lua").read_text(encoding="utf-8")

    shebang = "#!lua flags=no-writes\n" if name in READ_ONLY_SCRIPTS else "#!lua\n"
    return shebang + (read("apply_once") if name in APPLY_SCRIPTS else "") + (read("review_place") if name in REVIEW_SCRIPTS else "") + read(name)


@dataclass(frozen=True)
class Scripts:
    """The read side's scripts registered on one client (the table in the
    module docstring); call one as redis-py's ``Script`` is called
    (``keys=``, ``args=``, ``client=`` a pipeline)."""

    guarded_write: Script
    index_scope: Script
    scope_page: Script
    apply_observations: Script
    apply_candidates: Script
    apply_scope_candidates: Script
    apply_review_status: Script
    apply_scope_review_status: Script
    apply_trend: Script
    apply_patterns: Script
    record_position: Script


def scripts(client: redis.Redis) -> Scripts:
    """The :class:`Scripts` of ``client``: registered on the first call and
    kept on the client, so that every owner sharing one client (the view and
    the read models of a follower, the API's routers) shares one
    registration. Never connects."""
    registered = vars(client).get(_REGISTERED)
    if registered is None:
        registered = Scripts(**{item.name: client.register_script(source(item.name)) for item in fields(Scripts)})
        setattr(client, _REGISTERED, registered)
    return registered


#: One script call of :func:`run_calls`: the script, its KEYS, its ARGV.
Call = tuple[Script, list[str], list]


def run_calls(client, calls: list[Call]) -> list:
    """Run ``calls`` in one round trip and return their replies in order.
    On a single Redis: one MULTI/EXEC (all or nothing; redis-py loads the
    scripts Redis lacks first). On Redis Cluster
    (``recurrence_ledger.read.connect.is_cluster``): :func:`run_cluster_calls`
    — each call atomic by itself, not the whole; callers make every call
    safe to run twice (the ``applied`` offsets, the guards). Raises redis
    errors."""
    if not calls:
        return []
    if not is_cluster(client):
        pipe = client.pipeline(transaction=True)
        for script, keys, args in calls:
            script(keys=keys, args=args, client=pipe)
        return pipe.execute()
    return run_cluster_calls(client, calls)


def run_call(client, script: Script, keys: list[str], args: list):
    """Run one script call and return its reply: on Redis Cluster through
    :func:`run_cluster_calls` (a slot being migrated waits for its
    migration to end), else as redis-py's ``Script`` runs it. Raises redis
    errors."""
    if is_cluster(client):
        return run_cluster_calls(client, [(script, keys, args)])[0]
    return script(keys=keys, args=args)


#: Seconds a call may wait for its slot's migration (an online reshard) to end before run_cluster_calls gives up.
SLOT_MIGRATION_WAIT_S = 120.0
#: The replies of a slot's owner that mean "not here, not now": the slot moved (MOVED: the slot map is refreshed), is
#: being migrated (ASK, TRYAGAIN: the call waits for the migration to end), or the cluster is reconfiguring (CLUSTERDOWN).
SLOT_ERRORS = (redis.exceptions.MovedError, redis.exceptions.AskError, redis.exceptions.TryAgainError, redis.exceptions.ClusterDownError)


def run_cluster_calls(client, calls: list[Call], wait_s: float = SLOT_MIGRATION_WAIT_S) -> list:
    """Run ``calls`` on Redis Cluster, slot by slot: each call is sent to
    its slot's primary (one pipeline of EVALSHA per primary, the scripts
    loaded on every primary once per client and again on a primary that
    lacks one) and never follows a redirection itself. A call whose slot
    moved (MOVED) runs again on the new owner once the slot map is
    refreshed; a call whose slot is being migrated (ASK, TRYAGAIN — an
    online reshard) waits until the migration ends and runs on the slot's
    new owner, because a script run on the importing node while the slot's
    keys are split between two nodes would write beside keys not moved yet
    (the scripts get some of their keys inside ARGV, which Redis cannot
    redirect), and the migration would then overwrite it. The calls of
    every other slot run at once, and a slot's later calls wait behind its
    first waiting one (its calls keep their order). Raises
    ClusterError when a slot is still migrating after ``wait_s`` seconds,
    and the other redis errors of a call."""
    results: list = [None] * len(calls)
    pending = list(range(len(calls)))
    slots = [client.keyslot(keys[0]) for _, keys, _ in calls]
    deadline = time.monotonic() + wait_s
    backoff, told = 0.02, False
    while pending:
        if not vars(client).get(_LOADED):
            for item in fields(Scripts):
                client.script_load(getattr(scripts(client), item.name).script)
            setattr(client, _LOADED, True)
        by_node: dict[str, tuple[object, list[int]]] = {}
        for index in pending:
            node = client.nodes_manager.get_node_from_slot(slots[index])
            by_node.setdefault(node.name, (node, []))[1].append(index)
        waiting: list[int] = []
        moved = False
        for node, indexes in by_node.values():
            pipe = client.get_redis_connection(node).pipeline(transaction=False)
            for index in indexes:
                script, keys, args = calls[index]
                pipe.execute_command("EVALSHA", script.sha, len(keys), *keys, *args)
            replies = pipe.execute(raise_on_error=False)
            blocked: set[int] = set()  # slots with a call waiting: their later calls wait too
            for index, reply in zip(indexes, replies):
                if slots[index] in blocked:
                    waiting.append(index)
                elif isinstance(reply, redis.exceptions.NoScriptError):
                    setattr(client, _LOADED, False)  # a primary without the scripts (restarted, new): load them everywhere
                    blocked.add(slots[index])
                    waiting.append(index)
                elif isinstance(reply, SLOT_ERRORS):
                    moved |= isinstance(reply, redis.exceptions.MovedError)
                    blocked.add(slots[index])
                    waiting.append(index)
                elif isinstance(reply, Exception):
                    raise reply
                else:
                    results[index] = reply
        pending = sorted(waiting)
        if pending:
            if time.monotonic() > deadline:
                raise redis.exceptions.ClusterError(
                    f"slot {slots[pending[0]]} of Redis Cluster is still being migrated after {wait_s:.0f} s: {len(pending)} script calls not run")
            if moved:
                client.nodes_manager.initialize()  # the slot map changed: read it again
            else:
                if not told:
                    told = True
                    log.info("Redis Cluster slot(s) %s being migrated: %d script call(s) wait for it, the other slots are applied",
                             sorted({slots[index] for index in pending}), len(pending))
                time.sleep(backoff)
                backoff = min(backoff * 2, 0.5)
                client.nodes_manager.initialize()  # a migration ends with the slot owned by its target
    return results


def run_read_only(client: redis.Redis, script: Script, keys: list[str], args: list) -> list:
    """Run a read-only script with EVALSHA_RO (Redis ≥ 7), loading it first
    when Redis lacks it: a reader whose ACL grants read-only key access
    (``%R~``) may run it, where EVALSHA counts as a write. Raises redis
    errors."""
    try:
        return client.evalsha_ro(script.sha, len(keys), *keys, *args)
    except redis.exceptions.NoScriptError:
        client.script_load(script.script)
        return client.evalsha_ro(script.sha, len(keys), *keys, *args)
