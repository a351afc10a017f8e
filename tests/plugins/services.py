"""The services the tests need, as a pytest plugin (registered in
tests/conftest.py): their fixtures, and the markers that follow from them.

Markers (registered in pyproject.toml) are never written on a test by
hand: a test that uses a fixture of SERVICE_FIXTURES — directly or through
other fixtures — is marked with that fixture's services (``kafka``,
``redis``, ``registry``, ``secure``, ``browser``, ``prometheus``) and with
``services`` (and ``broker``, the old name of ``services``). So
``pytest -m "not services"`` is the fast suite, which needs no service and
no network at all, and ``-m "not browser"`` and the like leave out what a
machine lacks. tests/e2e/ holds service tests only: a test there that uses
no service fixture is a collection error.

Under pytest-xdist (``-n N --dist loadgroup``): the tests that share a
module- or class-scoped fixture built on a service (a view a real worker
fed, a pipeline on the secured broker) run on one worker, so that fixture
is built once (``xdist_group`` named after the module); a test marked
``serial`` runs while no other test runs (an exclusive lock between the
workers, shared by every other test; consecutive serial tests, all in the
``serial`` group, hold it together); the Schema Registry tests run one
after the other (``registry`` group: the registry answered concurrent
registrations of new subjects with spurious HTTP 409s). xdist 3.8 reads
the groups from node ids it rewrites, which pytest 9.2 no longer lets it
do (pytest-xdist issue 1386): the workers write each test's group to a
file of the run, and the controller schedules with GroupScheduling, which
reads it.

Service fixtures fail — never skip — when their service is not configured
or does not answer: a service test that silently skips proves nothing.

- ``bootstrap`` (session): ``KAFKA_BOOTSTRAP_SERVERS``, answering within 10 s.
- ``admin`` (session): an AdminClient on that broker.
- ``topic_prefix``: a fresh ``"t<8 hex>."`` per test (tests, and other
  runs on the same broker, never share a topic); its topics are deleted at
  teardown (best effort).
- ``catalogue_topics``: ``create(partitions=3, extra=())`` creates every
  catalogue topic under ``topic_prefix`` (recurrence_ledger.kafka.kafka_admin.create_topics).
- ``kafka_server``: ``make()`` gives a broker of the test's own
  (:class:`KafkaServer`, deploy/kafka.sh on free ports, not started).
- ``redis_url`` (session): ``REDIS_URL``, answering PING.
- ``redis_cluster_url`` (session): ``REDIS_CLUSTER_URL``, the
  ``redis+cluster://`` URL of deploy/redis-cluster.sh's 3-master Redis
  Cluster, answering PING on every node with ``cluster_state:ok``.
- ``redis_cluster_tls_url`` (session): ``REDIS_CLUSTER_TLS_URL``, the
  ``rediss+cluster://…?ssl_ca_certs=…`` URL of ``redis-cluster.sh --tls``.
- ``read_redis_url``: parametrized ``single`` / ``cluster``: the URL of
  ``redis_url`` or of ``redis_cluster_url`` (the read-model tests that
  exercise keys, scripts and indexes run against both); ``read_client(url)``
  makes a client of either.
- ``redis_server``: ``make()`` gives a redis-server of the test's own
  (:class:`RedisServer`, deploy/redis.sh on a free port, not started).
- ``schema_registry_url`` (session): ``SCHEMA_REGISTRY_URL``, answering
  ``GET /subjects``. The variable is taken out of the environment when this
  plugin loads: every other test, and the workers and CLI runs they start,
  use the fixed-id framing (xdist workers get it from the controller).
- ``prometheus`` (session): ``(PROMETHEUS_URL, RL_PROMETHEUS_TARGETS folder)``
  of the Prometheus deploy/prometheus.sh runs, ready; ``promtool``: its path.
- ``browser``: the ``node`` binary, with Chromium and playwright-core in
  BROWSER_DIR (``bash deploy/ensure-browser.sh``).
- ``secure``, ``secure_prefix``, ``secure_redis``: tests/plugins/secure.py.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from uuid import uuid4

import pytest

from tests.conftest import REPO
from tests.plugins.processes import TERMINAL_ENV, free_port

#: Fixture -> the services a test using it needs (its markers, besides ``services``).
SERVICE_FIXTURES: dict[str, tuple[str, ...]] = {
    "bootstrap": ("kafka",),
    "kafka_server": ("kafka",),
    "redis_url": ("redis",),
    "redis_cluster_url": ("redis",),
    "redis_cluster_tls_url": ("redis",),
    "read_redis_url": ("redis",),
    "redis_server": ("redis",),
    "schema_registry_url": ("registry",),
    "secure": ("secure", "kafka"),
    "secure_redis": ("secure", "redis"),
    "browser": ("browser",),
    "prometheus": ("prometheus",),
    "promtool": ("prometheus",),
}
E2E_DIR = REPO / "tests" / "e2e"
#: The browser tests' driver scripts and their node_modules.
BROWSER_DIR = E2E_DIR / "browser"
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
#: Seconds a service has to answer before its fixture fails.
SERVICE_TIMEOUT_S = 10.0
#: Taken out of the environment here (see the module docstring).
SCHEMA_REGISTRY_URL = os.environ.pop("SCHEMA_REGISTRY_URL", None)
SET_UP = 'start the services with env_lines="$(bash deploy/services.sh up)"; eval "$env_lines"'


# ----------------------------------------------------------------- markers


def _services_behind(name: str, definitions: dict, seen: set[str]) -> bool:
    """Whether fixture ``name`` is, or depends on, a service fixture."""
    if name in SERVICE_FIXTURES:
        return True
    seen.add(name)
    fixturedefs = definitions.get(name) or ()
    return any(argument not in seen and _services_behind(argument, definitions, seen)
               for fixturedef in fixturedefs[-1:] for argument in fixturedef.argnames)


def _shares_a_service_fixture(item: pytest.Item) -> bool:
    """Whether the test uses a module-, class- or package-scoped fixture
    built on a service (worth building once per run, not once per worker)."""
    definitions = item._fixtureinfo.name2fixturedefs  # noqa: SLF001 - pytest's resolved fixture closure
    return any(
        definitions[name][-1].scope in ("module", "class", "package") and _services_behind(name, definitions, set())
        for name in getattr(item, "fixturenames", ()) if definitions.get(name)
    )


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark every test by the services its fixtures need (before ``-m``
    selects and xdist groups); refuse a test in tests/e2e/ that needs none."""
    strays = []
    for item in items:
        services = sorted({marker for name in getattr(item, "fixturenames", ()) if name in SERVICE_FIXTURES for marker in SERVICE_FIXTURES[name]})
        for marker in (*services, "services", "broker") if services else ():
            item.add_marker(marker)
        if not services and E2E_DIR in item.path.parents:
            strays.append(item.nodeid)
        if item.get_closest_marker("serial"):
            item.add_marker(pytest.mark.xdist_group("serial"))
        elif "registry" in services:
            item.add_marker(pytest.mark.xdist_group("registry"))
        elif services and _shares_a_service_fixture(item):
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::")[0]))
    # The long tests first (a stable sort: the rest keep their order):
    # pytest-xdist hands out groups by size, then single tests in this
    # order, so no worker picks up a two-minute test near the end.
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)
    if hasattr(config, "workerinput") and config.getoption("loadgroup", False):  # a worker has dist "no", loadgroup set
        _write_groups(config, items)
    if strays:
        raise pytest.UsageError(
            "tests/e2e/ holds service tests only; these use no service fixture (tests/plugins/services.py), "
            "move them beside the code they test: " + ", ".join(strays)
        )


