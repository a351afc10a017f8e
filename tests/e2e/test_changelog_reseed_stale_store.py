"""``--reseed-changelog`` from a --state-dir store that was closed cleanly
but is *behind* the consumer group's committed offsets (another worker, or
a run without that --state-dir, committed more after it): writing it back
and carrying on from the committed offsets would silently lose every
transaction in between. The worker must refuse (exit 5) and keep the store."""

from __future__ import annotations

import json

from recurrence_ledger.runtime.changelog_guard import CHANGELOG_LOST_EXIT
from recurrence_ledger.workload import generate_journal
from tests.e2e import harness
from tests.e2e.test_changelog_loss import PARTITIONS, WORKLOAD, output_counts, recreate_changelog, run


def test_a_clean_store_behind_the_committed_offsets_is_not_reseeded(topic_prefix, bootstrap, tmp_path):
    prefix, log, stale_dir = topic_prefix, tmp_path / "worker.log", tmp_path / "stale-state"
    lines = [json.dumps(record) + "\n" for record in generate_journal(WORKLOAD)]
    third = len(lines) // 3
    parts = [tmp_path / f"part{index}.jsonl" for index in range(3)]
    for index, part in enumerate(parts):
        part.write_text("".join(lines[index * third: None if index == 2 else (index + 1) * third]))
    harness.prepare(bootstrap, prefix, partitions=PARTITIONS)
    harness.publish(bootstrap, parts[0], prefix)
    # A worker with a --state-dir runs the first third and stops cleanly ...
    assert run(bootstrap, prefix, log, "--state-dir", str(stale_dir)) == 0, log.read_text()[-3000:]
    # ... then the group carries on elsewhere (here: in memory) over the second.
    harness.publish(bootstrap, parts[1], prefix)
    assert run(bootstrap, prefix, log) == 0, log.read_text()[-3000:]
    recreate_changelog(bootstrap, prefix)
    harness.publish(bootstrap, parts[2], prefix)
    counts = output_counts(bootstrap, prefix)
    before = len(log.read_text())
    code = run(bootstrap, prefix, log, "--state-dir", str(stale_dir), "--reseed-changelog")
    text = log.read_text()[before:]
    assert code == CHANGELOG_LOST_EXIT, text[-4000:]
    assert "reseeded" not in text, text[-4000:]
    errors = [line for line in text.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "--reseed-changelog cannot reseed it" in errors[0] and "behind the committed state" in errors[0], text[-4000:]
    assert output_counts(bootstrap, prefix) == counts
