"""§21.4: probability_helps is the exact rational, published with 4 places
ties to even, and the verdict compares the exact value — also on the cheap
interval path."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from recurrence_ledger.ledger.effect import (
    Arm,
    EffectAssessment,
    assess_effect,
    assess_effect_exact,
    probability_helps_exact,
    probability_helps_interval,
)

THRESHOLD = Fraction(19, 20)


def reference_probability(treated: Arm, withheld: Arm) -> Fraction:
    """§21.4's formula, term by term with Beta functions of factorials (slow, small counts)."""

    def beta(x: int, y: int) -> Fraction:
        return Fraction(math.factorial(x - 1) * math.factorial(y - 1), math.factorial(x + y - 1))

    a_t, b_t, a_w, b_w = treated.alpha, treated.beta, withheld.alpha, withheld.beta
    return sum(
        (beta(a_t + i, b_t + b_w) / ((b_w + i) * beta(1 + i, b_w) * beta(a_t, b_t)) for i in range(a_w)),
        Fraction(0),
    )


@pytest.mark.parametrize(
    ("treated", "withheld", "exact", "published"),
    [
        (Arm(1, 5), Arm(4, 5), Fraction(887, 924), 0.96),
        (Arm(0, 5), Arm(0, 5), Fraction(1, 2), 0.5),
        (Arm(7, 10), Arm(3, 10), Fraction(2531, 58786), 0.0431),
    ],
)
def test_the_contracts_worked_probabilities(treated: Arm, withheld: Arm, exact: Fraction, published: float) -> None:
    assert probability_helps_exact(treated, withheld) == exact
    assert reference_probability(treated, withheld) == exact
    assert assess_effect(treated, withheld, 5, THRESHOLD).probability_helps == published
    assert f"{assess_effect(treated, withheld, 5, THRESHOLD).probability_helps:.4f}" == {0.96: "0.9600", 0.5: "0.5000", 0.0431: "0.0431"}[published]


def test_each_verdict() -> None:
    assert assess_effect(Arm(1, 5), Arm(4, 5), 5, THRESHOLD) == EffectAssessment(0.96, "helps")
    assert assess_effect(Arm(7, 10), Arm(3, 10), 5, THRESHOLD) == EffectAssessment(0.0431, "harms")
    assert assess_effect(Arm(0, 5), Arm(0, 5), 5, THRESHOLD) == EffectAssessment(0.5, "undecided")
    # probability is published while an arm is short of the minimum
    assert probability_helps_exact(Arm(0, 4), Arm(4, 4)) == Fraction(251, 252)
    assert assess_effect(Arm(0, 4), Arm(4, 4), 5, THRESHOLD) == EffectAssessment(0.996, "insufficient")
    assert assess_effect(Arm(0, 0), Arm(4, 5), 5, THRESHOLD) == EffectAssessment(None, "insufficient")
    # a stricter policy turns 887/924 (0.95996) into undecided
    assert assess_effect(Arm(1, 5), Arm(4, 5), 5, Fraction(24, 25)).verdict == "undecided"
    # at the least effect probability, 1/2, the bounds meet: equal arms help, nothing is undecided
    assert assess_effect(Arm(0, 5), Arm(0, 5), 5, Fraction(1, 2)) == EffectAssessment(0.5, "helps")
    assert assess_effect(Arm(1, 5), Arm(0, 5), 5, Fraction(1, 2)).verdict == "harms"


def test_the_verdict_compares_the_exact_probability_not_the_rounded_one() -> None:
    # 887/924 rounds to 0.9600 but is below 24/25 = 0.96; 5/6 meets 5/6 exactly.
    assert assess_effect(Arm(1, 5), Arm(4, 5), 1, Fraction(24, 25)).verdict == "undecided"
    assert probability_helps_exact(Arm(0, 1), Arm(1, 1)) == Fraction(5, 6)
    assert assess_effect(Arm(0, 1), Arm(1, 1), 1, Fraction(5, 6)).verdict == "helps"
    assert assess_effect(Arm(1, 1), Arm(0, 1), 1, Fraction(5, 6)).verdict == "harms"


arms = st.builds(lambda n, share: Arm(round(n * share), n), st.integers(0, 40), st.floats(0, 1))


@settings(max_examples=300, deadline=None)
@given(arms, arms)
def test_every_form_of_the_sum_is_the_contracts_rational(treated: Arm, withheld: Arm) -> None:
    if treated.resolved == 0 or withheld.resolved == 0:
        assert probability_helps_exact(treated, withheld) is None
        return
    assert probability_helps_exact(treated, withheld) == reference_probability(treated, withheld)


@settings(max_examples=500, deadline=None)
@given(arms, arms, st.integers(0, 8), st.fractions(Fraction(1, 2), Fraction(1)))
def test_the_interval_path_equals_the_exact_rational(treated: Arm, withheld: Arm, min_resolved: int, threshold: Fraction) -> None:
    exact = probability_helps_exact(treated, withheld)
    interval = probability_helps_interval(treated, withheld)
    if exact is None:
        assert interval is None
    else:
        assert interval is not None
        assert Fraction(interval[0]) <= exact <= Fraction(interval[1])
    assert assess_effect(treated, withheld, min_resolved, threshold) == assess_effect_exact(treated, withheld, min_resolved, threshold)


@pytest.mark.parametrize(
    ("treated", "withheld"),
    [(Arm(5000, 10000), Arm(5100, 10000)), (Arm(100, 10000), Arm(9000, 10000)), (Arm(3, 10000), Arm(4, 10000)), (Arm(9990, 10000), Arm(9991, 10000))],
)
def test_large_arms_bound_the_exact_value(treated: Arm, withheld: Arm) -> None:
    exact = probability_helps_exact(treated, withheld)
    low, high = probability_helps_interval(treated, withheld)
    assert Fraction(low) <= exact <= Fraction(high)
    assert high - low < 1e-6
    assert assess_effect(treated, withheld, 5, THRESHOLD) == assess_effect_exact(treated, withheld, 5, THRESHOLD)
