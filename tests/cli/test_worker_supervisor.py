"""``worker --processes N``'s supervisor (``cli.beside.Supervisor``) without
a broker: each worker process gets its own instance id, process label and
state folder; one that exits with the restart code or is killed is started
again, one that exits 0 is not; an error a restart does not cure stops the
others and is the supervisor's exit code; a supervisor killed outright
takes its worker processes with it."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from recurrence_ledger.cli import beside
from recurrence_ledger.runtime.worker_config import WorkerConfig
from tests.conftest import REPO
from tests.plugins.processes import still_running

RESTART = 3


def config(tmp_path: Path) -> WorkerConfig:
    return WorkerConfig(bootstrap="127.0.0.1:1", instance_id=str(tmp_path / "w"), state_dir=tmp_path / "state")


def restart_once_then_finish(config: WorkerConfig) -> None:
    """Exit with the restart code the first time, 0 the second."""
    marker = Path(f"{config.instance_id}.started")
    if not marker.exists():
        marker.write_text(config.process or "")
        sys.exit(RESTART)
    Path(f"{config.instance_id}.finished").write_text(str(config.state_dir))
    sys.exit(0)


def killed_once_then_finish(config: WorkerConfig) -> None:
    """Die of SIGKILL the first time, exit 0 the second."""
    marker = Path(f"{config.instance_id}.started")
    if not marker.exists():
        marker.write_text("")
        os.kill(os.getpid(), signal.SIGKILL)
    sys.exit(0)


def fail_or_wait(config: WorkerConfig) -> None:
    """Process 0 fails (exit 1) once process 1 is up; process 1 runs until stopped."""
    if config.process == "0":
        while not Path(f"{config.instance_id[:-2]}-1.up").exists():
            time.sleep(0.05)
        sys.exit(1)
    Path(f"{config.instance_id}.up").write_text("")
    while True:
        time.sleep(0.1)


def test_each_process_has_its_own_instance_id_process_label_and_state_folder(tmp_path):
    first, second = (beside.process_config(config(tmp_path), number) for number in (0, 1))
    assert (first.instance_id, second.instance_id) == (f"{tmp_path / 'w'}-0", f"{tmp_path / 'w'}-1")
    assert (first.process, second.process) == ("0", "1")
    assert (first.state_dir, second.state_dir) == (tmp_path / "state" / "process-0", tmp_path / "state" / "process-1")
    assert first.metrics_port is None and first.group_id == config(tmp_path).group_id


def test_a_process_exiting_with_the_restart_code_is_started_again_and_a_finished_one_is_not(tmp_path):
    supervisor = beside.Supervisor(config(tmp_path), 2, restart_once_then_finish, restart_exit=RESTART)
    assert supervisor.run() == 0
    assert supervisor.restarts == 2
    assert Path(f"{tmp_path / 'w'}-1.finished").read_text() == str(tmp_path / "state" / "process-1")


def test_a_killed_process_is_started_again(tmp_path):
    supervisor = beside.Supervisor(config(tmp_path), 2, killed_once_then_finish, restart_exit=RESTART)
    assert supervisor.run() == 0
    assert supervisor.restarts == 2


def test_an_error_a_restart_does_not_cure_stops_the_others_and_is_the_exit_code(tmp_path):
    supervisor = beside.Supervisor(config(tmp_path), 2, fail_or_wait, restart_exit=RESTART)
    assert supervisor.run() == 1
    assert supervisor.restarts == 0 and supervisor.children == {}


def always_restart_or_wait(config: WorkerConfig) -> None:
    """Process 0 notes its start and exits with the restart code, every
    time; process 1 notes it is up and runs until stopped."""
    if config.process == "0":
        with open(f"{config.instance_id}.starts", "a") as starts:
            starts.write("started\n")
        sys.exit(RESTART)
    Path(f"{config.instance_id}.up").write_text("")
    while True:
        time.sleep(0.1)


def test_restarts_wait_longer_each_time_within_the_window():
    assert [beside.restart_delay(recent) for recent in range(5)] == [0.0, 1.0, 2.0, 4.0, 8.0]


def test_a_process_that_keeps_exiting_for_a_restart_stops_the_supervisor_with_the_restart_code(tmp_path, monkeypatch):
    """Restarting in place does not cure a process that dies at every start
    (or a live twin with its instance id): the supervisor gives up and
    exits 3, for the platform's restart policy with its own backoff."""
    monkeypatch.setattr(beside, "RESTART_BACKOFF_S", 0.05)
    supervisor = beside.Supervisor(config(tmp_path), 2, always_restart_or_wait, restart_exit=RESTART)
    assert supervisor.run() == RESTART
    assert Path(f"{tmp_path / 'w'}-0.starts").read_text().splitlines() == ["started"] * beside.RESTART_LIMIT
    assert supervisor.restarts == beside.RESTART_LIMIT - 1 and supervisor.children == {}
    assert Path(f"{tmp_path / 'w'}-1.up").exists()