class RunLock:
    """A readers–writer lock between the xdist workers of one run, on two
    files: ``serial`` tests take it exclusively, every other test shared.
    A turnstile taken before either keeps a waiting exclusive test from
    being starved by a stream of shared ones."""

    def __init__(self, path: Path):
        self._turnstile = open(path.with_name(path.name + ".turnstile"), "a")  # noqa: SIM115 - open for the run
        self._lock = open(path, "a")  # noqa: SIM115
        self.held: int | None = None

    def acquire(self, exclusive: bool) -> None:
        mode = fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH
        if self.held == mode:
            return
        self.release()
        fcntl.flock(self._turnstile, fcntl.LOCK_EX)
        try:
            fcntl.flock(self._lock, mode)
        finally:
            fcntl.flock(self._turnstile, fcntl.LOCK_UN)
        self.held = mode

    def release(self) -> None:
        if self.held is not None:
            fcntl.flock(self._lock, fcntl.LOCK_UN)
            self.held = None


RUN_LOCK = pytest.StashKey[RunLock]()


def _run_file(testrunuid: str, suffix: str) -> Path:
    """A file shared by the controller and the workers of one xdist run."""
    return Path(tempfile.gettempdir()) / f"pytest-run-{testrunuid}.{suffix}"


def _write_groups(config: pytest.Config, items: list[pytest.Item]) -> None:
    """In a worker: ``{node id: xdist group}`` of the collection, for GroupScheduling."""
    groups = {}
    for item in items:
        names = sorted({str(mark.args[0] if mark.args else mark.kwargs.get("name", "default")) for mark in item.iter_markers("xdist_group")})
        if names:
            groups[item.nodeid] = "_".join(names)
    path = _run_file(config.workerinput["testrunuid"], "groups.json")
    partial = path.with_name(f"{path.name}.{config.workerinput['workerid']}")
    partial.write_text(json.dumps(groups))
    os.replace(partial, path)  # every worker writes the same content


