"""What the tests run as processes: the command line as a user runs it
(``python -m recurrence_ledger.cli …`` in a subprocess) and a free loopback
port for a server a test starts.

The environment of a CLI run is this process's without the deployment
settings of the shell or of deploy/test.sh (``KAFKA_*``, ``REDIS_URL*``,
``RL_*``, ``SCHEMA_REGISTRY_URL``) and without the terminal's size
(``COLUMNS``, ``LINES``: pytest-xdist workers set them, a plain run does
not, and the CLI's tables follow them): a test passes what the run is meant
to see, as options or through ``env`` and ``columns``.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterable, Mapping
from pathlib import Path

from tests.conftest import REPO

#: Prefixes of the environment variables a CLI run does not inherit.
DEPLOYMENT_ENV = ("KAFKA_", "REDIS_URL", "RL_", "SCHEMA_REGISTRY_URL")
#: Nor these (the terminal's size).
TERMINAL_ENV = ("COLUMNS", "LINES")


def cli_command(*args: object) -> list[str]:
    """The argv of ``recurrence-ledger ARGS`` run by this interpreter
    (paths and numbers are turned into strings)."""
    return [sys.executable, "-m", "recurrence_ledger.cli", *map(str, args)]


def cli_env(env: Mapping[str, str] | None = None, *, keep: Iterable[str] = (), columns: int | None = None) -> dict[str, str]:
    """This process's environment without DEPLOYMENT_ENV (except the names
    in ``keep``) and TERMINAL_ENV, with ``COLUMNS`` when ``columns`` is
    given, then ``env``."""
    kept = tuple(keep)
    base = {key: value for key, value in os.environ.items()
            if key not in TERMINAL_ENV and (key in kept or not key.startswith(DEPLOYMENT_ENV))}
    if columns is not None:
        base["COLUMNS"] = str(columns)
    return {**base, **(env or {})}


def run_cli(*args: object, env: Mapping[str, str] | None = None, columns: int | None = None, cwd: Path | None = REPO,
            timeout: float = 180) -> subprocess.CompletedProcess:
    """Run ``recurrence-ledger ARGS`` to its end in a subprocess (text
    output captured, never raising for its exit code) with :func:`cli_env`
    (``env``, ``columns``) in ``cwd``; ``.elapsed`` is its wall time in
    seconds. subprocess.TimeoutExpired after ``timeout`` seconds."""
    started = time.monotonic()
    result = subprocess.run(cli_command(*args), cwd=cwd, env=cli_env(env, columns=columns), capture_output=True, text=True,
                            timeout=timeout, check=False)
    result.elapsed = time.monotonic() - started  # type: ignore[attr-defined]
    return result


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free right now (the kernel's pick;
    another process may take it before the caller binds it)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def running(pid: int) -> bool:
    """Whether process ``pid`` runs (Linux ``/proc``; a zombie waiting to be
    reaped does not)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, IndexError):
        return False


def still_running(pids: Iterable[int], seconds: float = 60.0) -> list[int]:
    """The ``pids`` still :func:`running` after up to ``seconds`` (none,
    once they all ended)."""
    pids = list(pids)
    deadline = time.monotonic() + seconds
    while any(running(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    return [pid for pid in pids if running(pid)]
