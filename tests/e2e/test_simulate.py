"""``recurrence-ledger simulate`` against the real broker: a bounded run
(600 events, as fast as the producer takes them) through the client
library's Publisher, consulting the advisory of a real ``serve`` process;
every event reaches ``source-journal``, a worker dead-letters none of them,
and its statistics equal run-journal's on the same seed's events."""

from __future__ import annotations

from recurrence_ledger import catalogue
from tests.e2e import harness
from tests.e2e.api_server import serve_cli, stop_process
from tests.e2e.simulation_fixtures import simulated_reference
from tests.plugins.processes import run_cli

EVENTS = 600


def test_simulate_publishes_events_the_worker_accepts_whole(bootstrap, redis_url, topic_prefix, tmp_path):
    harness.prepare(bootstrap, topic_prefix, 2)
    serve, url = serve_cli(["--redis-url", redis_url, "--topic-prefix", topic_prefix], {}, tmp_path / "serve.log")
    try:
        result = run_cli("simulate", "--events", EVENTS, "--rate", "max", "--seed", 11, "--bootstrap", bootstrap, "--topic-prefix", topic_prefix,
                         "--serve-url", url, columns=200)
    finally:
        stop_process(serve)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"published {EVENTS} events" in result.stdout
    said = " ".join(result.stdout.split())
    assert f"on {harness.physical(topic_prefix, catalogue.SOURCE_JOURNAL)}, by kind: " in said, said  # where they went
    assert "recall ranking with the advisory of" in result.stdout  # the view is empty: every lesson unknown to it
    assert "most lessons were unknown to the ledger yet: the advisory reads the view" in said and "lower --rate" in said
    assert harness.count_records(bootstrap, harness.physical(topic_prefix, catalogue.SOURCE_JOURNAL)) == EVENTS
    harness.run_to_idle(bootstrap, topic_prefix, tmp_path / "worker.log")
    kafka = harness.exported(bootstrap, topic_prefix, tmp_path / "kafka")
    assert harness.lines(kafka["dead-letter"]) == []
    reference = simulated_reference(11, EVENTS, tmp_path)
    assert harness.last_statistics(kafka["recurrence-statistics"]) == harness.last_statistics(reference["recurrence-statistics"])
    assert sorted(harness.last_statistics(kafka["recurrence-statistics"])) == [
        "sim11-billing-api", "sim11-checkout-web", "sim11-mobile-sync", "sim11-search-indexer"]
