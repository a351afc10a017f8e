"""Helpers for the history tests: a journal built for a revision timeline,
running the view follower as a process, and snapshots of Redis keys.

The timeline journal (scope ``timeline-demo``, revision T1 r1, review
threshold 3, every outcome linked through one receipt unless said
otherwise): recurred at 4 (linked), 5 (unlinked), 6 (linked) — the run at the
start of the history reaches the threshold, a ReviewCandidate is published
—; avoided at 7 (opens run 7, which closes that candidate); an unknown
selection at 8 (declared check); recurred at 9 (unlinked), 10 (linked), 11
(unlinked) — run 7 reaches the threshold, its candidate stays in the review
queue. A second revision U1 r1 (working_state) recurs once at 12.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import redis

from tests.e2e.harness import REPO
from tests.plugins.processes import cli_command, cli_env
from tests.journal import check, claim, experience, handoff, outcome, receipt, write_journal

SCOPE = "timeline-demo"
CUE = "artifact cache poisoned by a partial upload"
CONDITION = "purged the partial artifact before the retry"
SUBJECT = "artifact checksum matches the manifest"


def timeline_records() -> list[dict]:
    """The journal records described in the module docstring."""
    def recur(position: int, name: str, linked: bool) -> dict:
        return outcome(SCOPE, position, name, "failed", "R1" if linked else None, checks=[check(CUE)])

    return [
        experience(SCOPE, 1, "T1", cue=CUE, condition=CONDITION, subject=SUBJECT),
        handoff(SCOPE, 2, "H1", [("T1", 1)]),
        receipt(SCOPE, 3, "R1", "H1"),
        recur(4, "build-04", True),
        recur(5, "build-05", False),
        recur(6, "build-06", True),
        outcome(SCOPE, 7, "build-07", "completed", "R1", checks=[check(SUBJECT, "passed")], observations=[claim(CONDITION)]),
        outcome(SCOPE, 8, "build-08", "completed", "R1", checks=[check(SUBJECT, "passed", basis="declared", evidence=[])]),
        recur(9, "build-09", False),
        recur(10, "build-10", True),
        recur(11, "build-11", False),
        experience(SCOPE, 12, "U1", cue="runner disk full", surface="working_state", condition="cleaned the workspace", subject="disk has room"),
        outcome(SCOPE, 13, "build-13", "failed", None, checks=[check("runner disk full")]),
    ]


def timeline_journal(path: Path, extra: Path | None = None) -> Path:
    """Write the timeline journal (then ``extra``'s lines) to ``path``."""
    lines = timeline_records()
    write_journal(path, lines)
    if extra is not None:
        path.write_bytes(path.read_bytes() + extra.read_bytes())
    return path


def run_follower(bootstrap: str, redis_url: str, prefix: str, log_path: Path, *, app_id: str = "ledger", idle: float = 3.0,
                 extra: tuple[str, ...] = ()) -> None:
    """Run ``recurrence-ledger view follow`` until it is idle; AssertionError
    with its output unless it exits 0."""
    args = cli_command(
        "view", "follow", "--bootstrap", bootstrap, "--redis-url", redis_url,
        "--topic-prefix", prefix, "--app-id", app_id, "--exit-when-idle", idle, *extra,
    )
    with open(log_path, "ab") as handle:
        result = subprocess.run(args, cwd=REPO, stdout=handle, stderr=subprocess.STDOUT, env=cli_env(), timeout=120)
    assert result.returncode == 0, log_path.read_text()[-3000:]


def snapshot(client: redis.Redis, keys: list[str]) -> dict[str, object]:
    """Type-aware contents of ``keys`` (absent keys left out): hash → dict,
    set → sorted list, zset → list of (member, score), string → value."""
    result: dict[str, object] = {}
    for key in keys:
        kind = client.type(key)
        kind = kind.decode() if isinstance(kind, bytes) else kind
        if kind == "hash":
            result[key] = client.hgetall(key)
        elif kind == "set":
            result[key] = sorted(client.smembers(key))
        elif kind == "zset":
            result[key] = client.zrange(key, 0, -1, withscores=True)
        elif kind == "string":
            result[key] = client.get(key)
    return result


def namespace_keys(client: redis.Redis, namespace: str) -> list[str]:
    """Every key under ``namespace:``, sorted."""
    return sorted(client.scan_iter(match=f"{namespace}:*", count=1000))

