"""§21.5: the verified holdout assignment — golden vectors of its hash,
computed here independently with hashlib, and the exact rate comparison."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from recurrence_ledger.holdout import HASH_SPACE, assign, assignment_hash, assignment_preimage
from recurrence_ledger.ledger.normalize import canonical_json

#: (salt, scope_id, handoff artifact_id, experience artifact_id) → u.
GOLDEN = [
    (("salt-1", "s1", "H1", "E7"), 7055385992001162577),
    (("salt-1", "s1", "H2", "E7"), 356657770922893938),
    (("salt-1", "s1", "H3", "E7"), 16220444840620846631),
    (("sél", "scope é", "H12", "E7"), 16055324295444933528),
]


@pytest.mark.parametrize(("key", "u"), GOLDEN)
def test_golden_vectors_of_the_hash(key, u):
    salt, scope_id, handoff, experience = key
    # the contract's definition, written out independently
    independent = int(hashlib.sha256(json.dumps([salt, scope_id, handoff, experience], separators=(",", ":"), ensure_ascii=False).encode()).hexdigest()[:16], 16)
    assert independent == u
    assert assignment_hash(salt, scope_id, handoff, experience) == u
    assert assignment_preimage(salt, scope_id, handoff, experience) == canonical_json([salt, scope_id, handoff, experience])


def test_the_rate_is_compared_exactly():
    # u(H2) = 356657770922893938 ≈ 0.0193 · 2⁶⁴: withheld at 1/50 (0.02), kept at 1/52 (0.01923…)
    assert assign("salt-1", Fraction(1, 50), "s1", "H2", "E7") is True
    assert assign("salt-1", Fraction(1, 52), "s1", "H2", "E7") is False
    assert assign("salt-1", Fraction(356657770922893938, HASH_SPACE), "s1", "H2", "E7") is False  # u < u is false
    assert assign("salt-1", Fraction(356657770922893939, HASH_SPACE), "s1", "H2", "E7") is True
    assert [assign("salt-1", Fraction(1, 2), "s1", h, "E7") for h in ("H1", "H2", "H3")] == [True, True, False]
    assert assign("salt-1", Fraction(0), "s1", "H2", "E7") is False


@pytest.mark.parametrize("rate", [Fraction(3, 4), Fraction(-1, 4), 0.25])
def test_a_rate_outside_zero_to_one_half_or_not_exact_is_refused(rate):
    with pytest.raises(ValueError):
        assign("salt-1", rate, "s1", "H1", "E7")


@given(st.text(), st.text(min_size=1), st.text(min_size=1), st.text(min_size=1))
def test_the_preimage_is_the_canonical_json_of_the_four_strings(salt, scope_id, handoff, experience):
    try:
        expected = canonical_json([salt, scope_id, handoff, experience])
    except ValueError:
        with pytest.raises(ValueError):
            assignment_preimage(salt, scope_id, handoff, experience)
        return
    assert assignment_preimage(salt, scope_id, handoff, experience) == expected


def test_the_module_imports_without_kafka_redis_or_the_rest_of_the_package():
    code = (
        "import sys, recurrence_ledger.holdout as h; "
        "loaded = {m for m in sys.modules if m.startswith(('confluent_kafka', 'redis', 'fastavro', 'pydantic', 'recurrence_ledger.'))}; "
        "print(sorted(loaded))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "['recurrence_ledger.holdout']"
