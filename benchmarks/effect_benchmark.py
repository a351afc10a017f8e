"""Benchmark of the effect of a revision (contract §21.4; not a test).

probability_helps is an exact rational; at 10,000 resolved observations per
arm its numerator has ~150,000 bits. ``assess_effect`` bounds it in floating
point and goes exact only when the bound cannot settle the 4-place rounding
or a threshold comparison. Target (issue: the effect of a revision): a
revision with 10,000 resolved observations per arm in ≤ 5 ms.

For each pair of arms, the CPU time of ``assess_effect`` (the published
path) and of ``assess_effect_exact`` (the exact rational alone) — best and
median of the runs. The numbers go into BENCHMARKS.md between the
``effect-benchmark`` markers.

    PYTHONPATH=processors python benchmarks/effect_benchmark.py            # record
    PYTHONPATH=processors python benchmarks/effect_benchmark.py --quick    # print only
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from datetime import datetime, timezone
from fractions import Fraction
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.record import write_block  # noqa: E402
from recurrence_ledger.ledger.effect import Arm, assess_effect, assess_effect_exact  # noqa: E402
from recurrence_ledger.policy import EFFECT_MIN_RESOLVED, EFFECT_PROBABILITY  # noqa: E402

#: (treated recurred, withheld recurred) per 10,000 resolved: a close call, a
#: clear help, rare failures, near-certain failures.
CASES: tuple[tuple[int, int, int], ...] = (
    (10_000, 5_000, 5_100),
    (10_000, 100, 9_000),
    (10_000, 3, 4),
    (10_000, 9_990, 9_991),
    (1_000, 500, 520),
    (100, 20, 40),
)


def cpu_ms(function, runs: int) -> tuple[float, float]:
    """(best, median) CPU milliseconds of ``function()`` over ``runs`` calls."""
    times = []
    for _ in range(runs):
        start = time.process_time_ns()
        function()
        times.append((time.process_time_ns() - start) / 1e6)
    return min(times), statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer runs, print only")
    options = parser.parse_args()
    runs, exact_runs = (20, 2) if options.quick else (200, 5)
    minimum, probability = EFFECT_MIN_RESOLVED.default, EFFECT_PROBABILITY.default
    rows = ["| resolved per arm | recurred treated / withheld | probability_helps | verdict | assess_effect ms (best / median) | exact rational ms (best / median) |", "| --- | --- | --- | --- | --- | --- |"]
    for resolved, treated_recurred, withheld_recurred in CASES:
        treated, withheld = Arm(treated_recurred, resolved), Arm(withheld_recurred, resolved)
        result = assess_effect(treated, withheld, minimum, probability)
        assert result == assess_effect_exact(treated, withheld, minimum, probability)
        fast = cpu_ms(lambda: assess_effect(treated, withheld, minimum, probability), runs)
        exact = cpu_ms(lambda: assess_effect_exact(treated, withheld, minimum, probability), exact_runs)
        rows.append(
            f"| {resolved:,} | {treated_recurred:,} / {withheld_recurred:,} | {result.probability_helps:.4f} | {result.verdict} | "
            f"{fast[0]:.3f} / {fast[1]:.3f} | {exact[0]:.1f} / {exact[1]:.1f} |"
        )
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        f"Recorded {stamp} by `python benchmarks/effect_benchmark.py` ({platform.machine()}, CPython {platform.python_version()}, "
        f"{os.cpu_count()} CPUs; {runs} runs of `assess_effect`, {exact_runs} of the exact rational; CPU time).",
        "",
        "Target: ≤ 5 ms for a revision with 10,000 resolved observations per arm (§21.4). The published path bounds",
        "the rational in floating point over the smallest of a_t, b_t, a_w, b_w and equals the exact rational's",
        "rounding and verdict (tests/ledger/test_effect.py); the exact rational is computed only when the bound",
        "straddles a rounding boundary or a threshold.",
        "",
        *rows,
    ]
    print("\n".join(lines))
    if not options.quick:
        write_block("effect-benchmark", "Effect of a revision", lines)


if __name__ == "__main__":
    main()
