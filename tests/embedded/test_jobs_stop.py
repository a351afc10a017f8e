"""A ``--jobs N`` run leaves no process behind however it is stopped: a
SIGTERM to the command (what a CI cancel, ``kill`` or a container stop
sends to it alone) ends it as Ctrl-C does — its pool's processes
terminated, its work folder removed, exit 143 —, a command killed
outright (SIGKILL) takes its pool's processes with it (Linux), and a pool
process killed mid-run stops the run with one error line (exit 1)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from recurrence_ledger.workload import Workload, generate_journal
from tests.plugins.processes import still_running

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="reads /proc; the parent-death signal is Linux's")

#: Seconds a process gets to start its pool, or to go away.
DEADLINE_S = 60.0


@pytest.fixture(scope="module")
def journal(tmp_path_factory) -> Path:
    """A journal long enough that a --jobs 2 run is still going when it is stopped."""
    path = tmp_path_factory.mktemp("stop") / "long.jsonl"
    shape = Workload(scopes=40, outcomes_per_scope=1_500, heads_per_scope=4, handoffs=2)
    path.write_bytes(b"".join(json.dumps(record).encode() + b"\n" for record in generate_journal(shape)))
    return path


def children(pid: int) -> list[int]:
    """The processes ``pid`` started that are still its children."""
    try:
        return [int(child) for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except FileNotFoundError:
        return []


def start(command: list[str], log: Path) -> tuple[subprocess.Popen, list[int]]:
    """``recurrence-ledger <command>`` started (its output in ``log``: a
    pipe would be held open by processes it leaves behind), and its pool's
    processes once both run."""
    with open(log, "wb") as output:
        process = subprocess.Popen([sys.executable, "-m", "recurrence_ledger.cli", *command], stdout=output, stderr=subprocess.STDOUT,
                                   start_new_session=True)
    deadline = time.monotonic() + DEADLINE_S
    while len(children(process.pid)) < 2:
        assert process.poll() is None, log.read_text()
        assert time.monotonic() < deadline, "the pool's processes did not start"
        time.sleep(0.05)
    return process, children(process.pid)


def stop_all(process: subprocess.Popen, pool: list[int]) -> None:
    """Clean-up after a failed assertion: nothing of the run outlives the test."""
    for pid in [process.pid, *pool]:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    process.wait()


COMMANDS = {
    "run-journal": lambda journal, out: ["run-journal", str(journal), "--out", str(out), "--jobs", "2", "--quiet"],
    "what-if --sweep": lambda journal, out: ["what-if", str(journal), "--sweep", "review-threshold=2..4", "--out", str(out), "--jobs", "2",
                                             "--quiet"],
}


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
@pytest.mark.parametrize("name", COMMANDS)
def test_a_sigterm_or_sighup_to_the_command_ends_its_pool_and_removes_its_work_folder(name, signum, journal, tmp_path):
    """A SIGHUP is what a closed terminal or a dropped ssh session sends: it
    stops the run as a SIGTERM does, work folder removed."""
    out, log = tmp_path / "out", tmp_path / "log"
    process, pool = start(COMMANDS[name](journal, out), log)
    try:
        process.send_signal(signum)  # to the command alone, not its process group
        assert process.wait(DEADLINE_S) == 128 + signum, log.read_text()
        assert still_running(pool, DEADLINE_S) == []
        assert [path.name for path in out.rglob(".jobs-*")] == []
    finally:
        stop_all(process, pool)


def test_a_killed_command_takes_its_pool_with_it(journal, tmp_path):
    process, pool = start(COMMANDS["run-journal"](journal, tmp_path / "out"), tmp_path / "log")
    try:
        process.kill()
        process.wait(DEADLINE_S)
        assert still_running(pool, DEADLINE_S) == []  # parent-death signal: no process is left waiting for work
    finally:
        stop_all(process, pool)


@pytest.mark.parametrize("name", COMMANDS)
def test_a_pool_process_killed_mid_run_is_one_error_line_and_exit_1(name, journal, tmp_path):
    """The kernel's out-of-memory killer, say: the run stops with a message
    (no traceback), the other process and the work folder go with it."""
    out, log = tmp_path / "out", tmp_path / "log"
    process, pool = start(COMMANDS[name](journal, out), log)
    try:
        os.kill(pool[0], signal.SIGKILL)
        assert process.wait(DEADLINE_S) == 1, log.read_text()
        message = " ".join(log.read_text().split())
        assert "a --jobs process ended abruptly" in message and "Traceback" not in message, message
        assert still_running(pool, DEADLINE_S) == []
        assert [path.name for path in out.rglob(".jobs-*")] == []
    finally:
        stop_all(process, pool)


#: A JobPool whose executor manager thread gets a SIGTERM the moment it starts.
SIGTERM_AS_THE_POOL_STARTS = """
import os, signal
from concurrent.futures import process
from recurrence_ledger.embedded.parallel import JobPool

original = process._ExecutorManagerThread.start

def start(self):
    os.kill(os.getpid(), signal.SIGTERM)
    original(self)

process._ExecutorManagerThread.start = start
with JobPool(2) as pool:
    pool.executor.submit(int).result()
print("not stopped")
"""


def test_a_sigterm_while_the_pool_starts_its_threads_still_ends_the_run_with_143():
    """The narrowest window: the signal arrives while Thread.start() waits
    for the executor's manager thread. Raised there, the pool's shutdown
    could not join that thread ("cannot join thread before it is
    started", exit 1); the pool holds SIGTERM back until it runs."""
    result = subprocess.run([sys.executable, "-c", SIGTERM_AS_THE_POOL_STARTS], capture_output=True, text=True, timeout=DEADLINE_S)
    assert result.returncode == 128 + signal.SIGTERM, result.stdout + result.stderr
    assert "not stopped" not in result.stdout and "Traceback" not in result.stderr


@pytest.mark.parametrize(("jobs", "signum"), [("1", signal.SIGINT), ("1", signal.SIGTERM), ("1", signal.SIGHUP), ("2", signal.SIGTERM)])
def test_a_run_stopped_midway_leaves_the_previous_files_as_they_were(jobs, signum, journal, tmp_path):
    """The files appear when the run ends (runner.staged_outputs): a run
    stopped before leaves the folder's previous files whole — not a mix of
    truncated new files and old ones that looks like a complete run."""
    from tests.conftest import case

    out = tmp_path / "out"
    previous = subprocess.run([sys.executable, "-m", "recurrence_ledger.cli", "run-journal", str(case("minimum_case")[0]), "--out", str(out),
                               "--quiet"], capture_output=True, check=False)
    assert previous.returncode == 0, previous.stderr
    before = {path.name: path.read_bytes() for path in out.iterdir()}
    assert len(before) == 12
    log = tmp_path / "log"
    with open(log, "wb") as output:
        process = subprocess.Popen([sys.executable, "-m", "recurrence_ledger.cli", "run-journal", str(journal), "--out", str(out), "--jobs", jobs,
                                    "--quiet"], stdout=output, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + DEADLINE_S
        while not any(path.stat().st_size for path in out.glob(".*/**/recurrence-observations.jsonl")):
            assert process.poll() is None, log.read_text()
            assert time.monotonic() < deadline, "the run wrote nothing"
            time.sleep(0.05)
        process.send_signal(signum)
        assert process.wait(DEADLINE_S) == 128 + signum, log.read_text()
        assert {path.name: path.read_bytes() for path in out.iterdir()} == before  # and no hidden .run-* or .jobs-* folder
    finally:
        stop_all(process, children(process.pid))
