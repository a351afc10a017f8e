"""The read models applied through an online Redis Cluster reshard
(processors/recurrence_ledger/read/scripts.py ``run_cluster_calls``): one
slot is migrated for real (CLUSTER SETSLOT … MIGRATING / IMPORTING, then
MIGRATE of its keys, then SETSLOT … NODE) while a batch over four scopes is
applied. With the slot's keys split between two nodes, the scopes of the
other slots are applied at once and the migrating scope's calls wait —
nothing runs on the importing node beside keys not moved yet —; once the
migration ends they run on the new owner, and nothing is lost: the
migrating scope holds both observations, applied once."""

from __future__ import annotations

import threading
import time

import redis

from recurrence_ledger.read.history import ReadModels
from recurrence_ledger.read.keys import Keys, default_namespace
from recurrence_ledger.read.projection import RedisView
from tests.e2e import harness
from tests.e2e.test_cluster import observation
from tests.plugins.services import read_client


class SlotMigration:
    """One slot of the cluster moved from its owner to another primary, by
    hand, as ``redis-cli --cluster reshard`` does it."""

    def __init__(self, cluster: redis.RedisCluster, slot: int):
        self.slot = slot
        self.nodes = {node.name: redis.Redis(host=node.host, port=node.port, decode_responses=True) for node in cluster.get_primaries()}
        self.ids = {name: node.cluster("myid") for name, node in self.nodes.items()}
        self.source = cluster.nodes_manager.get_node_from_slot(slot).name
        self.target = sorted(name for name in self.nodes if name != self.source)[0]
        self.started = self.finished = False

    def start(self, keys_to_move: int) -> None:
        """Mark the slot migrating and move its first ``keys_to_move`` keys."""
        source, target = self.nodes[self.source], self.nodes[self.target]
        target.execute_command("CLUSTER", "SETSLOT", self.slot, "IMPORTING", self.ids[self.source])
        source.execute_command("CLUSTER", "SETSLOT", self.slot, "MIGRATING", self.ids[self.target])
        self.started = True
        self._move(sorted(source.execute_command("CLUSTER", "GETKEYSINSLOT", self.slot, 10_000))[:keys_to_move])

    def _move(self, names: list[str], replace: bool = False) -> None:
        if names:
            host, port = self.target.rsplit(":", 1)
            self.nodes[self.source].execute_command("MIGRATE", host, int(port), "", 0, 10_000, *(["REPLACE"] if replace else []), "KEYS", *names)

    def finish(self, replace: bool = False) -> None:
        """Move the slot's other keys (with ``replace``, over a key of the
        same name the target holds: a test that failed leaves the cluster
        whole) and give the slot to the target on every primary."""
        if not self.started or self.finished:
            return
        self._move(self.nodes[self.source].execute_command("CLUSTER", "GETKEYSINSLOT", self.slot, 10_000), replace)
        self.finished = True
        for name in (self.target, self.source, *[name for name in self.nodes if name not in (self.source, self.target)]):
            self.nodes[name].execute_command("CLUSTER", "SETSLOT", self.slot, "NODE", self.ids[self.target])

    def close(self) -> None:
        for node in self.nodes.values():
            node.close()


def test_a_slot_migrated_under_a_batch_holds_back_only_its_own_scope_and_loses_nothing(redis_cluster_url):
    client = read_client(redis_cluster_url, decode_responses=True)
    keys = Keys(default_namespace(harness.new_prefix()))
    moving = f"moving-{keys.namespace.replace(':', '-')}"
    scopes = ["a1", "b2", "c3", moving]
    models = ReadModels(client, keys.namespace)
    migration = None
    try:
        assert models.apply([observation(scope, n, n + 1, "selected") for n, scope in enumerate(scopes)]).observations == 4
        migration = SlotMigration(client, client.keyslot(keys.scope(moving)))
        assert all(client.keyslot(keys.scope(scope)) != migration.slot for scope in scopes[:3])
        migration.start(keys_to_move=1)  # the slot's keys are now split between two nodes
        second = [observation(scope, n + 4, n + 10, "selected") for n, scope in enumerate(scopes)]
        applied = []
        worker = threading.Thread(target=lambda: applied.append(models.apply(second)), daemon=True)
        worker.start()

        def positions(scope: str) -> list[float]:
            return [score for _, score in client.zrange(keys.history(scope, "P1", 1), 0, -1, withscores=True)]

        # The other slots' scopes are applied while the slot migrates.
        deadline = time.monotonic() + 60
        while [positions(scope) for scope in scopes[:3]] != [[1.0, 10.0], [2.0, 11.0], [3.0, 12.0]]:
            assert time.monotonic() < deadline, [positions(scope) for scope in scopes[:3]]
            time.sleep(0.05)
        assert worker.is_alive() and applied == []  # the migrating scope waits for its slot: it cannot be applied before finish()

        migration.finish()
        worker.join(timeout=120)
        assert not worker.is_alive()
        [counts] = applied
        assert counts.observations == 4
        # Nothing lost, nothing twice: the migrating scope holds both observations, on the slot's new owner.
        assert positions(moving) == [4.0, 13.0]
        assert models.apply(second).observations == 0
    finally:
        if migration is not None:
            migration.finish(replace=True)
            migration.close()
        RedisView(redis_cluster_url, namespace=keys.namespace).clear()
        client.close()
