"""The worker with ``--state-dir`` (RocksDB partition stores) on the real
broker: a restart restores only the changelog's tail; SIGKILL between the
Kafka commit and the local checkpoint, and while restoring; a store of
another partition copied in place, a corrupt one, a missing one, a
recreated changelog topic; a full disk under the state dir; a rebalance
that revokes and re-assigns partitions. Each run must end with outputs
identical to run-journal's (exactly once) and with the local stores equal
to the state the changelog holds — never wrong or lost state."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from recurrence_ledger.store.rocksdb import open_store, partition_path
from recurrence_ledger.kafka.kafka_admin import admin_client, topic_identity
from recurrence_ledger.workload import Workload
from tests.e2e import harness

WORKLOAD = Workload(scopes=8, outcomes_per_scope=150, heads_per_scope=4, handoffs=2, seed=13, candidates=0.2)
SLOW = ("--max-batch", "40")
PARTITIONS = 4


@pytest.fixture(scope="module")
def journals(tmp_path_factory):
    """The whole journal, and its two halves (published one after the other)."""
    return harness.halved_journal(WORKLOAD, tmp_path_factory.mktemp("rocks"))


@pytest.fixture(scope="module")
def reference(journals, tmp_path_factory):
    return harness.embedded(journals[0], tmp_path_factory.mktemp("reference"))


def start(bootstrap, prefix, log, state_dir, *, fault=None, instance="w1", idle_exit=4.0):
    return harness.start_worker(bootstrap, prefix, log, instance=instance, idle_exit=idle_exit, fault=fault,
                                extra=(*SLOW, "--state-dir", str(state_dir)))


def run_to_idle(bootstrap, prefix, log, state_dir, **options):
    worker = start(bootstrap, prefix, log, state_dir, **options)
    assert harness.wait_exit(worker, 180, log) == 0, log.read_text()[-4000:]


def test_a_restart_restores_only_the_tail_and_keeps_exactly_once(topic_prefix, bootstrap, journals, reference, tmp_path):
    prefix, state_dir, log = topic_prefix, tmp_path / "state", tmp_path / "worker.log"
    harness.prepare(bootstrap, prefix, partitions=PARTITIONS)
    harness.publish(bootstrap, journals[1], prefix)
    run_to_idle(bootstrap, prefix, log, state_dir)
    assert sorted(os.listdir(state_dir / harness.changelog_topic(prefix))) == sorted(
        [str(n) for n in range(PARTITIONS)] + [f"{n}.lock" for n in range(PARTITIONS)])
    first_run = log.read_text()
    assert first_run.count("restoring the whole changelog: no local store") == PARTITIONS
    harness.publish(bootstrap, journals[2], prefix)
    run_to_idle(bootstrap, prefix, log, state_dir)
    second_run = log.read_text()[len(first_run):]
    assert second_run.count("restoring from changelog offset") == PARTITIONS, second_run[-3000:]
    assert "restoring the whole changelog" not in second_run
    harness.assert_exactly_once(bootstrap, prefix, reference, tmp_path / "kafka")
    harness.assert_stores_equal_the_changelog(bootstrap, prefix, state_dir, PARTITIONS)


@pytest.mark.parametrize(
    "faults",
    [
        ["committed:3"],  # the Kafka transaction committed, the local checkpoint not written
        ["stored:3"],  # both written, nothing of the next batch yet
        ["committed:2", "restoring:10"],  # then again while restoring the tail into RocksDB
    ],
    ids=lambda faults: "+".join(f.split(":")[0] for f in faults),
)
def test_sigkill_mid_checkpoint_restores_the_tail_correctly(topic_prefix, faults, bootstrap, journals, reference, tmp_path):
    prefix, state_dir, log = topic_prefix, tmp_path / "state", tmp_path / "worker.log"
    harness.prepare(bootstrap, prefix, partitions=PARTITIONS)
    harness.publish(bootstrap, journals[1], prefix)
    run_to_idle(bootstrap, prefix, log, state_dir)  # local checkpoints exist: the restarts restore tails
    harness.publish(bootstrap, journals[2], prefix)
    for fault in faults:
        crashed = start(bootstrap, prefix, log, state_dir, fault=fault, idle_exit=None)
        assert crashed.wait(timeout=120) == -9, f"{fault} was not reached:\n{log.read_text()[-3000:]}"
    run_to_idle(bootstrap, prefix, log, state_dir)
    assert "fault injection: SIGKILL at" in log.read_text()
    harness.assert_exactly_once(bootstrap, prefix, reference, tmp_path / "kafka")
    harness.assert_stores_equal_the_changelog(bootstrap, prefix, state_dir, PARTITIONS)


def _damage(kind: str, state_dir: Path, topic: str) -> None:
    if kind == "another partition copied in place":
        shutil.rmtree(partition_path(state_dir, topic, 1))
        shutil.copytree(partition_path(state_dir, topic, 2), partition_path(state_dir, topic, 1))
    elif kind == "corrupt":
        (partition_path(state_dir, topic, 1) / "CURRENT").write_bytes(b"\x13garbage")
    elif kind == "missing":
        shutil.rmtree(partition_path(state_dir, topic, 1))
    elif kind == "another deployment's":  # partition 1 of another prefix's changelog, renamed into place
        other = "other." + topic
        shutil.copytree(partition_path(state_dir, topic, 1), partition_path(state_dir, other, 1))
        shutil.rmtree(partition_path(state_dir, topic, 1))
        store = open_store(state_dir, other, 1, "AAAAAAAAAAAAAAAAAAAAAA")  # wiped: now another topic's store
        store[("scope", "not-this-deployment")] = {"heads": []}
        store.flushed(10_000)  # a checkpoint far ahead, and a record the right state does not have
        store.close()
        shutil.copytree(partition_path(state_dir, other, 1), partition_path(state_dir, topic, 1))


@pytest.mark.parametrize("kind", ["another partition copied in place", "corrupt", "missing", "another deployment's"])
def test_a_store_that_cannot_be_trusted_is_restored_from_the_whole_changelog(topic_prefix, kind, bootstrap, journals, reference, tmp_path):
    prefix, state_dir, log = topic_prefix, tmp_path / "state", tmp_path / "worker.log"
    harness.prepare(bootstrap, prefix, partitions=PARTITIONS)
    harness.publish(bootstrap, journals[1], prefix)
    run_to_idle(bootstrap, prefix, log, state_dir)
    _damage(kind, state_dir, harness.changelog_topic(prefix))
    harness.publish(bootstrap, journals[2], prefix)
    before = len(log.read_text())
    run_to_idle(bootstrap, prefix, log, state_dir)
    second_run = log.read_text()[before:]
    wiped = [line for line in second_run.splitlines() if "(restoring the whole changelog" in line]
    assert len(wiped) == 1 and "partition 1: state store" in wiped[0], second_run[-3000:]
    assert second_run.count("restoring from changelog offset") == PARTITIONS - 1
    harness.assert_exactly_once(bootstrap, prefix, reference, tmp_path / "kafka")
    harness.assert_stores_equal_the_changelog(bootstrap, prefix, state_dir, PARTITIONS)


@pytest.mark.slow
def test_a_recreated_changelog_topic_with_the_group_deleted_is_never_tail_restored(topic_prefix, bootstrap, journals, tmp_path):
    """The changelog deleted and created again (empty, a new topic id) and
    the consumer group deleted with it (a deliberate rebuild from the
    beginning; with the group's offsets kept the worker refuses:
    tests/e2e/test_changelog_loss.py): the local stores' identity names the
    old topic, so each is wiped and restored from the new changelog — the
    state is what the changelog holds, not the old files."""
    prefix, state_dir, log = topic_prefix, tmp_path / "state", tmp_path / "worker.log"
    harness.prepare(bootstrap, prefix, partitions=PARTITIONS)
    harness.publish(bootstrap, journals[1], prefix)
    run_to_idle(bootstrap, prefix, log, state_dir)
    topic = harness.changelog_topic(prefix)
    old_id, _ = topic_identity(bootstrap, topic)
    harness.recreate_changelog(bootstrap, prefix, PARTITIONS)
    assert topic_identity(bootstrap, topic)[0] != old_id
    admin = admin_client(bootstrap)

    def delete_group() -> bool:  # the stopped static member stays until its session times out
        try:
            admin.delete_consumer_groups([f"{prefix}ledger"])[f"{prefix}ledger"].result()
        except Exception as error:
            print("delete group:", error)
            return False
        return True

    harness.wait_until(delete_group, 60, "the consumer group's deletion")
    before = len(log.read_text())
    run_to_idle(bootstrap, prefix, log, state_dir)
    second_run = log.read_text()[before:]
    assert second_run.count("(restoring the whole changelog: its topic_id is") == PARTITIONS, second_run[-3000:]
    harness.assert_stores_equal_the_changelog(bootstrap, prefix, state_dir, PARTITIONS)


def test_a_full_disk_under_the_state_dir_stops_the_worker_and_a_restart_restores_correctly(
        topic_prefix, bootstrap, journals, reference, tmp_path):
    """A small tmpfs as the state dir, filled up while the worker waits for
    input: the first checkpoint after the second half is published commits
    in Kafka, then its local write fails — the worker exits 1 naming the
    store and the full disk, and commits nothing more. With space freed, a
    restart restores the tail (the committed transaction included) and ends
    exactly once, its stores equal to the changelog."""
    prefix, state_dir, log = topic_prefix, tmp_path / "state", tmp_path / "worker.log"
    state_dir.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", str(state_dir)], check=True)
    try:
        harness.prepare(bootstrap, prefix, partitions=PARTITIONS)
        harness.publish(bootstrap, journals[1], prefix)
        run_to_idle(bootstrap, prefix, log, state_dir)
        worker = start(bootstrap, prefix, log, state_dir, idle_exit=None)
        before = len(log.read_text())
        # Both stages' stores restored (the scope stage's "partition N restored", the
        # pattern stage's "pattern task N ready") before the disk fills: the write that
        # fails must be the checkpoint's, never a restore's.
        harness.wait_until(lambda: log.read_text()[before:].count(" restored: ") == PARTITIONS
                           and len(re.findall(r"pattern task \d+ ready: ", log.read_text()[before:])) == PARTITIONS, 60, "the stores' restore")
        filler = state_dir / "filler"
        with open(filler, "wb") as handle:
            try:
                while True:
                    handle.write(b"\0" * 65536)
                    handle.flush()
            except OSError as error:
                assert error.errno == 28  # ENOSPC
        harness.publish(bootstrap, journals[2], prefix)
        assert harness.wait_exit(worker, 120, log) == 1, log.read_text()[-3000:]
        failed = log.read_text()[before:]
        assert "No space left on device" in failed and "checkpoint write failed" in failed, failed[-3000:]
        assert failed.count("checkpoint write failed") == 1  # nothing committed after it
        filler.unlink()
        before = len(log.read_text())
        run_to_idle(bootstrap, prefix, log, state_dir)
        assert log.read_text()[before:].count("restoring from changelog offset") == PARTITIONS
        harness.assert_exactly_once(bootstrap, prefix, reference, tmp_path / "kafka")
        harness.assert_stores_equal_the_changelog(bootstrap, prefix, state_dir, PARTITIONS)
    finally:
        subprocess.run(["umount", "-l", str(state_dir)], check=False)


@pytest.mark.parametrize("shared", [True, False], ids=["one state dir", "a state dir each"])
def test_a_rebalance_closes_revoked_stores_and_tail_restores_reassigned_ones(topic_prefix, shared, bootstrap, journals, reference, tmp_path):
    """A second worker joins mid-run and leaves (SIGTERM): the first's
    revoked stores are closed with their checkpoint current (with one
    state dir the second opens the same directories, which only works once
    they are closed and unlocked), and the re-assigned ones are reopened
    and restore the tail the second worker wrote."""
    prefix, log1, log2 = topic_prefix, tmp_path / "w1.log", tmp_path / "w2.log"
    dir1 = tmp_path / "state"
    dir2 = dir1 if shared else tmp_path / "state2"
    harness.prepare(bootstrap, prefix, partitions=PARTITIONS)
    harness.publish(bootstrap, journals[1], prefix)
    run_to_idle(bootstrap, prefix, log1, dir1)
    harness.publish(bootstrap, journals[2], prefix)
    first = start(bootstrap, prefix, log1, dir1, instance="w1", idle_exit=8)
    before = len(log1.read_text())
    second = harness.start_worker(bootstrap, prefix, log2, instance="w2", idle_exit=None,
                                  extra=("--max-batch", "5", "--state-dir", str(dir2), "--dynamic-membership"))
    harness.wait_until(lambda: " restored: " in log2.read_text(), 60, "the second worker's restore")
    time.sleep(1.0)
    second.terminate()
    assert second.wait(timeout=60) == 0, log2.read_text()[-3000:]
    assert harness.wait_exit(first, 180, log1) == 0, log1.read_text()[-3000:]
    run1, run2 = log1.read_text()[before:], log2.read_text()
    assert "revoked partitions" in run1 and run1.count("assigned partitions") >= 2
    assert "locked by another worker" not in run1 + run2
    if shared:  # the second took over the first's directories: tails only, never a whole changelog
        assert "(restoring the whole changelog" not in run1 + run2, run2[-3000:]
    harness.assert_exactly_once(bootstrap, prefix, reference, tmp_path / "kafka")
    harness.assert_stores_equal_the_changelog(bootstrap, prefix, dir1, PARTITIONS)
