"""The reference of a ``recurrence-ledger simulate`` run: the same seed's
first N events of :class:`SimulatedPlatform` (the stream does not depend on
what the advisory answers) written as a journal and run through the embedded
runner (contract §10), for the tests that run ``simulate`` against the real
services and compare the worker's outputs with it."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

from recurrence_ledger.client.events import kind_of
from recurrence_ledger.client.simulation import SimulatedPlatform
from tests.e2e import harness


def simulated_journal(seed: int, events: int, path: Path) -> Path:
    """Write the first ``events`` events of ``SimulatedPlatform(seed=seed)``
    (its default scopes and lessons, no holdout) to ``path`` as a journal
    (JSON Lines of ``{"topic", "value"}``); returns ``path``."""
    path.write_text("".join(json.dumps({"topic": kind_of(value), "value": value.model_dump(mode="json")}) + "\n"
                            for value in itertools.islice(SimulatedPlatform(seed=seed).events(), events)))
    return path


def last_positions(seed: int, events: int) -> dict[str, int]:
    """scope_id -> the highest journal position among the first ``events``
    events of ``seed`` (where a worker that has taken them all stands)."""
    positions: dict[str, int] = {}
    for value in itertools.islice(SimulatedPlatform(seed=seed).events(), events):
        positions[value.scope_id] = max(positions.get(value.scope_id, 0), value.journal_position)
    return positions


def simulated_reference(seed: int, events: int, workdir: Path) -> dict[str, bytes]:
    """run-journal's outputs (per output topic, as file bytes) on the first
    ``events`` events of ``seed``: the journal ``workdir / "sim.jsonl"``, the
    outputs under ``workdir / "embedded"``."""
    journal = simulated_journal(seed, events, workdir / "sim.jsonl")
    return harness.embedded(journal, workdir / "embedded")
