"""The worker's in-process view follower (``cli.beside.InProcessFollower``,
the worker's Companion) on the way out, without a broker or Redis: after a
clean stop it drains the follower (waits for its thread), unless the
follower reports Redis down; after a failure it stops it at once."""

from __future__ import annotations

import threading

import pytest

from recurrence_ledger.cli import beside
from recurrence_ledger.runtime.worker_config import WorkerConfig


class FakeFollower:
    """What InProcessFollower uses of a ViewFollower: drain, stop, redis_ok;
    its thread ends once drained or stopped."""

    def __init__(self, redis_ok: bool = True):
        self.redis_ok = redis_ok
        self.calls: list[str] = []
        self.done = threading.Event()

    def run(self) -> None:
        self.done.wait(30)

    def drain(self) -> None:
        self.calls.append("drain")
        self.done.set()

    def stop(self) -> None:
        self.calls.append("stop")
        self.done.set()


def started(monkeypatch, follower: FakeFollower) -> beside.InProcessFollower:
    thread = threading.Thread(target=follower.run, daemon=True)
    monkeypatch.setattr(beside, "start_follower", lambda config, redis_url: (follower, thread))
    companion = beside.InProcessFollower(WorkerConfig(bootstrap="127.0.0.1:1", instance_id="w1"), "redis://127.0.0.1:1/0")
    companion.start()
    thread.start()
    return companion


@pytest.mark.parametrize(("clean", "redis_ok", "calls"), [
    (True, True, ["drain", "stop"]),  # a stop or a finished batch: the view catches up with what was committed
    (True, False, ["stop"]),  # Redis down: not waiting for the follower
    (False, True, ["stop"]),  # the worker failed: the follower stops at once
])
def test_the_follower_is_drained_after_a_clean_stop_and_stopped_otherwise(monkeypatch, caplog, clean, redis_ok, calls):
    follower = FakeFollower(redis_ok)
    companion = started(monkeypatch, follower)
    companion.finish(clean)
    assert follower.calls == calls
    assert companion.thread is not None and not companion.thread.is_alive()
    assert ("Redis is down: not waiting for the view follower" in caplog.text) == (clean and not redis_ok)
