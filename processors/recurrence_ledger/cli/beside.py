"""A worker with its view follower in one process (``worker`` / ``run`` with
``--redis-url``).

The runtime imports nothing of the read side; this module puts the two
together. :func:`run_worker_with_follower` runs
``recurrence_ledger.runtime.worker.run_worker`` with an
:class:`InProcessFollower` beside it (the worker's ``Companion``): a
``follower.ViewFollower`` of the worker's deployment — its own consumer
group ``<prefix><app_id>-view``, reading the committed view and ledger
topics into Redis — in a daemon thread, so the ledger never waits on Redis.
An error in the follower is logged and the ledger goes on (``view follow``
catches the view up). The follower's metrics are not served: the worker's
``--metrics-port`` serves the worker's (a ``view follow --metrics-port``
serves a follower's).

When the worker's loop ends:

- cleanly (a stop, a finished batch run, or one that gave up with
  NotCaughtUp: what was committed is right, only incomplete), the follower
  drains — it stops once nothing new arrived for
  ``follower.DRAIN_IDLE_S`` (1 s) — and the worker waits for it at most
  :data:`FOLLOWER_DRAIN_S`; not at all while the follower reports Redis
  down (the view is then behind the ledger until a follower catches up);
- on an error, the follower is stopped at once.
"""

from __future__ import annotations

import logging
import threading

from recurrence_ledger.read.follower import FollowerConfig, ViewFollower
from recurrence_ledger.redact import redact_url
from recurrence_ledger.runtime.worker import run_worker
from recurrence_ledger.runtime.worker_config import WorkerConfig
from recurrence_ledger.serde import codec

log = logging.getLogger("recurrence_ledger.worker")

#: Seconds a stopping worker gives its in-process view follower to apply
#: what the last transactions committed.
FOLLOWER_DRAIN_S = 60.0
#: Seconds a stopped follower's thread is waited for.
STOP_JOIN_S = 5.0


def follower_config(config: WorkerConfig, redis_url: str) -> FollowerConfig:
    """The in-process follower of the worker ``config`` into ``redis_url``:
    the worker's connection, app id, topic prefix and Schema Registry. Its ``repr`` redacts the URL's password."""
    return FollowerConfig(
        bootstrap=config.bootstrap, redis_url=redis_url, app_id=config.app_id, topic_prefix=config.topic_prefix,
        schema_registry=config.schema_registry,
    )


def start_follower(config: WorkerConfig, redis_url: str) -> tuple[ViewFollower, threading.Thread]:
    """The in-process view follower of a worker (:func:`follower_config`)
    running in a daemon thread. An error in it is logged; the ledger goes
    on. Raises ValueError for a Redis URL redis-py does not take."""
    follower = ViewFollower(follower_config(config, redis_url), codec.make_codec(config.schema_registry))

    def follow() -> None:
        try:
            follower.run()
        except Exception:  # noqa: BLE001 - the read side must never stop the ledger
            log.exception("the view follower stopped on an error; the ledger goes on (run `view follow` to catch the view up)")

    thread = threading.Thread(target=follow, name="view-follower", daemon=True)
    thread.start()
    log.info("view follower in this process: %s into %s (group %s)", sorted(follower.topics), redact_url(redis_url), follower.config.group_id)
    return follower, thread


class InProcessFollower:
    """The worker's companion (``runtime.worker.Companion``): the view
    follower into ``redis_url``, started beside the worker ``config`` and
    drained or stopped when its loop ends (module docstring)."""

    def __init__(self, config: WorkerConfig, redis_url: str):
        self.config = config
        self.redis_url = redis_url
        self.follower: ViewFollower | None = None
        self.thread: threading.Thread | None = None

    def start(self) -> None:
        """Start the follower's thread (:func:`start_follower`)."""
        self.follower, self.thread = start_follower(self.config, self.redis_url)

    def finish(self, clean: bool) -> None:
        """Drain (``clean``, Redis up: up to FOLLOWER_DRAIN_S), then stop the
        follower and wait up to STOP_JOIN_S for its thread."""
        view, thread = self.follower, self.thread
        if view is None or thread is None:
            return
        if clean and not view.redis_ok:
            log.warning("Redis is down: not waiting for the view follower; the view is behind the ledger until a follower catches up")
        elif clean:  # a stop or a finished batch: let the view catch up with what was committed
            view.drain()
            thread.join(FOLLOWER_DRAIN_S)
            if thread.is_alive():
                log.warning("the view follower did not catch up within %.0f s (is Redis down?); the view is behind the ledger", FOLLOWER_DRAIN_S)
        view.stop()
        thread.join(STOP_JOIN_S)


def run_worker_with_follower(config: WorkerConfig, redis_url: str) -> None:
    """``run_worker(config)`` with its view follower into ``redis_url``
    beside it (:class:`InProcessFollower`). Raises what ``run_worker``
    raises, and ValueError for an unusable Redis URL (before anything is
    consumed)."""
    run_worker(config, InProcessFollower(config, redis_url))
