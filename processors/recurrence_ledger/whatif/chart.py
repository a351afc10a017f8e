"""The chart of a sweep (contract §20): review load against the swept
setting, as a PNG a person can look at (matplotlib, Agg backend: no
display needed).

The upper panel has the review load of each value — review candidates
raised and revisions needing review at the end — with the baseline's value
marked, and, once review decisions exist (contract §18), the candidates
that reviewers rejected which each value would not have raised. A
near-duplicate sweep adds a panel of admission decisions listing
near-duplicates; a provenance-horizon sweep one of the outcomes the horizon
decided unlinked.
"""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

#: Pixels of the chart: width, height per panel (at 100 dpi).
WIDTH, PANEL_HEIGHT = 900, 380
#: The second panel of a sweep, by setting: (row field, label).
SECOND_PANEL = {
    "near-duplicate-threshold": ("decisions_with_near_duplicates", "admission decisions listing near-duplicates"),
    "provenance-horizon": ("horizon_unlinked", "outcomes the horizon decided unlinked"),
}


def _x(value: object) -> float:
    return float(Fraction(str(value)))


def draw_chart(sweep: dict, path: Path, note: str | None = None) -> Path:
    """Draw the sweep of a JSON report (``report["sweep"]``) into ``path``
    (PNG) and return it; ``note`` is printed under the chart (why a series
    is missing). OSError when the file cannot be written."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot
    from matplotlib.ticker import MaxNLocator

    rows, setting = sweep["rows"], sweep["setting"]
    label = setting.replace("-", " ")
    xs = [_x(row["value"]) for row in rows]
    second = SECOND_PANEL.get(setting)
    panels = 2 if second else 1
    figure, axes = pyplot.subplots(panels, 1, figsize=(WIDTH / 100, PANEL_HEIGHT * panels / 100 + (0.3 if note else 0)),
                                   dpi=100, sharex=True, squeeze=False)
    top = axes[0][0]
    # (row field, legend, line style, colour, label offset in points)
    series = [("review_candidates", "review candidates raised", "o-", "#c0392b", 7),
              ("revisions_needing_review", "revisions needing review (at the end)", "s--", "#2c3e50", -13)]
    if any(row["rejected_candidates_avoided"] is not None for row in rows):
        series.append(("rejected_candidates_avoided", "rejected candidates it would have avoided", "^:", "#27ae60", 7))
    highest = 0
    for field, name, style, colour, offset in series:
        ys = [row[field] for row in rows]
        highest = max([highest, *(y for y in ys if y is not None)])
        top.plot(xs, ys, style, color=colour, label=name, linewidth=2, markersize=6)
        for x, y in zip(xs, ys):
            if y is not None:
                top.annotate(str(y), (x, y), textcoords="offset points", xytext=(0, offset), ha="center", fontsize=8, color=colour)
    # below 0: room for the labels under the points at 0, clear of the value axis' numbers
    top.set_ylim(-(highest * 0.06 + 0.5), highest * 1.2 + 1)
    top.set_ylabel("review load")
    top.set_title(f"Review load against the {label}")
    panel_axes = [top]
    if second:
        field, name = second
        bottom = axes[1][0]
        ys = [row[field] for row in rows]
        bottom.plot(xs, ys, "d-", color="#8e44ad", label=name, linewidth=2, markersize=6)
        bottom.set_ylabel("decisions" if field == "decisions_with_near_duplicates" else "outcomes")
        panel_axes.append(bottom)
    for axis in panel_axes:
        if sweep["baseline_value"] is not None:
            axis.axvline(_x(sweep["baseline_value"]), color="#7f8c8d", linestyle=":", linewidth=1.5, label=f"baseline ({sweep['baseline_value']})")
        if axis is not top:
            axis.set_ylim(bottom=0)
        axis.yaxis.set_major_locator(MaxNLocator(integer=True))
        axis.grid(True, alpha=0.3)
        axis.legend(loc="best", fontsize=8)
    panel_axes[-1].set_xlabel(label)
    panel_axes[-1].set_xticks(xs, [str(row["value"]) for row in rows])
    if note:
        figure.text(0.01, 0.01, note, fontsize=7, color="#555555", wrap=True)
    figure.tight_layout(rect=(0, 0.04 if note else 0, 1, 1))
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, format="png")
    pyplot.close(figure)
    return path
