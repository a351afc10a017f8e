"""contract §21.5 on the real broker: a partition's state records the
holdout policy (a digest of the salt, and the rate) it was built under, and
a worker or replay under another one refuses to start, naming both, unless
run with --accept-holdout-change — outcomes before and after a change of
salt or rate are assigned to the arms differently, so no effect would
measure one policy."""

from __future__ import annotations

import functools

import orjson
import pytest

from recurrence_ledger import catalogue
from recurrence_ledger.runtime.unicode_pin import HOLDOUT_CHANGELOG_KEY, recorded_versions
from tests.conftest import case
from tests.e2e import harness
from tests.plugins.processes import run_cli

APP_ID = "ledger"  # harness.start_worker's default
POLICY_A = ("--holdout-salt", "salt-a", "--holdout-rate", "1/4")
POLICY_B = ("--holdout-salt", "salt-b", "--holdout-rate", "1/4")

cli = functools.partial(run_cli, columns=400)


@pytest.mark.slow
def test_a_worker_or_replay_under_another_holdout_policy_refuses_to_start(topic_prefix, bootstrap, tmp_path):
    journal, _ = case("holdout_rules")
    changelog = catalogue.physical(catalogue.changelog_name(APP_ID), topic_prefix)
    harness.prepare(bootstrap, topic_prefix, partitions=2)
    harness.publish(bootstrap, journal, topic_prefix)
    harness.run_to_idle(bootstrap, topic_prefix, tmp_path / "worker.log", extra=POLICY_A)
    recorded = recorded_versions(bootstrap, changelog, key=HOLDOUT_CHANGELOG_KEY)
    values = list(recorded.values())
    assert values and all(value == values[0] for value in values) and values[0]["rate"] == "1/4" and len(values[0]["salt_sha256"]) == 16
    assert "salt-a" not in orjson.dumps(values).decode()  # a digest, not the salt
    outputs = {topic: harness.count_records(bootstrap, harness.physical(topic_prefix, topic)) for topic in harness.LEDGER_TOPICS}

    for policy in (POLICY_B, ()):  # another salt; the policy dropped (every pair would be unverified)
        refused = tmp_path / "refused.log"
        worker = harness.start_worker(bootstrap, topic_prefix, refused, extra=policy)
        assert harness.wait_exit(worker, 120, refused) == 2, refused.read_text()[-3000:]
        text = " ".join(refused.read_text().split())
        assert "refusing to start" in text and "holdout rate 1/4 with a salt whose sha256 begins" in text and "--accept-holdout-change" in text
        result = cli("replay", "--from", "earliest", "--bootstrap", bootstrap, "--topic-prefix", topic_prefix, "--app-id", APP_ID, *policy)
        assert result.returncode == 2, result.stdout + result.stderr
        assert "--accept-holdout-change" in " ".join(result.stdout.split())
    assert {topic: harness.count_records(bootstrap, harness.physical(topic_prefix, topic)) for topic in harness.LEDGER_TOPICS} == outputs

    # The recorded policy starts as before; accepting B records it, and B then starts without the flag.
    harness.run_to_idle(bootstrap, topic_prefix, tmp_path / "a-again.log", extra=POLICY_A)
    log = tmp_path / "accepted.log"
    harness.publish(bootstrap, journal, topic_prefix)  # something to process (duplicates: no new outputs), so a transaction records the pin
    harness.run_to_idle(bootstrap, topic_prefix, log, extra=(*POLICY_B, "--accept-holdout-change"))
    assert "accepted (--accept-holdout-change), recording it" in log.read_text()
    assert recorded_versions(bootstrap, changelog, key=HOLDOUT_CHANGELOG_KEY) != recorded
    harness.run_to_idle(bootstrap, topic_prefix, tmp_path / "b.log", extra=POLICY_B)
    result = cli("replay", "--from", "earliest", "--dry-run", "--bootstrap", bootstrap, "--topic-prefix", topic_prefix, "--app-id", APP_ID, *POLICY_B)
    assert result.returncode == 0, result.stdout + result.stderr