def _group_scheduling():
    from xdist.scheduler import LoadGroupScheduling

    class GroupScheduling(LoadGroupScheduling):
        """xdist's loadgroup, its groups read from the file the workers
        wrote (node ids with an ``@group`` suffix still count)."""

        groups: dict[str, str] | None = None

        def _split_scope(self, nodeid: str) -> str:
            if nodeid.rfind("@") > nodeid.rfind("]"):
                return super()._split_scope(nodeid)
            if self.groups is None:
                path = _run_file(self.config.getoption("testrunuid"), "groups.json")
                self.groups = json.loads(path.read_text()) if path.is_file() else {}
            return self.groups.get(nodeid, nodeid)

    return GroupScheduling


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    if config.getoption("dist", None) == "loadgroup":
        return _group_scheduling()(config, log)
    return None


def pytest_configure(config: pytest.Config) -> None:
    workerinput = getattr(config, "workerinput", None)  # set in an xdist worker only
    if workerinput is None and config.getoption("testrunuid", None) is None and config.getoption("numprocesses", None):
        config.option.testrunuid = uuid4().hex  # the controller's, passed to the workers: it names the run's files
    if workerinput is not None:
        # A worker starts with COLUMNS and LINES set (80x24) where a plain run
        # has neither; the CLI's consoles (recurrence_ledger.embedded.stdout_console)
        # follow them, in this process and in the CLI runs: print as in a plain run.
        for name in TERMINAL_ENV:
            os.environ.pop(name, None)
        config.stash[RUN_LOCK] = RunLock(_run_file(workerinput["testrunuid"], "lock"))


def pytest_unconfigure(config: pytest.Config) -> None:
    if not hasattr(config, "workerinput") and config.getoption("testrunuid", None):
        for suffix in ("groups.json", "lock", "lock.turnstile"):
            _run_file(config.getoption("testrunuid"), suffix).unlink(missing_ok=True)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None):
    """Hold the run lock over the test's setup, call and teardown (module
    fixtures included): exclusive for a ``serial`` test, kept until the
    last of consecutive serial tests; shared otherwise."""
    lock = item.config.stash.get(RUN_LOCK, None)
    if lock is None:
        return (yield)
    serial = item.get_closest_marker("serial") is not None
    lock.acquire(exclusive=serial)
    try:
        return (yield)
    finally:
        if not (serial and nextitem is not None and nextitem.get_closest_marker("serial")):
            lock.release()


