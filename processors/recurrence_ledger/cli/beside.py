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

import contextlib
import logging
import multiprocessing
import os
import signal
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import replace

from recurrence_ledger.embedded.parallel import die_with_parent
from recurrence_ledger.read.follower import FollowerConfig, ViewFollower
from recurrence_ledger.redact import redact_url
from recurrence_ledger.runtime.worker import run_worker
from recurrence_ledger.runtime.worker_config import WorkerConfig
from recurrence_ledger.serde import codec
from recurrence_ledger.settings import STOP_SIGNALS

log = logging.getLogger("recurrence_ledger.worker")

#: Seconds a stopping worker gives its in-process view follower to apply
#: what the last transactions committed: the worker's stop, this and
#: STOP_JOIN_S fit in a platform's usual 30 s grace period (Kubernetes,
#: the systemd unit of docs/operating.md). A follower that needs longer
#: (a slow Redis) resumes from its committed offsets at the next start.
FOLLOWER_DRAIN_S = 15.0
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

    def finish(self, clean: bool, drain_s: float = FOLLOWER_DRAIN_S) -> None:
        """Drain (``clean``, Redis up: up to ``drain_s`` seconds), then stop
        the follower and wait up to STOP_JOIN_S for its thread."""
        view, thread = self.follower, self.thread
        if view is None or thread is None:
            return
        if clean and not view.redis_ok:
            log.warning("Redis is down: not waiting for the view follower; the view is behind the ledger until a follower catches up")
        elif clean:  # a stop or a finished batch: let the view catch up with what was committed
            view.drain()
            thread.join(drain_s)
            if thread.is_alive():
                log.warning("the view follower did not catch up within %.0f s (is Redis down or slow?); the view is behind the ledger "
                            "until a follower catches up", drain_s)
        view.stop()
        thread.join(STOP_JOIN_S)


def run_worker_with_follower(config: WorkerConfig, redis_url: str) -> None:
    """``run_worker(config)`` with its view follower into ``redis_url``
    beside it (:class:`InProcessFollower`). Raises what ``run_worker``
    raises, and ValueError for an unusable Redis URL (before anything is
    consumed)."""
    run_worker(config, InProcessFollower(config, redis_url))


# -- worker --processes N: one supervisor, N worker processes ---------------------------

#: Seconds the supervisor gives its worker processes after SIGTERM (each
#: commits its open transaction and stops) before it kills the ones left:
#: within Kubernetes' default grace period of 30 s.
SHUTDOWN_BUDGET_S = 25.0
#: Seconds between two looks at the worker processes.
SUPERVISE_POLL_S = 0.2
#: A worker process restarted this many times within RESTART_WINDOW_S
#: seconds is not restarted again: the supervisor stops the others and
#: exits 3, so the platform's own restart policy, with its backoff
#: (systemd's StartLimitBurst, Kubernetes' CrashLoopBackOff), takes over
#: — a process that dies at every start, or a live twin with the same
#: instance id fencing it, is not cured by restarting in place.
RESTART_LIMIT, RESTART_WINDOW_S = 5, 60.0
#: Seconds before the n-th restart of a worker process within the window:
#: at once the first time (a fenced transaction, a lost broker), then
#: RESTART_BACKOFF_S × 2^(n−2).
RESTART_BACKOFF_S = 1.0


def restart_delay(recent: int) -> float:
    """Seconds to wait before restarting a worker process that has already
    been restarted ``recent`` times within RESTART_WINDOW_S (0: at once)."""
    return 0.0 if recent == 0 else RESTART_BACKOFF_S * 2 ** (recent - 1)


def process_config(config: WorkerConfig, number: int) -> WorkerConfig:
    """Worker process ``number``'s configuration under a supervisor: the
    instance id ``<instance id>-<number>`` (its own static member and
    transactional id), its number as the metrics' ``process`` label, no
    metrics port of its own (the supervisor serves every process's), and
    with ``--state-dir`` a folder ``process-<number>`` of its own."""
    state_dir = config.state_dir / f"process-{number}" if config.state_dir is not None else None
    return replace(config, instance_id=f"{config.instance_id}-{number}", metrics_port=None, process=str(number), state_dir=state_dir)


def run_child(target: Callable[[WorkerConfig], None], config: WorkerConfig, parent_pid: int) -> None:
    """A worker process of a :class:`Supervisor`: ``target(config)``, and
    SIGTERM (a worker's own stop: it commits its open transaction) when
    the supervisor dies without stopping it, e.g. of SIGKILL
    (``die_with_parent``, Linux), so no worker is left running in the
    group without its supervisor."""
    die_with_parent(parent_pid)
    target(config)


