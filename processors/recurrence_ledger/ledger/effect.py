"""The effect of a revision (contract §21.4): did the lesson lower the
recurrence rate?

A revision E has two arms, each counted as ``(recurred, resolved)`` — ``f``
and ``n``. With a uniform prior an arm's recurrence probability has the
posterior Beta(1 + f, 1 + n − f). **probability_helps** is
P(p_withheld > p_treated), a rational number for integer counts:

    P = Σ_{i=0}^{a_w−1} B(a_t+i, b_t+b_w) / ((b_w+i) · B(1+i, b_w) · B(a_t, b_t))

with a = 1 + f and b = 1 + n − f of each arm. It is published like every
ratio (4 places, ties to even, rounded from the exact value, §19.3) and the
verdict compares the exact P with the policy's ``effect_probability``.

Exact rationals of 10,000 resolved observations per arm have numerators of
about 150,000 bits, and summing them costs tens of milliseconds; §21.4 asks
for a few. So :func:`assess_effect` first bounds P in floating point —
log-terms of the series' term recurrence, summed with numpy, with an
explicit bound on the accumulated rounding error — and computes the exact
rational (:func:`probability_helps_exact`) only when the interval does not
settle the 4-place rounding or a threshold comparison. Both paths return
what the exact rational gives; ``tests/ledger/test_effect.py`` compares
them with hypothesis.

This module is pure: numbers in, numbers out.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from recurrence_ledger.ledger.holdout_records import EffectVerdict
from recurrence_ledger.ledger.ratios import published_ratio



@dataclass(frozen=True)
class Arm:
    """One arm of §21.4: ``recurred`` (f) of ``resolved`` (n) observations
    had a recurred verdict; ``0 ≤ recurred ≤ resolved``."""

    recurred: int
    resolved: int

    def __post_init__(self) -> None:
        if not 0 <= self.recurred <= self.resolved:
            raise ValueError(f"an arm needs 0 ≤ recurred ≤ resolved, got {self.recurred}/{self.resolved}")

    @property
    def alpha(self) -> int:
        """a = 1 + f, the posterior's first Beta parameter."""
        return 1 + self.recurred

    @property
    def beta(self) -> int:
        """b = 1 + n − f, the posterior's second Beta parameter."""
        return 1 + self.resolved - self.recurred


@dataclass(frozen=True)
class EffectAssessment:
    """What §21.4 publishes of two arms: ``probability_helps`` (4 places,
    a float, None while an arm has n = 0) and the ``verdict``."""

    probability_helps: float | None
    verdict: EffectVerdict


# The four equivalent sums (§21.4). g(αA, βA, αB, βB) = P(X_B > X_A) for
# X_A ~ Beta(αA, βA), X_B ~ Beta(αB, βB), a sum of αB terms:
#   term_0 = B(αA, βA+βB) / B(αA, βA) = Π_{k<βB} (βA+k) / (αA+βA+k)
#   term_{i+1} / term_i = (αA+i)(βB+i) / ((αA+βA+βB+i)(i+1)).
# P(X_w > X_t) is g(t, w) (over a_w), g((b_w,a_w), (b_t,a_t)) (over b_t, by
# p → 1 − p), 1 − g(w, t) (over a_t) or 1 − g((b_t,a_t), (b_w,a_w)) (over b_w).


def _forms(treated: Arm, withheld: Arm) -> tuple[bool, tuple[int, int, int, int]]:
    """The cheapest of the four sums: ``(complement, (αA, βA, αB, βB))``;
    P is g(...) or 1 − g(...) when ``complement``."""
    a_t, b_t, a_w, b_w = treated.alpha, treated.beta, withheld.alpha, withheld.beta
    forms = (
        (False, (a_t, b_t, a_w, b_w)),
        (False, (b_w, a_w, b_t, a_t)),
        (True, (a_w, b_w, a_t, b_t)),
        (True, (b_t, a_t, b_w, a_w)),
    )
    # The series has αB terms (term_0 is four log-gammas in floating point,
    # one product in the exact form): loop over the smallest count.
    return min(forms, key=lambda form: form[1][2])


