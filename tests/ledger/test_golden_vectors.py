"""Golden vectors pinning the bytes of normalize(), canonical JSON,
item_digest, match_digest and observation_id (contract §4, §6, §7).

Preimages (documented in tests/ledger/golden_vectors.json):
- item_digest: canonical JSON of the TaskCheck / WorkClaim with every field
  of the validated item (``details: null`` included);
- match_digest: canonical JSON of the RecurrenceMatch without match_digest
  (for a scope_heads match, rev. 2: with ``candidate_refs: null`` and the
  set's candidate_set_digest, never the list);
- candidate_set_digest: canonical JSON of the sorted candidate_refs list,
  the same for a set inline in a match and a CandidateSet record;
- observation_id: canonical JSON of the RecurrenceObservation without
  observation_id.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from recurrence_ledger.embedded import run_journal
from recurrence_ledger.ledger.normalize import canonical_json, digest, normalize
from tests.conftest import case, read_outputs

VECTORS = json.loads((Path(__file__).parent / "golden_vectors.json").read_text(encoding="utf-8"))


def sha256_of(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


@pytest.mark.parametrize(("text", "expected"), VECTORS["normalize"])
def test_normalize(text, expected):
    assert normalize(text) == expected


@pytest.mark.parametrize("vector", VECTORS["canonical_json"])
def test_canonical_json(vector):
    assert canonical_json(vector["value"]) == vector["preimage"].encode("utf-8")


def test_canonical_json_rejects_lone_surrogates():
    with pytest.raises(ValueError):
        canonical_json({"x": "\ud800"})


def test_item_digest():
    vector = VECTORS["item_digest"]
    assert canonical_json(vector["value"]).decode() == vector["preimage"]
    assert digest(vector["value"]) == vector["digest"] == sha256_of(vector["preimage"])


@pytest.fixture(scope="module")
def minimum_case_outputs(tmp_path_factory):
    journal, _ = case("minimum_case")
    out = tmp_path_factory.mktemp("minimum")
    run_journal(journal, out, show_progress=False, validate_outputs=True)
    return read_outputs(out)


def test_match_digest(minimum_case_outputs):
    vector = VECTORS["match_digest"]
    record = next(m for m in minimum_case_outputs["recurrence-matches"] if m["task_outcome_ref"]["source_id"] == "job-recur")
    assert record == vector["record"]
    assert record["failure_ref"]["item_digest"] == VECTORS["item_digest"]["digest"]
    without = {k: v for k, v in record.items() if k != "match_digest"}
    assert canonical_json(without).decode() == vector["preimage"]
    assert record["match_digest"] == sha256_of(vector["preimage"]) == vector["digest"]


@pytest.mark.parametrize("name", ["observation_id_avoided", "observation_id_recurred"])
def test_observation_id(minimum_case_outputs, name):
    vector = VECTORS[name]
    record = next(o for o in minimum_case_outputs["recurrence-observations"] if o["observation_id"] == vector["digest"])
    assert record == vector["record"]
    without = {k: v for k, v in record.items() if k != "observation_id"}
    assert canonical_json(without).decode() == vector["preimage"]
    assert sha256_of(vector["preimage"]) == vector["digest"]


def test_scope_heads_match_digest_covers_the_set_digest_not_the_list(minimum_case_outputs):
    vector = VECTORS["match_digest_scope_heads"]
    record = next(m for m in minimum_case_outputs["recurrence-matches"] if m["task_outcome_ref"]["source_id"] == "job-unlinked")
    assert record == vector["record"]
    assert record["candidate_refs"] is None
    without = {k: v for k, v in record.items() if k != "match_digest"}
    assert canonical_json(without).decode() == vector["preimage"]
    assert record["match_digest"] == sha256_of(vector["preimage"]) == vector["digest"]


def test_candidate_set_digest_and_record(minimum_case_outputs):
    from recurrence_ledger.ledger.matching import candidate_set_key

    vector = VECTORS["candidate_set"]
    [record] = minimum_case_outputs["candidate-sets"]
    assert record == vector["record"]
    assert canonical_json(record["candidate_refs"]).decode() == vector["preimage"]
    assert record["candidate_set_digest"] == sha256_of(vector["preimage"]) == vector["digest"]
    assert candidate_set_key(record["scope_id"], record["candidate_set_digest"]) == vector["key"]
    # The handoff_citations vector's inline set digests the same way.
    inline = VECTORS["match_digest"]["record"]
    assert inline["candidate_set_digest"] == sha256_of(canonical_json(inline["candidate_refs"]).decode())
