"""Helpers for the API and dashboard tests: feed a real worker with a journal
into the Redis view, run the API on a real uvicorn server over loopback, and
the reference statistics from the embedded runner (contract §10)."""

from __future__ import annotations

import contextlib
import json
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import uvicorn

from recurrence_ledger.api.app import create_app
from recurrence_ledger.api.settings import ApiSettings
from recurrence_ledger.embedded import run_journal
from recurrence_ledger.ledger.processor import LedgerConfig
from recurrence_ledger.read.projection import RedisView
from recurrence_ledger.read.keys import default_namespace
from tests.conftest import CASES, REPO
from tests.e2e import harness
from tests.plugins.processes import cli_command, cli_env, free_port

WORKED_EXAMPLE = CASES / "worked_example.jsonl"


@dataclass(frozen=True)
class FedView:
    """A Redis view written by a real worker: its topic prefix, namespace and
    the last statistics record per scope of the same journal computed by
    ``recurrence_ledger.embedded.run_journal`` (the values the API must show)."""

    prefix: str
    namespace: str
    redis_url: str
    expected: dict[str, dict]


@contextlib.contextmanager
def fed_view(bootstrap: str, redis_url: str, workdir: Path, journal: Path = WORKED_EXAMPLE, *,
             worker_args: tuple[str, ...] = (), config: LedgerConfig | None = None, transactions: int = 1) -> Iterator[FedView]:
    """Publish ``journal`` under a fresh topic prefix (in ``transactions``
    parts, a worker run after each), run one worker (with ``worker_args``)
    until it is idle (it projects into Redis), run the same
    journal through ``run_journal`` (with ``config``, the same policy) into
    ``workdir / "embedded"``, and yield the view. At exit the view's
    namespace is cleared and the prefix's topics deleted (best effort).
    Raises AssertionError when the worker fails or times out."""
    if not journal.is_file():
        raise AssertionError(f"journal {journal} is missing")
    prefix = harness.new_prefix()
    namespace = default_namespace(prefix)
    try:
        harness.prepare(bootstrap, prefix, partitions=2)
        if transactions > 1:  # the view's rows then have that many versions (trend points)
            harness.publish_in_transactions(bootstrap, journal, prefix, workdir, transactions, redis_url=redis_url, extra=worker_args)
        else:
            harness.publish(bootstrap, journal, prefix)
            harness.run_to_idle(bootstrap, prefix, workdir / "worker.log", redis_url=redis_url, extra=worker_args)
        # view_batch=1: the view files hold every version of each row (tests
        # replay earlier rows); the last record per key is the same anyway.
        run_journal(journal, workdir / "embedded", config, show_progress=False, view_batch=1)
        expected = harness.last_statistics((workdir / "embedded" / "recurrence-statistics.jsonl").read_bytes())
        yield FedView(prefix, namespace, redis_url, expected)
    finally:
        harness.remove_prefix(bootstrap, prefix, redis_url)


@contextlib.contextmanager
def embedded_view(redis_url: str, workdir: Path, journal: Path = WORKED_EXAMPLE, *, ca_file: str | None = None) -> Iterator[FedView]:
    """The view of ``journal`` written straight into Redis at ``redis_url``
    (no Kafka, no worker): the statistics and revision-statistics records
    of ``run_journal`` submitted to a ``RedisView`` under a fresh topic
    prefix's namespace, cleared at exit. For tests about who may read the
    view rather than how it is fed."""
    run_journal(journal, workdir / "embedded", show_progress=False)
    statistics = [json.loads(line) for line in (workdir / "embedded" / "recurrence-statistics.jsonl").read_text().splitlines() if line]
    revisions = [json.loads(line) for line in (workdir / "embedded" / "revision-statistics.jsonl").read_text().splitlines() if line]
    prefix = harness.new_prefix()
    writer = RedisView(redis_url, namespace=default_namespace(prefix), ca_file=ca_file)
    try:
        writer.submit(statistics, revisions=revisions)
        if writer.pending:
            raise AssertionError(f"the view was not written to {writer.where}")
        yield FedView(prefix, default_namespace(prefix), redis_url, {record["scope_id"]: record for record in statistics})
    finally:
        writer.clear()
        writer.close()


@contextlib.contextmanager
def running_api(settings: ApiSettings, startup_timeout: float = 15.0) -> Iterator[str]:
    """Run ``create_app(settings)`` on uvicorn in a thread, on a free loopback
    port bound before the server starts; yields its base URL
    (``http://127.0.0.1:<port>``) and stops the server at exit."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(create_app(settings), log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, name="uvicorn-test", daemon=True)
    thread.start()
    deadline = time.monotonic() + startup_timeout
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise AssertionError("uvicorn did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


def serve_cli(args: list[str], env: dict[str, str], log_path) -> tuple[subprocess.Popen, str]:  # noqa: ANN001 - Path
    """Start ``recurrence-ledger serve ARGS`` on a free loopback port, its
    environment ``env`` and none of this process's deployment settings
    (tests.plugins.processes.cli_env), its output into ``log_path``; returns the process and its
    base URL once /healthz answers (any status)."""
    port = free_port()
    handle = open(log_path, "wb")  # noqa: SIM115 - closed with the process
    process = subprocess.Popen(
        cli_command("serve", "--port", port, *args), cwd=REPO, stdout=handle, stderr=subprocess.STDOUT,
        env=cli_env(env, columns=200), start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"serve exited with {process.returncode}: {log_path.read_text()}")
        try:
            httpx.get(f"{url}/healthz", timeout=1)
            return process, url
        except httpx.HTTPError:
            time.sleep(0.1)
    process.kill()
    raise AssertionError(f"serve did not answer within 30 s: {log_path.read_text()}")


def stop_process(process: subprocess.Popen) -> None:
    """SIGTERM, then SIGKILL after 15 s."""
    process.terminate()
    try:
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
