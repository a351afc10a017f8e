"""The fixture cases run through run-journal and fed into a Redis view and
its review read models, for the advisory's tests (``POST /advisories`` and
the client library's ``Advisor``)."""

from __future__ import annotations

from pathlib import Path

from recurrence_ledger.catalogue import REVIEW_CANDIDATES, REVIEW_STATUS
from recurrence_ledger.read.connect import redis_client
from recurrence_ledger.read.follower_view import FollowerView
from recurrence_ledger.read.history import ReadModels
from recurrence_ledger.read.keys import default_namespace
from recurrence_ledger.read.records import Located
from tests.conftest import case, read_jsonl
from tests.plugins.processes import run_cli


def ref(artifact_id: str, revision: int = 1) -> dict:
    """An Experience ArtifactRef."""
    return {"family": "experience", "artifact_id": artifact_id, "revision": revision}


#: The packaged example journal (its checkout-web scope has a lesson with an effect, contract §21).
EXAMPLE = Path(__file__).resolve().parents[2] / "processors" / "recurrence_ledger" / "examples" / "openapi_drift.jsonl"


def run_cases(workdir: Path, names: tuple[str, ...]) -> dict[str, Path]:
    """Each fixture case of ``names`` (``"example"``: the packaged example)
    through ``run-journal`` into ``workdir / name``."""
    found = {}
    for name in names:
        journal = EXAMPLE if name == "example" else case(name)[0]
        result = run_cli("run-journal", journal, "--out", workdir / name, "--quiet", "--allow-dead-letters")
        assert result.returncode == 0, result.stdout + result.stderr
        found[name] = workdir / name
    return found


def feed(url: str, prefix: str, out: Path) -> None:
    """The run-journal outputs in ``out`` into the view and the review read models of ``prefix``."""
    view = FollowerView(url, namespace=default_namespace(prefix))
    try:
        view.submit(read_jsonl(out / "recurrence-statistics.jsonl"), revisions=read_jsonl(out / "revision-statistics.jsonl"))
        assert view.pending == 0
    finally:
        view.close()
    client = redis_client(url)
    try:
        records = [Located(REVIEW_CANDIDATES, 0, n, 1_700_000_000_000 + n, value) for n, value in enumerate(read_jsonl(out / "review-candidates.jsonl"))]
        records += [Located(REVIEW_STATUS, 0, n, 1_800_000_000_000 + n, value) for n, value in enumerate(read_jsonl(out / "review-status.jsonl"))]
        ReadModels(client, default_namespace(prefix)).apply(records)
    finally:
        client.close()


def clear(url: str, prefix: str) -> None:
    """Delete the view and read models of ``prefix``."""
    view = FollowerView(url, namespace=default_namespace(prefix))
    view.clear()
    view.close()
    client = redis_client(url)
    try:
        ReadModels(client, default_namespace(prefix)).clear()
    finally:
        client.close()
