"""The long-running commands' log (``settings.configure_logging``): the
worker's own INFO lines are shown, the HTTP libraries' one line per Schema
Registry request is not (httpx, or httpx2 as newer confluent-kafka clients
use it)."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import REPO
from tests.plugins.processes import cli_env

LOG_SOME_LINES = """
import logging
from recurrence_ledger.settings import configure_logging
configure_logging()
for name in ("httpx", "httpcore", "httpx2", "httpcore2"):
    logging.getLogger(name).info("HTTP Request: GET http://registry/subjects 200")
    logging.getLogger(name).warning("%s: the registry is slow", name)
logging.getLogger("recurrence_ledger.worker").info("processed 10 records")
"""


def test_the_http_libraries_log_warnings_only_and_the_worker_its_info_lines():
    result = subprocess.run([sys.executable, "-c", LOG_SOME_LINES], cwd=REPO, env=cli_env({"RL_LOG_LEVEL": "INFO"}),
                            capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    lines = [line.split(" ", 2)[2] for line in result.stderr.splitlines()]
    assert lines == [
        "WARNING httpx: httpx: the registry is slow",
        "WARNING httpcore: httpcore: the registry is slow",
        "WARNING httpx2: httpx2: the registry is slow",
        "WARNING httpcore2: httpcore2: the registry is slow",
        "INFO recurrence_ledger.worker: processed 10 records",
    ]
