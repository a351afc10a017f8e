"""Contract revision 4 changes no ledger fact of a journal without its new
fields (§22 severity, §24 reason codes): ``run-journal`` on the fixture
journals of revision 3 and the packaged example writes the same ledger fact
files, byte for byte, as the code of revision 3 did. The digests below are
sha256 of the files that code wrote (the views are not pinned: they gain
fields). The packaged example gained a scope of its own in revision 4
(``checkout-web``, §21's withheld lessons): its revision-3 part is the
example without that scope's events, and without the lesson revision 4's
review walkthrough leaves with an open candidate (``EXP-idempotency-key``
and its three failing tasks, issue 31)."""

from __future__ import annotations

import hashlib

import pytest

from recurrence_ledger.embedded import run_journal
from tests.conftest import REPO, case

#: sha256 of each ledger fact file revision 3's ``run-journal`` wrote.
REVISION_3_FACTS: dict[str, dict[str, str]] = {
    "forward_refs": {
        "admission-decisions": "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        "candidate-sets": "fbde7d45998aa84c837dc9f47eedd1b4dc8241c1567fb728f50634b8e446370f",
        "dead-letter": "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        "recurrence-matches": "f32a0fae0b8d2706f2a708431ec16d73b044c495902989d273c23025cabb9b61",
        "recurrence-observations": "967ba36f821c084f2e0a79f79fa953147f3bd3510f7f27ba420cee30c13ba4cb",
        "review-candidates": "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    },
    "late_run": {
        "admission-decisions": "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        "candidate-sets": "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        "dead-letter": "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        "recurrence-matches": "0751161319a7377a7825f8706497b57c38e497c278ff06a6feaba923f85fceb2",
        "recurrence-observations": "8e27be318898699df21623b90a6073240dbdcca44a498817bf62a56a498bc0f1",
        "review-candidates": "441dd4b70cff9c4305c6723ac627dc0b6073e05a0d1e4ba1671913b67f0b908e"
    },
    "minimum_case": {
        "admission-decisions": "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        "candidate-sets": "227699cfa6823f0afebca205d8caf3afda9e62a375f011bad7d88fd169e218f6",
        "dead-letter": "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        "recurrence-matches": "794a307f2b317299fecec0b9bd72305575b7708fd193819812d420bd0ea95ccf",
        "recurrence-observations": "571579cc9abe1ae86ecbce93d4a5590ff124050cc108fcac5a4a50f9a9880a8f",
        "review-candidates": "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    },
    "openapi_drift": {
        "admission-decisions": "dcd4f513a4220c332be9aa074fa7cea2a840a3620672fd2a3ff95f777e3d88a9",
        "candidate-sets": "c3965c91ac306b8dfc089a0b38b3eef35919f2c936f992fd85641b76987c83f5",
        "dead-letter": "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        "recurrence-matches": "9a9d723e4d9203457afdc6f4290b1d93afeeef733b9bcf34f7687b9f6de22d62",
        "recurrence-observations": "8f524bb8699ef42291fd5c5c9983a527e20b67f470123e010e35da9d7f9c9103",
        "review-candidates": "6c64c199bf231e2ec7715b1841b5655982383b226400e1df9f4eed5fbe7cb33d"
    },
    "review_loop": {
        "admission-decisions": "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        "candidate-sets": "241fc26da3b886e00226d60c83c755842d3267f3722997dfbdde2a750277b4e4",
        "dead-letter": "0097825de29b731edf01f726633f51fcb9d36fdbc5c66fff6ba294d41292cea8",
        "recurrence-matches": "0d389dd5180c7cf74137b5c1d09b1cf88fc4a4bd16644e8bf12a5226ca0b2ba1",
        "recurrence-observations": "c10f3fba386f1961dc83cb9d0dcbdb0832e1c9f709621b9fadcf170fdd79a5d3",
        "review-candidates": "3d508006d760c9690de49e5eb82e747800e9fa0138575501459f7a8705361457"
    },
    "unknown_reasons": {
        "admission-decisions": "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        "candidate-sets": "7ab6c185f7c3dc84b0c54f11b14eac640eb30dbde3c4d1afd9600f1a8fd35b69",
        "dead-letter": "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        "recurrence-matches": "0cf11e2a8d38a9880f09f408c80ec94b3fc76c7cd1fb23842e71802290030f12",
        "recurrence-observations": "98a68a220bc8ef2e3d139421c8e409c5e269bba56b84243f1e45736b71a46c01",
        "review-candidates": "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    },
    "worked_example": {
        "admission-decisions": "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        "candidate-sets": "3468085502236adb57fb935fa391040988d4ad806610b3724aefa4be128d4b25",
        "dead-letter": "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        "recurrence-matches": "f5de96ea979169b3b775dca92e6c53edceddb2a9b0e24895342a5c324e01d8d8",
        "recurrence-observations": "c54f3ea044df300080bd7b5747131b57b5c328b39a7f54788dfe5cc1613741c9",
        "review-candidates": "94a97f375148a2b44cba19253f1b520e73ebe6b4e9afa2470d6ad72adc78c350"
    }
}

EXAMPLE = REPO / "processors" / "recurrence_ledger" / "examples" / "openapi_drift.jsonl"


#: The scope the packaged example gained in revision 4 (contract §21).
REVISION_4_SCOPE = '"scope_id": "checkout-web"'
#: The lines of the lesson left with an open review candidate (the README's review walkthrough).
REVISION_4_OPEN_CANDIDATE = ('"EXP-idempotency-key"', '"task-retry-')


@pytest.mark.parametrize("name", sorted(REVISION_3_FACTS))
def test_run_journal_writes_revision_3_s_facts_byte_for_byte(name, tmp_path):
    journal = case(name)[0] if name != "openapi_drift" else tmp_path / "revision-3-example.jsonl"
    if name == "openapi_drift":
        lines = EXAMPLE.read_text(encoding="utf-8").splitlines(keepends=True)
        kept = [line for line in lines if REVISION_4_SCOPE not in line and not any(mark in line for mark in REVISION_4_OPEN_CANDIDATE)]
        journal.write_text("".join(kept), encoding="utf-8")
        assert len(lines) - len(kept) == 15 + 4
    run_journal(journal, tmp_path, show_progress=False)
    written = {topic: hashlib.sha256((tmp_path / f"{topic}.jsonl").read_bytes()).hexdigest() for topic in REVISION_3_FACTS[name]}
    assert written == REVISION_3_FACTS[name]
