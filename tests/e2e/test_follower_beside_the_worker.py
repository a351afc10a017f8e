"""The worker's in-process view follower on the real broker: a short batch
run leaves Redis holding the final views; a Redis stopped mid-run neither
stops nor slows the ledger."""

from __future__ import annotations

import time

import pytest

from tests.e2e.test_parked_records import _start, broker_journal  # noqa: F401 - broker_journal is a fixture


def _assert_redis_holds(redis_url, prefix, kafka) -> None:
    from recurrence_ledger.read.projection import RedisView
    from recurrence_ledger.read.keys import default_namespace
    from tests.e2e import harness

    view = RedisView(redis_url, namespace=default_namespace(prefix))
    try:
        wrong = {scope: (view.read(scope), record) for scope, record in harness.last_statistics(kafka["recurrence-statistics"]).items()
                 if view.read(scope) != record}
    finally:
        view.close()
    assert not wrong, f"{len(wrong)} scope(s) behind in Redis: {sorted(wrong)}"


@pytest.mark.parametrize("idle_exit", [0.2, 1.0])
def test_after_a_short_batch_run_redis_holds_the_final_views(idle_exit, topic_prefix, bootstrap, redis_url, broker_journal, tmp_path):
    """A batch run that exits soon after its last commit: the follower
    thread, drained on exit, must have applied every committed view record
    (it may have joined its group late, or be between two polls)."""
    from tests.e2e import harness

    harness.prepare(bootstrap, topic_prefix, partitions=3)
    harness.publish(bootstrap, broker_journal, topic_prefix)
    log = tmp_path / "worker.log"
    try:
        worker = _start(bootstrap, topic_prefix, log, idle_exit=idle_exit, redis_url=redis_url, extra=())
        assert harness.wait_exit(worker, 60, log) == 0
        kafka = harness.exported(bootstrap, topic_prefix, tmp_path / "kafka")
        _assert_redis_holds(redis_url, topic_prefix, kafka)
    finally:
        harness.remove_prefix(bootstrap, topic_prefix, redis_url)


@pytest.mark.serial  # times the ledger and the exit: nothing else may load the machine meanwhile
def test_redis_stopped_mid_run_neither_stops_nor_slows_the_ledger(topic_prefix, bootstrap, redis_server, broker_journal, tmp_path):
    """A Redis of this test's own (never the shared one) goes down after the
    follower wrote the first half's views; the second half is published
    then. The ledger must process it as fast as with Redis up, exactly
    once, and the batch run must exit 0 — without waiting long on a Redis
    that is gone.

    Observed: the ledger completes 0.4 s after the publish, exit code 0,
    but the process exits ~68 s later: run_worker (processors/recurrence_ledger/runtime/
    worker.py:758-762) joins the follower for FOLLOWER_DRAIN_S (then 60 s)
    although the follower is in its Redis back-off and cannot progress.
    Fix: give up the drain at once (or after a few seconds) while
    ``follower.redis_ok`` is False."""
    from recurrence_ledger.read.projection import RedisView
    from recurrence_ledger.read.keys import default_namespace
    from tests.e2e import harness

    server = redis_server()  # stopped by the fixture, whatever happens
    redis_url = server.url
    lines = broker_journal.read_text().splitlines(keepends=True)
    first, second = tmp_path / "first.jsonl", tmp_path / "second.jsonl"
    first.write_text("".join(lines[: len(lines) // 2]))
    second.write_text("".join(lines[len(lines) // 2 :]))
    server.start()
    harness.prepare(bootstrap, topic_prefix, partitions=3)
    harness.publish(bootstrap, first, topic_prefix)
    log = tmp_path / "worker.log"
    worker = _start(bootstrap, topic_prefix, log, redis_url=redis_url, idle_exit=8)
    view = RedisView(redis_url, namespace=default_namespace(topic_prefix))
    harness.wait_until(lambda: view.read("scope-00000") is not None, 30, "the follower's first views")
    view.close()
    server.stop()
    harness.publish(bootstrap, second, topic_prefix)
    published = time.monotonic()
    reference = harness.embedded(broker_journal, tmp_path / "reference")
    observations = harness.physical(topic_prefix, "recurrence-observations")
    want = len(harness.lines(reference["recurrence-observations"]))
    harness.wait_until(lambda: harness.count_records(bootstrap, observations) >= want, 30, "the ledger's outputs with Redis down")
    caught_up = time.monotonic() - published
    code = worker.wait(timeout=120)
    exited = time.monotonic() - published
    print(f"ledger complete {caught_up:.1f} s after the second half was published, worker exited after {exited:.1f} s; "
          f"log tail:\n{log.read_text()[-1200:]}")
    assert code == 0
    harness.assert_exactly_once(bootstrap, topic_prefix, reference, tmp_path / "kafka")
    assert caught_up < 15
    assert exited - caught_up < 30, f"the batch run exited {exited - caught_up:.0f} s after its ledger was complete (Redis down)"