def _split(first: int, last: int, alpha_a: int, beta_b: int, c: int) -> tuple[int, int, int]:
    """Binary splitting of the series over term indexes [first, last):
    ``(P, Q, T)`` with P = Π N_j, Q = Π D_j and T / Q = Σ_{i} Π_{first≤j<i}
    N_j / D_j, where N_j = (αA+j)(βB+j) and D_j = (c+j)(j+1). Halving keeps
    the big multiplications balanced (Karatsuba), far cheaper than a term
    at a time."""
    if last - first == 1:
        d = (c + first) * (first + 1)
        return (alpha_a + first) * (beta_b + first), d, d
    middle = (first + last) // 2
    p1, q1, t1 = _split(first, middle, alpha_a, beta_b, c)
    p2, q2, t2 = _split(middle, last, alpha_a, beta_b, c)
    return p1 * p2, q1 * q2, t1 * q2 + p1 * t2


def _product(first: int, last: int) -> int:
    """Π_{first ≤ k < last} k, by halving."""
    if last - first <= 16:
        return math.prod(range(first, last))
    middle = (first + last) // 2
    return _product(first, middle) * _product(middle, last)


def _g_exact(alpha_a: int, beta_a: int, alpha_b: int, beta_b: int) -> tuple[int, int]:
    """g exactly as an unreduced ``(numerator, denominator)``: term_0 as a
    product, the series by binary splitting (no gcd: reducing fractions of
    150,000 bits costs more than the whole sum)."""
    c = alpha_a + beta_a + beta_b
    num0 = _product(beta_a, beta_a + beta_b)
    den0 = _product(alpha_a + beta_a, c)
    _, q, t = _split(0, alpha_b, alpha_a, beta_b, c)
    return num0 * t, den0 * q


def _probability_exact(treated: Arm, withheld: Arm) -> tuple[int, int] | None:
    """P as an unreduced ``(numerator, denominator)``, None while an arm has
    no resolved observation."""
    if treated.resolved == 0 or withheld.resolved == 0:
        return None
    if (treated.alpha, treated.beta) == (withheld.alpha, withheld.beta):
        return 1, 2
    complement, (alpha_a, beta_a, alpha_b, beta_b) = _forms(treated, withheld)
    num, den = _g_exact(alpha_a, beta_a, alpha_b, beta_b)
    return (den - num, den) if complement else (num, den)


def probability_helps_exact(treated: Arm, withheld: Arm) -> Fraction | None:
    """P(p_withheld > p_treated) as an exact fraction (§21.4), None while an
    arm has no resolved observation.

    >>> probability_helps_exact(Arm(1, 5), Arm(4, 5))
    Fraction(887, 924)
    >>> probability_helps_exact(Arm(7, 10), Arm(3, 10))
    Fraction(2531, 58786)
    """
    exact = _probability_exact(treated, withheld)
    return None if exact is None else Fraction(*exact)


#: Relative error allowed per floating-point operation in the bound below.
#: An addition is correctly rounded (half an ulp, 2⁻⁵³; 2⁻⁵² allowed);
#: numpy's log and exp are within a few ulps (2⁻⁴⁸ allows 16); CPython's
#: lgamma is allowed 2⁻⁴², a factor of 1,000 over its few ulps.
_ADD_ERROR = 2.0**-52
_LOG_ERROR = 2.0**-48
_LGAMMA_ERROR = 2.0**-42


def _g_interval(alpha_a: int, beta_a: int, alpha_b: int, beta_b: int) -> tuple[float, float]:
    """g bounded: ``(low, high)`` floats with low ≤ g ≤ high.

    log term_0 = lgamma(βA+βB) + lgamma(αA+βA) − lgamma(βA) −
    lgamma(αA+βA+βB); log term_i = log term_0 + Σ_{j<i} log r_j, summed with
    numpy (every integer here is below 2⁵³, exact as a double). The error
    bound adds, for every log-gamma, log and addition, the step error times
    the magnitude it works on, then the exp and the final sum's rounding."""
    c = alpha_a + beta_a + beta_b
    gammas = (math.lgamma(beta_a + beta_b), math.lgamma(alpha_a + beta_a), math.lgamma(beta_a), math.lgamma(c))
    log0 = gammas[0] + gammas[1] - gammas[2] - gammas[3]
    i = np.arange(alpha_b - 1, dtype=np.float64)
    log_r = (np.log(alpha_a + i) + np.log(beta_b + i)) - (np.log(c + i) + np.log1p(i))
    partial = np.empty(alpha_b, dtype=np.float64)
    partial[0] = 0.0
    np.cumsum(log_r, out=partial[1:])
    partial_max = float(np.max(np.abs(partial)))
    logs = partial + log0
    top = float(np.max(logs))
    total = float(np.sum(np.exp(logs - top)))
    log_estimate = top + math.log(total)
    # Absolute error of every log-term: the four log-gammas (each allowed
    # the step error times its magnitude, with 1 for those near 0), the four
    # logs of each r_j (each at most log(c + alpha_b)), the running sums
    # (one rounding per addition, at most the step error times the partial
    # sum) and adding log0; then exp of each term (relative), the sum of
    # alpha_b terms, its log, and the terms that underflow to 0 in
    # exp(logs − top) (each below 2⁻¹⁰⁷⁴ of the largest).
    error = (
        _LGAMMA_ERROR * sum(abs(value) + 1 for value in gammas)
        + _LOG_ERROR * (4 * alpha_b * math.log(c + alpha_b) + 3 * alpha_b + abs(log_estimate) + 8)
        + _ADD_ERROR * (4 * alpha_b * math.log(c + alpha_b) + alpha_b * partial_max + alpha_b * (abs(log0) + abs(top) + 2) + 8)
        + alpha_b * 2.0**-1000
    )
    low = math.exp(log_estimate - 2 * error)
    high = math.exp(min(log_estimate + 2 * error, 0.0))
    return max(low, 0.0), min(high, 1.0)