def ignore_sigterm(config: WorkerConfig) -> None:
    """A worker process stuck past a stop: SIGTERM ignored, runs on."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    Path(f"{config.instance_id}.up").write_text("")
    while True:
        time.sleep(0.1)


def test_a_process_that_does_not_stop_in_time_is_killed_and_the_supervisor_exits_with_the_restart_code(tmp_path, monkeypatch):
    """Not a clean stop (its open transaction is aborted at the next start):
    exit 3, not 0, so the platform sees it."""
    monkeypatch.setattr(beside, "SHUTDOWN_BUDGET_S", 0.5)
    supervisor = beside.Supervisor(config(tmp_path), 2, ignore_sigterm, restart_exit=RESTART)

    def stop_once_up() -> None:
        while not all(Path(f"{tmp_path / 'w'}-{number}.up").exists() for number in (0, 1)):
            time.sleep(0.05)
        os.kill(os.getpid(), signal.SIGTERM)  # the supervisor's handler is installed before its processes start

    threading.Thread(target=stop_once_up, daemon=True).start()
    assert supervisor.run() == RESTART
    assert supervisor.children == {} and supervisor.restarts == 0


def wait_for_stop(config: WorkerConfig) -> None:
    """Note this process's pid, then run until stopped."""
    Path(f"{config.instance_id}.pid").write_text(str(os.getpid()))
    while True:
        time.sleep(0.1)


SUPERVISE = """
import sys
from pathlib import Path
from recurrence_ledger.cli import beside
from recurrence_ledger.runtime.worker_config import WorkerConfig
from tests.cli.test_worker_supervisor import wait_for_stop
beside.supervise(WorkerConfig(bootstrap="127.0.0.1:1", instance_id=sys.argv[1]), 2, wait_for_stop)
"""


def started_supervisor(tmp_path: Path) -> tuple[subprocess.Popen, list[int]]:
    """A supervisor process of two :func:`wait_for_stop` worker processes,
    once both run; the pids of those."""
    supervisor = subprocess.Popen([sys.executable, "-c", SUPERVISE, str(tmp_path / "w")], cwd=REPO)
    pid_files = [Path(f"{tmp_path / 'w'}-{number}.pid") for number in (0, 1)]
    deadline = time.monotonic() + 60
    while not all(path.exists() and path.read_text() for path in pid_files):
        assert supervisor.poll() is None and time.monotonic() < deadline, "the worker processes did not start"
        time.sleep(0.05)
    return supervisor, [int(path.read_text()) for path in pid_files]


@pytest.mark.skipif(sys.platform != "linux", reason="the parent-death signal is Linux's")
def test_a_killed_supervisor_takes_its_worker_processes_with_it(tmp_path):
    supervisor, workers = started_supervisor(tmp_path)
    try:
        supervisor.kill()
        supervisor.wait(60)
        assert still_running(workers) == []
    finally:
        for pid in workers:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def test_a_hangup_stops_the_supervisor_and_its_worker_processes_as_sigterm_does(tmp_path):
    """A closed terminal (SIGHUP) stops the instance cleanly, as a JVM's
    shutdown hooks do, instead of killing the supervisor outright."""
    supervisor, workers = started_supervisor(tmp_path)
    try:
        supervisor.send_signal(signal.SIGHUP)
        assert supervisor.wait(60) == 0
        assert still_running(workers) == []
    finally:
        for pid in workers:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
