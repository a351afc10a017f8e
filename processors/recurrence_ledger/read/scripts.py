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
| ``scope_page`` | one filtered page of the scope index, read-only |
| ``apply_once`` | not a script: the head of the four below (each record applied once, by the partition's ``follow-applied`` offset) |
| ``review_place`` | not a script: the second head of the two review scripts (where a candidate is filed by its status) |
| ``apply_observations`` | RecurrenceObservations of one partition into the history (an avoided verdict ends the runs of review candidates) |
| ``apply_candidates`` | ReviewCandidates of one partition into the review queue |
| ``apply_review_status`` | ReviewStatus records of one partition (contract §18) into the review queue |
| ``apply_trend`` | ScopeStatistics records of one partition as trend points |
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, fields
from importlib import resources

import redis
from redis.commands.core import Script

#: The attribute of a redis-py client that holds its registered scripts.
_REGISTERED = "_recurrence_ledger_scripts"


#: The scripts that start with ``lua/apply_once.lua`` (exactly-once
#: application of one partition's records, shared by them).
APPLY_SCRIPTS = ("apply_observations", "apply_candidates", "apply_review_status", "apply_trend")
#: The scripts that also start with ``lua/review_place.lua`` (after ``apply_once``).
REVIEW_SCRIPTS = ("apply_candidates", "apply_review_status")


@functools.cache
def source(name: str) -> str:
    """The text of the script ``name``: ``lua/{name}.lua``, after
    ``lua/apply_once.lua`` for the :data:`APPLY_SCRIPTS` and
    ``lua/review_place.lua`` for the :data:`REVIEW_SCRIPTS`. Raises
    FileNotFoundError for a name that is not one of the package's scripts."""
    def read(file: str) -> str:
        return resources.files(__package__).joinpath("lua", f"{file}.lua").read_text(encoding="utf-8")

    return (read("apply_once") if name in APPLY_SCRIPTS else "") + (read("review_place") if name in REVIEW_SCRIPTS else "") + read(name)


@dataclass(frozen=True)
class Scripts:
    """The read side's scripts registered on one client (the table in the
    module docstring); call one as redis-py's ``Script`` is called
    (``keys=``, ``args=``, ``client=`` a pipeline)."""

    guarded_write: Script
    scope_page: Script
    apply_observations: Script
    apply_candidates: Script
    apply_review_status: Script
    apply_trend: Script


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