def _configured(variable: str) -> str:
    """The value of environment variable ``variable``; fails the test when it is unset or empty."""
    value = os.environ.get(variable)
    if not value:
        pytest.fail(f"{variable} is not set: {SET_UP}")
    return value


# ----------------------------------------------------------------- Kafka


@pytest.fixture(scope="session")
def bootstrap() -> str:
    """``host:port`` of the broker; fails the test when there is none."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    servers = _configured("KAFKA_BOOTSTRAP_SERVERS")
    try:
        AdminClient({"bootstrap.servers": servers}).list_topics(timeout=SERVICE_TIMEOUT_S)
    except KafkaException as error:
        pytest.fail(f"Kafka broker at {servers} did not answer within {SERVICE_TIMEOUT_S:.0f} s: {error}")
    return servers


@pytest.fixture(scope="session")
def admin(bootstrap: str):
    """An AdminClient on the test broker."""
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": bootstrap})


@pytest.fixture
def topic_prefix(bootstrap: str) -> Iterator[str]:
    """A topic prefix unique to this test; its topics are deleted afterwards."""
    from tests.e2e import harness

    prefix = f"t{uuid4().hex[:8]}."
    yield prefix
    harness.remove_prefix(bootstrap, prefix)


@pytest.fixture
def catalogue_topics(bootstrap: str, topic_prefix: str) -> Callable[..., dict[str, str]]:
    """``create(partitions=3, extra=())``: create the catalogue's topics
    under ``topic_prefix``; returns create_topics' status per topic."""
    from recurrence_ledger.kafka.kafka_admin import create_topics

    def create(partitions: int = 3, extra: Iterable[tuple[str, dict]] = ()) -> dict[str, str]:
        return create_topics(bootstrap, partitions, topic_prefix, extra=extra)

    return create


class OwnServer:
    """A server of one test's own, driven by a deploy/ script (its
    ``start``/``stop`` commands) with the environment ``env`` on top of
    this process's: never the shared services' ports or run dirs."""

    script = ""

    def __init__(self, env: dict[str, str], start_timeout: float):
        self.env = env
        self.start_timeout = start_timeout

    def run(self, command: str, timeout: float | None = None) -> None:
        """``bash deploy/<script> COMMAND``; AssertionError with its
        stderr unless it exits 0."""
        result = subprocess.run(["bash", str(REPO / "deploy" / self.script), command], env={**os.environ, **self.env},
                                capture_output=True, text=True, timeout=timeout or self.start_timeout)
        assert result.returncode == 0, f"{self.script} {command}: {result.stderr[-3000:]}"

    def start(self) -> None:
        self.run("start")

    def stop(self) -> None:
        self.run("stop", timeout=60)

    def cleanup(self) -> None:
        """Stop it whatever state the test left it in (never raises)."""
        try:
            subprocess.run(["bash", str(REPO / "deploy" / self.script), "stop"], env={**os.environ, **self.env},
                           capture_output=True, timeout=60)
        except (OSError, subprocess.SubprocessError):
            pass


class KafkaServer(OwnServer):
    """A single-node broker (deploy/kafka.sh) on free ports, its run dir
    ``run_dir``; ``bootstrap`` is its ``host:port``."""

    script = "kafka.sh"

    def __init__(self, run_dir: Path):
        self.port, controller = free_port(), free_port()
        super().__init__({"KAFKA_PORT": str(self.port), "KAFKA_CONTROLLER_PORT": str(controller), "RL_RUN_DIR": str(run_dir)}, 120)
        self.bootstrap = f"127.0.0.1:{self.port}"

    def restart_keep_data(self) -> None:
        """Stop the broker and start it again on its data (deploy/kafka.sh restart-keep-data)."""
        self.run("restart-keep-data")


