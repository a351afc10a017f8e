"""Ratios (contract §4, §12 rule 5, §14; exact since §19 rev. 3).

A ratio — a revision's yield, a scope's repeat_failure_rate, a Dice score —
is an exact fraction of two integers. It is published as the nearest
decimal with :data:`RATIO_PLACES` places, ties to even, computed on the
fraction and never through a binary double; the published value is the
double that decimal reads as (the schemas' type), so canonical JSON writes
it with at most 4 places. Thresholds compare the fraction, never the
published value.
"""

from __future__ import annotations

from fractions import Fraction

#: Decimal places of a published ratio.
RATIO_PLACES = 4


def published_ratio(numerator: int, denominator: int) -> float | None:
    """``numerator / denominator`` as published: the nearest decimal with
    4 places, ties to even, as a float (``Fraction.__round__`` rounds half
    to even; the float of a 4-place decimal is the double nearest to it).
    None when ``denominator`` is 0.

    >>> published_ratio(5999, 20000), published_ratio(1, 32), published_ratio(3, 32), published_ratio(1, 3)
    (0.3, 0.0312, 0.0938, 0.3333)
    """
    if denominator == 0:
        return None
    # round(Fraction(n, d), 4) in integers: the quotient of 10⁴·n by d,
    # half to even on the remainder; an int / int division is correctly
    # rounded, so q / 10⁴ is float(Fraction(q, 10⁴)) (the doctest above and
    # tests/ledger pin it against the Fraction form).
    if denominator < 0:
        numerator, denominator = -numerator, -denominator
    quotient, remainder = divmod(numerator * _SCALE, denominator)  # floor, as Fraction.__round__
    twice = 2 * remainder
    if twice > denominator or (twice == denominator and quotient & 1):
        quotient += 1
    return quotient / _SCALE


_SCALE = 10**RATIO_PLACES


def published_ratio_of_fraction(numerator: int, denominator: int) -> float | None:
    """:func:`published_ratio` through ``fractions.Fraction`` (the
    definition; the tests compare the two)."""
    if denominator == 0:
        return None
    return float(round(Fraction(numerator, denominator), RATIO_PLACES))