def probability_helps_interval(treated: Arm, withheld: Arm) -> tuple[float, float] | None:
    """``(low, high)`` with low ≤ P ≤ high (§21.4), cheap at any count; None
    while an arm has no resolved observation."""
    if treated.resolved == 0 or withheld.resolved == 0:
        return None
    if (treated.alpha, treated.beta) == (withheld.alpha, withheld.beta):
        return 0.5, 0.5
    complement, params = _forms(treated, withheld)
    low, high = _g_interval(*params)
    if complement:
        low, high = 1.0 - high, 1.0 - low
    # 1 − x in floating point is exact for x in [1/2, 1] and within half an
    # ulp otherwise; widen by one ulp each way.
    return max(math.nextafter(low, -math.inf), 0.0), min(math.nextafter(high, math.inf), 1.0)


def effect_verdict(treated: Arm, withheld: Arm, probability: tuple[int, int] | None, min_resolved: int, effect_probability: Fraction) -> EffectVerdict:
    """§21.4's verdict from the exact P, given as ``(numerator,
    denominator)`` with a positive denominator (need not be reduced):
    ``insufficient`` while an arm has fewer than ``min_resolved`` resolved
    observations; ``helps`` when P ≥ ``effect_probability``; ``harms`` when
    P ≤ 1 − ``effect_probability``; else ``undecided``."""
    if treated.resolved < min_resolved or withheld.resolved < min_resolved or probability is None:
        return "insufficient"
    num, den = probability
    q_num, q_den = effect_probability.numerator, effect_probability.denominator
    if num * q_den >= q_num * den:
        return "helps"
    if num * q_den <= (q_den - q_num) * den:
        return "harms"
    return "undecided"


def assess_effect_exact(treated: Arm, withheld: Arm, min_resolved: int, effect_probability: Fraction) -> EffectAssessment:
    """:func:`assess_effect` through the exact rational alone (the
    definition; some milliseconds to tens of them at 10,000 per arm)."""
    probability = _probability_exact(treated, withheld)
    return EffectAssessment(
        None if probability is None else published_ratio(*probability),
        effect_verdict(treated, withheld, probability, min_resolved, effect_probability),
    )


def assess_effect(treated: Arm, withheld: Arm, min_resolved: int, effect_probability: Fraction) -> EffectAssessment:
    """The published probability_helps and the verdict of two arms (§21.4),
    equal to :func:`assess_effect_exact`'s: the float interval decides when
    both its ends round alike and compare alike with the thresholds (the
    comparisons run on the ends' exact values); otherwise the exact
    rational does.

    >>> assess_effect(Arm(1, 5), Arm(4, 5), 5, Fraction(19, 20))
    EffectAssessment(probability_helps=0.96, verdict='helps')
    """
    interval = probability_helps_interval(treated, withheld)
    if interval is None:
        return EffectAssessment(None, "insufficient")
    low, high = (end.as_integer_ratio() for end in interval)
    published_low, published_high = published_ratio(*low), published_ratio(*high)
    verdict_low = effect_verdict(treated, withheld, low, min_resolved, effect_probability)
    verdict_high = effect_verdict(treated, withheld, high, min_resolved, effect_probability)
    if published_low == published_high and verdict_low == verdict_high:
        return EffectAssessment(published_low, verdict_low)
    return assess_effect_exact(treated, withheld, min_resolved, effect_probability)
