"""``worker --processes 2``: one supervisor, two worker processes in one
consumer group (instance ids ``<id>-0``, ``<id>-1``). A worker process
SIGKILLed mid-run is started again by the supervisor, and the outputs are
still exactly once against ``run-journal`` (no missing, extra or re-sent
fact); one metrics endpoint serves both processes (a ``process`` label);
SIGTERM stops them all."""

from __future__ import annotations

import os
import re
import signal
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

from recurrence_ledger.workload import Workload, generate_journal
from tests.e2e import harness
from tests.journal import write_journal
from tests.plugins.processes import free_port

PARTITIONS = 6
WORKLOAD = Workload(scopes=30, outcomes_per_scope=50, heads_per_scope=4, handoffs=2, seed=43, candidates=0.2)
#: Many small transactions, so the kill lands between committed ones.
OPTIONS = ("--max-batch", "40", "--session-timeout-ms", "6000", "--processes", "2")


def started_pids(log: str) -> dict[int, list[int]]:
    """Worker process number → the pids the supervisor started it as, in order."""
    pids: dict[int, list[int]] = {}
    for number, pid in re.findall(r"worker process (\d+) \(instance [^)]*\) started: pid (\d+)", log):
        pids.setdefault(int(number), []).append(int(pid))
    return pids


def scrape(port: int) -> dict[tuple, float]:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    return {(sample.name, tuple(sorted(sample.labels.items()))): sample.value
            for family in text_string_to_metric_families(text) for sample in family.samples}


def test_two_worker_processes_with_one_killed_stay_exactly_once_and_share_one_metrics_endpoint(topic_prefix, bootstrap, tmp_path):
    journal = write_journal(tmp_path / "journal.jsonl", generate_journal(WORKLOAD))
    prefix = topic_prefix
    harness.prepare(bootstrap, prefix, partitions=PARTITIONS)
    harness.publish(bootstrap, journal, prefix)
    reference = harness.embedded(journal, tmp_path / "embedded")
    total = len(harness.lines(reference["recurrence-observations"]))
    port = free_port()
    log = tmp_path / "supervisor.log"
    supervisor = harness.start_worker(bootstrap, prefix, log, instance="sup", idle_exit=6, extra=(*OPTIONS, "--metrics-port", str(port)))
    observations = harness.physical(prefix, "recurrence-observations")
    harness.wait_until(lambda: set(started_pids(log.read_text())) == {0, 1}, 90, "two worker processes")
    counts: list[int] = []

    def progressed() -> bool:
        counts.append(harness.count_records(bootstrap, observations))
        return counts[-1] > total // 10

    harness.wait_until(progressed, 120, "a tenth of the outputs")
    samples = scrape(port)
    processes = {dict(labels).get("process") for (name, labels) in samples if name == "recurrence_ledger_records_total"}
    assert supervisor.poll() is None and counts[-1] < total, "the run ended before the kill"
    os.kill(started_pids(log.read_text())[1][0], signal.SIGKILL)
    harness.wait_until(lambda: len(started_pids(log.read_text())[1]) == 2, 60, "worker process 1 started again")
    assert harness.wait_exit(supervisor, 300, log) == 0

    text = log.read_text()
    assert "worker process 1 exited on signal 9: restarting it" in text, text[-3000:]
    assert re.search(r"instance sup-0\b", text) and re.search(r"instance sup-1\b", text)
    assert processes <= {"0", "1"} and processes, samples  # every series names its process
    harness.wait_transactions_settled(bootstrap, prefix, PARTITIONS)
    harness.assert_exactly_once(bootstrap, prefix, reference, tmp_path / "kafka")


def test_sigterm_stops_every_worker_process(topic_prefix, bootstrap, tmp_path):
    journal = write_journal(tmp_path / "journal.jsonl", generate_journal(Workload(scopes=4, outcomes_per_scope=20, heads_per_scope=2,
                                                                                   handoffs=1, seed=3)))
    prefix = topic_prefix
    harness.prepare(bootstrap, prefix, partitions=2)
    harness.publish(bootstrap, journal, prefix)
    log = tmp_path / "supervisor.log"
    supervisor = harness.start_worker(bootstrap, prefix, log, instance="sup", idle_exit=None, extra=("--processes", "2"))
    # The two processes share the supervisor's stderr: each line names its process.
    harness.wait_until(lambda: set(re.findall(r"recurrence_ledger.worker \[process (\d)\]: assigned partitions", log.read_text())) == {"0", "1"},
                       90, "both worker processes assigned")
    supervisor.send_signal(signal.SIGTERM)
    assert harness.wait_exit(supervisor, 60, log) == 0
    pids = [pid for started in started_pids(log.read_text()).values() for pid in started]
    assert len(pids) == 2 and "restarting" not in log.read_text()
    for pid in pids:  # no worker process outlives its supervisor
        assert not os.path.exists(f"/proc/{pid}") or open(f"/proc/{pid}/stat").read().split()[2] == "Z"