class RedisServer(OwnServer):
    """A redis-server (deploy/redis.sh, no persistence) on a free port, its
    run dir ``run_dir``; ``url`` is ``redis://127.0.0.1:<port>/0``."""

    script = "redis.sh"

    def __init__(self, run_dir: Path):
        self.port = free_port()
        self.run_dir = run_dir
        super().__init__({"REDIS_PORT": str(self.port), "RL_REDIS_RUN_DIR": str(run_dir)}, 60)
        self.url = f"redis://127.0.0.1:{self.port}/0"

    def pid(self) -> int:
        return int((self.run_dir / "redis.pid").read_text().strip())

    def cleanup(self) -> None:
        try:
            os.kill(self.pid(), signal.SIGCONT)  # in case the test left it stopped
        except (OSError, ValueError):
            pass
        super().cleanup()


def _own_servers(kind: type[OwnServer], tmp_path: Path, name: str) -> Iterator[Callable[[], OwnServer]]:
    servers: list[OwnServer] = []

    def make() -> OwnServer:
        servers.append(kind(tmp_path / f"{name}-{len(servers)}"))
        return servers[-1]

    yield make
    for server in servers:
        server.cleanup()


@pytest.fixture
def kafka_server(tmp_path: Path) -> Iterator[Callable[[], KafkaServer]]:
    """``make()``: a new, not yet started :class:`KafkaServer`; every one is stopped after the test."""
    yield from _own_servers(KafkaServer, tmp_path, "kafka")


# ----------------------------------------------------------------- Redis


@pytest.fixture(scope="session")
def redis_url() -> str:
    """``redis://…`` of the test Redis; fails the test when there is none."""
    import redis

    url = _configured("REDIS_URL")
    try:
        redis.Redis.from_url(url, socket_timeout=2, socket_connect_timeout=2).ping()
    except redis.exceptions.RedisError as error:
        pytest.fail(f"Redis at {url} did not answer: {error}")
    return url


@pytest.fixture(scope="session")
def redis_cluster_url() -> str:
    """``redis+cluster://…`` of the test Redis Cluster; fails the test when
    there is none or its state is not ok."""
    return _cluster_answering("REDIS_CLUSTER_URL")


@pytest.fixture(scope="session")
def redis_cluster_tls_url() -> str:
    """``rediss+cluster://…`` of the test Redis Cluster over TLS (its CA in
    the URL); fails the test when there is none or its state is not ok."""
    return _cluster_answering("REDIS_CLUSTER_TLS_URL")


def _cluster_answering(variable: str) -> str:
    url = _configured(variable)
    client = read_client(url, socket_timeout=2, socket_connect_timeout=2)
    try:
        states = client.cluster_info(target_nodes="primaries")
        client.ping(target_nodes="primaries")
    except Exception as error:  # noqa: BLE001 - redis' and redis-py cluster's errors alike
        pytest.fail(f"Redis Cluster at {url} did not answer: {error}")
    finally:
        client.close()
    if isinstance(states, dict) and "cluster_state" in states:
        states = {"node": states}
    if len(states) < 3 or any(info.get("cluster_state") != "ok" for info in states.values()):
        pytest.fail(f"Redis Cluster at {url} is not 3 masters with cluster_state:ok: {states}")
    return url


@pytest.fixture(params=["single", "cluster"])
def read_redis_url(request: pytest.FixtureRequest) -> str:
    """The URL of a single Redis (``redis_url``) or of the Redis Cluster
    (``redis_cluster_url``): a test using it runs against both."""
    return request.getfixturevalue("redis_url" if request.param == "single" else "redis_cluster_url")


def read_client(url: str, **options):  # noqa: ANN201 - redis.Redis or the cluster client
    """A redis-py client of ``url`` (``redis://`` or ``redis+cluster://``), as the product makes it."""
    from recurrence_ledger.read.connect import redis_client

    return redis_client(url, **options)


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[Callable[[], RedisServer]]:
    """``make()``: a new, not yet started :class:`RedisServer`; every one
    is let go on (SIGCONT) and stopped after the test."""
    yield from _own_servers(RedisServer, tmp_path, "redis")


# ----------------------------------------------------------------- Schema Registry


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node) -> None:
    """In the xdist controller: give each worker the SCHEMA_REGISTRY_URL
    this plugin took out of the environment before the workers started."""
    node.workerinput["schema_registry_url"] = SCHEMA_REGISTRY_URL


