"""``worker --processes N``'s supervisor (``cli.beside.Supervisor``) without
a broker: each worker process gets its own instance id, process label and
state folder; one that exits with the restart code or is killed is started
again, one that exits 0 is not; an error a restart does not cure stops the
others and is the supervisor's exit code."""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

from recurrence_ledger.cli import beside
from recurrence_ledger.runtime.worker_config import WorkerConfig

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