class Supervisor:
    """``worker --processes N``: N worker processes (spawned, each
    ``target(process_config(config, n))``) in one consumer group, and —
    with ``redis_url`` — the view follower once, in this process
    (:class:`InProcessFollower`), never in a worker process.

    - a worker process that exits with ``RESTART_EXIT`` (3) or is killed by
      a signal is started again with the same instance id (which fences its
      previous incarnation's open transaction): at once the first time,
      then after 1, 2, 4… s (:func:`restart_delay`); the
      :data:`RESTART_LIMIT`-th exit within :data:`RESTART_WINDOW_S` stops
      the others instead, and the supervisor exits 3;
    - one that exits 0 (a finished batch run) is not restarted; the
      supervisor exits once all have;
    - one that exits with another code (an error a restart does not cure)
      stops the others, and the supervisor exits with that code;
    - the stop signals (``settings.STOP_SIGNALS``: SIGTERM, SIGINT, SIGHUP) stop every worker process (each commits its open
      transaction); those still running after :data:`SHUTDOWN_BUDGET_S`
      are killed; a supervisor killed outright takes them with it
      (:func:`run_child`).

    With ``config.metrics_port``, one endpoint serves every worker
    process's metrics, each with its ``process`` label (prometheus-client's
    multiprocess mode, in a folder of the supervisor's own).
    """

    def __init__(self, config: WorkerConfig, processes: int, target: Callable[[WorkerConfig], None], redis_url: str | None = None,
                 restart_exit: int = 3):
        self.config = config
        self.processes = processes
        self.target = target
        self.redis_url = redis_url
        self.restart_exit = restart_exit
        self.context = multiprocessing.get_context("spawn")
        self.children: dict[int, multiprocessing.process.BaseProcess] = {}
        self.restarts = 0
        #: worker process number → when it was restarted, within RESTART_WINDOW_S
        self._restarted: dict[int, list[float]] = {}
        #: worker process number → when it is due to start again
        self._due: dict[int, float] = {}
        self._stopping = False
        self._stopped_at: float | None = None
        self._metrics_dir: str | None = None

    def stop(self, *_: object) -> None:
        """Stop every worker process (SIGTERM; a signal handler)."""
        self._stopping = True
        self._due.clear()
        if self._stopped_at is None:
            self._stopped_at = time.monotonic()
        for child in self.children.values():
            if child.is_alive() and child.pid is not None:
                os.kill(child.pid, signal.SIGTERM)

    def _start(self, number: int) -> None:
        child = self.context.Process(target=run_child, args=(self.target, process_config(self.config, number), os.getpid()),
                                     name=f"worker-{number}")
        child.start()
        self.children[number] = child
        log.info("worker process %d (instance %s-%d) started: pid %s", number, self.config.instance_id, number, child.pid)

    def _serve_metrics(self) -> None:
        from prometheus_client import CollectorRegistry, start_http_server
        from prometheus_client.multiprocess import MultiProcessCollector

        registry = CollectorRegistry()
        MultiProcessCollector(registry, path=self._metrics_dir)
        start_http_server(self.config.metrics_port, addr=self.config.metrics_host, registry=registry)

    def _process_dead(self, pid: int | None) -> None:
        if self._metrics_dir is not None and pid is not None:
            from prometheus_client import multiprocess

            multiprocess.mark_process_dead(pid, self._metrics_dir)

    def run(self) -> int:
        """Run until every worker process has stopped; the exit code
        (class docstring)."""
        with contextlib.ExitStack() as stack:
            if self.config.metrics_port:
                self._metrics_dir = stack.enter_context(tempfile.TemporaryDirectory(prefix="rl-metrics-"))
                os.environ["PROMETHEUS_MULTIPROC_DIR"] = self._metrics_dir  # read by each spawned worker process
                self._serve_metrics()
            companion = InProcessFollower(self.config, self.redis_url) if self.redis_url else None
            previous = {number: signal.signal(number, self.stop) for number in STOP_SIGNALS}
            stack.callback(lambda: [signal.signal(number, handler) for number, handler in previous.items()])
            for number in range(self.processes):
                self._start(number)
            if companion is not None:
                companion.start()
            code = self._watch()
            if companion is not None:  # within the stop's budget after a signal
                spent = time.monotonic() - self._stopped_at if self._stopped_at is not None else 0.0
                companion.finish(code == 0, max(1.0, min(FOLLOWER_DRAIN_S, SHUTDOWN_BUDGET_S - spent)))
            return code

    def _watch(self) -> int:
        code = 0
        deadline: float | None = None
        while self.children or self._due:
            for number, due in list(self._due.items()):
                if time.monotonic() >= due:
                    del self._due[number]
                    self._start(number)
            if not self.children:
                time.sleep(SUPERVISE_POLL_S)
            for number, child in list(self.children.items()):
                child.join(SUPERVISE_POLL_S / max(1, len(self.children)))
                if child.exitcode is None:
                    continue
                self._process_dead(child.pid)
                del self.children[number]
                exited = child.exitcode
                if self._stopping:
                    log.info("worker process %d stopped (exit %s)", number, exited)
                elif exited == self.restart_exit or exited < 0:
                    how = f"on signal {-exited}" if exited < 0 else exited
                    now = time.monotonic()
                    recent = [at for at in self._restarted.get(number, []) if now - at < RESTART_WINDOW_S]
                    if len(recent) + 1 >= RESTART_LIMIT:
                        log.error("worker process %d exited %s, %d times within %.0f s: not restarting it again; stopping the others",
                                  number, how, len(recent) + 1, RESTART_WINDOW_S)
                        code = code or self.restart_exit
                        self.stop()
                        continue
                    delay = restart_delay(len(recent))
                    self._restarted[number] = [*recent, now + delay]
                    self._due[number] = now + delay
                    self.restarts += 1
                    log.warning("worker process %d exited %s: restarting it%s", number, how, f" in {delay:.0f} s" if delay else "")
                elif exited != 0:
                    log.error("worker process %d exited %d: stopping the others", number, exited)
                    code = code or exited
                    self.stop()
            if self._stopping and deadline is None:
                deadline = time.monotonic() + SHUTDOWN_BUDGET_S
            if deadline is not None and time.monotonic() > deadline:
                for number, child in self.children.items():
                    log.error("worker process %d did not stop within %.0f s: killed", number, SHUTDOWN_BUDGET_S)
                    child.kill()
                    code = code or self.restart_exit  # not a clean stop: its open transaction is aborted at the next start
                deadline = float("inf")
        return code


def supervise(config: WorkerConfig, processes: int, target: Callable[[WorkerConfig], None], redis_url: str | None = None,
              restart_exit: int = 3) -> int:
    """Run ``processes`` worker processes under a :class:`Supervisor`; its
    exit code."""
    return Supervisor(config, processes, target, redis_url, restart_exit).run()
