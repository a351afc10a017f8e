"""``--metrics-port`` that cannot be served refuses to start (exit 2, one
line; docs/kafka.md, exit codes) before anything connects — instead of a
traceback from the HTTP server deep in the run — for the worker, its
supervisor, the view follower and ``serve``; a port out of range is a
usage error."""

from __future__ import annotations

import socket

import pytest

from tests.plugins.processes import run_cli

#: Nothing answers there: the commands must refuse before they connect.
NOWHERE = {"KAFKA_BOOTSTRAP_SERVERS": "127.0.0.1:1", "REDIS_URL": "redis://127.0.0.1:1/0"}


@pytest.mark.parametrize("command", [("worker",), ("worker", "--processes", "2"), ("view", "follow"), ("serve",)])
def test_a_metrics_port_in_use_refuses_to_start_with_one_line(command):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run_cli(*command, "--metrics-port", port, env=NOWHERE, timeout=60)
    assert result.returncode == 2, result.stdout + result.stderr
    said = " ".join((result.stdout + result.stderr).split())
    assert f"refusing to start: cannot serve metrics on 127.0.0.1:{port}: Address already in use" in said
    assert "Traceback" not in said


def test_a_metrics_port_out_of_range_is_a_usage_error():
    result = run_cli("worker", "--metrics-port", 99999, env=NOWHERE, timeout=60)
    assert result.returncode == 2 and "--metrics-port" in result.stderr and "Traceback" not in result.stderr


def test_an_ipv6_metrics_host_is_probed_in_its_own_family():
    """The probe binds as prometheus-client's server does, in the address
    family of the host: a taken port on ::1 is refused for being taken, not
    for its family (an IPv4 probe of ::1 refused every IPv6 host)."""
    with socket.socket(socket.AF_INET6) as taken:
        taken.bind(("::1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run_cli("view", "follow", "--metrics-host", "::1", "--metrics-port", port, env=NOWHERE, timeout=60)
    assert result.returncode == 2, result.stdout + result.stderr
    assert f"refusing to start: cannot serve metrics on ::1:{port}: Address already in use" in " ".join((result.stdout + result.stderr).split())


def test_a_metrics_host_that_does_not_resolve_refuses_to_start():
    result = run_cli("worker", "--metrics-host", "no-such-host.invalid", "--metrics-port", 9, env=NOWHERE, timeout=60)
    assert result.returncode == 2 and "cannot serve metrics on no-such-host.invalid:9" in " ".join((result.stdout + result.stderr).split())


def test_serve_on_a_port_in_use_refuses_to_start_with_one_line():
    """Not "serving http://…" followed by uvicorn's error and exit 3."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run_cli("serve", "--port", port, env=NOWHERE, timeout=60)
    said = " ".join((result.stdout + result.stderr).split())
    assert result.returncode == 2, said
    assert f"refusing to start: cannot serve the API on 127.0.0.1:{port}: Address already in use" in said
    assert "serving http" not in said and "Traceback" not in said