@pytest.fixture(scope="session")
def schema_registry_url(pytestconfig: pytest.Config) -> str:
    """Base URL of the Schema Registry's Confluent API; fails the test when there is none."""
    import httpx

    url = getattr(pytestconfig, "workerinput", {}).get("schema_registry_url", SCHEMA_REGISTRY_URL)
    if not url:
        pytest.fail(f"SCHEMA_REGISTRY_URL is not set: {SET_UP}")
    try:
        httpx.get(f"{url.rstrip('/')}/subjects", timeout=SERVICE_TIMEOUT_S).raise_for_status()
    except httpx.HTTPError as error:
        pytest.fail(f"Schema Registry at {url} did not answer GET /subjects: {error}")
    return url


class RegistrySubjects:
    """Subjects of one test on the real Schema Registry: ``client`` (a
    ``SchemaRegistryClient``) and :meth:`subject`, the value subject of a
    record under the test's own prefix; every subject named is deleted
    (soft, then permanently) after the test."""

    def __init__(self, url: str, prefix: str):
        from confluent_kafka.schema_registry import SchemaRegistryClient

        self.client = SchemaRegistryClient({"url": url})
        self.prefix = prefix
        self.named: list[str] = []

    def subject(self, record: str) -> str:
        """``<prefix><record>-value``, deleted after the test."""
        name = f"{self.prefix}{record}-value"
        if name not in self.named:
            self.named.append(name)
        return name

    def delete(self) -> None:
        """Delete every subject named, soft then permanently (never raises
        for one that was never registered)."""
        from confluent_kafka.schema_registry.error import SchemaRegistryError

        for name in self.named:
            for permanent in (False, True):
                try:
                    self.client.delete_subject(name, permanent=permanent)
                except SchemaRegistryError:
                    pass


@pytest.fixture
def registry_subjects(schema_registry_url: str) -> Iterator[RegistrySubjects]:
    """:class:`RegistrySubjects` under a prefix of this test's own."""
    subjects = RegistrySubjects(schema_registry_url, f"t{uuid4().hex[:8]}.")
    try:
        yield subjects
    finally:
        subjects.delete()


# ----------------------------------------------------------------- Prometheus


@pytest.fixture(scope="session")
def prometheus() -> tuple[str, Path]:
    """``(base URL, targets folder)`` of the test Prometheus; fails the test
    when either is not set, Prometheus is not ready or the folder is missing."""
    import httpx

    url = os.environ.get("PROMETHEUS_URL")
    targets = os.environ.get("RL_PROMETHEUS_TARGETS")
    if not url or not targets:
        pytest.fail(f"PROMETHEUS_URL / RL_PROMETHEUS_TARGETS are not set: {SET_UP}")
    try:
        httpx.get(f"{url}/-/ready", timeout=5).raise_for_status()
    except httpx.HTTPError as error:
        pytest.fail(f"Prometheus at {url} is not ready: {error}")
    if not Path(targets).is_dir():
        pytest.fail(f"the targets folder {targets} does not exist")
    return url.rstrip("/"), Path(targets)


@pytest.fixture(scope="session")
def promtool() -> str:
    """The path of Prometheus's promtool; fails the test without it."""
    path = shutil.which("promtool")
    if path is None:
        pytest.fail("promtool is missing: `bash deploy/ensure-tools.sh` installs Debian's prometheus package")
    return path


# ----------------------------------------------------------------- the browser


@pytest.fixture(scope="session")
def browser() -> str:
    """The node binary that runs the drivers in BROWSER_DIR; fails the test
    when Chromium, playwright-core or node is missing."""
    if not Path(CHROMIUM).is_file():
        pytest.fail(f"{CHROMIUM} is missing: run `bash deploy/ensure-browser.sh`")
    if not (BROWSER_DIR / "node_modules" / "playwright-core").is_dir():
        pytest.fail("playwright-core is not installed in tests/e2e/browser: run `bash deploy/ensure-browser.sh`")
    node = shutil.which("node")
    if node is None:
        pytest.fail("node is not on PATH")
    return node
