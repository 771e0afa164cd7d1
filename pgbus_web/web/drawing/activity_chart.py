"""The insights page's charts over time: one small bar chart per series
(started, completed, failed, stuck) of a range's buckets, drawn here as
inline SVG (no chart library, no script). A chart is decoration for the
eye: it is hidden from screen readers (aria-hidden), which read the data
table beside it, the same numbers."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from markupsafe import Markup, escape

# The drawing's own units; the SVG scales to its box (viewBox).
WIDTH, HEIGHT = 240, 56
GAP = 1


def bars(rows: Sequence[dict[str, Any]], series: str) -> Markup:
    """*series* of *rows* (workflow_activity.series) as bars, tallest =
    the peak; a bucket with no value (stuck not recorded) draws no bar,
    one with 0 a hairline so the axis reads."""
    values = [row.get(series) for row in rows]
    peak = max((value for value in values if isinstance(value, int) and value > 0), default=0)
    count = max(len(values), 1)
    width = WIDTH / count
    parts = [f'<line class="pgbus-chart-axis" x1="0" y1="{HEIGHT - 0.5}" x2="{WIDTH}" y2="{HEIGHT - 0.5}"/>']
    for index, value in enumerate(values):
        if not isinstance(value, int):
            continue
        height = (max(value, 0) / peak) * (HEIGHT - 2) if peak else 0
        height = max(height, 1.0)
        x = index * width + GAP / 2
        parts.append(
            f'<rect class="pgbus-chart-bar pgbus-chart-{escape(series)}" x="{x:.2f}" y="{HEIGHT - height:.2f}"'
            f' width="{max(width - GAP, 0.5):.2f}" height="{height:.2f}"/>'
        )
    return Markup(
        f'<svg class="pgbus-chart" viewBox="0 0 {WIDTH} {HEIGHT}" preserveAspectRatio="none"'
        f' aria-hidden="true" focusable="false">{"".join(parts)}</svg>'
    )


def peak(rows: Sequence[dict[str, Any]], series: str) -> int | None:
    """The series' highest value in *rows* (None when it has none)."""
    values = [value for row in rows if isinstance(value := row.get(series), int)]
    return max(values) if values else None


def total(rows: Sequence[dict[str, Any]], series: str) -> int:
    return sum(row.get(series) or 0 for row in rows)


TEMPLATE_NAMES = {"activity_bars": bars, "activity_peak": peak, "activity_total": total}
