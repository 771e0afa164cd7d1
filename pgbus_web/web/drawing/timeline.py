"""A run's timeline, drawn on the server as an inline SVG.

One row per step attempt on one time axis, its life cut into bars:
waited (created, not yet due), queued (due, no worker yet), waiting (for a
signal or a batch), and ran: ok, failed, cancelled, or open (still
running, drawn up to now). Above them, a row for the periods the run was
paused, read from the audit trail, with a faint band across every row.

A moment stored at ``infinity`` or ``-infinity`` cannot sit on a time
axis: it is left out (as if it were not set), and ``left_out`` tells the
page to say so under the chart.

No script, no inline style (the page's CSP forbids both): every shape has
classes that static/timeline.css colours, in light and dark mode. Rows have
a fixed height and the SVG grows with them, so fifty attempts stay
legible; long step names are cut with an ellipsis and shown whole in the
row's tooltip.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from itertools import pairwise
from typing import Any

from markupsafe import Markup, escape

from ... import bidi
from ...core.words import timefmt
from ...i18n import t
from ...models.values import Infinite
from ...rules import states

SERIES = ("waited", "queued", "waiting", "paused", "ran_ok", "ran_failed", "ran_open", "ran_cancelled")

# Geometry, in SVG user units (the SVG scales to its container's width).
LABEL_WIDTH = 200  # the step-name column
CHART_WIDTH = 700  # the time axis
RIGHT_PAD = 12
ROW_HEIGHT = 24  # fixed: more attempts make a taller SVG, never thinner rows
BAR_HEIGHT = 14
AXIS_HEIGHT = 26
LABEL_CHARS = 26  # longer step names are cut, the full name is in the tooltip
MIN_BAR_WIDTH = 2  # a one-millisecond step still shows
MAX_TICKS = 7
WIDTH = LABEL_WIDTH + CHART_WIDTH + RIGHT_PAD

# The mark after a bar whose colour alone would carry its meaning, also
# shown in the legend's key.
GLYPHS = {"ran_failed": "✕"}

# Tick spacings, smallest first: the first that gives at most MAX_TICKS wins.
_TICK_STEPS = [
    1, 2, 5, 10, 15, 30,
    60, 120, 300, 600, 900, 1800,
    3600, 2 * 3600, 3 * 3600, 6 * 3600, 12 * 3600,
    86400, 2 * 86400, 7 * 86400, 14 * 86400, 30 * 86400, 91 * 86400, 365 * 86400,
]  # fmt: skip

# Where a step attempt's life turns, in the order they happen on a tie.
_CREATED, _DUE, _WAIT, _STARTED, _FINISHED = range(5)
_KIND_AFTER = {_CREATED: "waited", _DUE: "queued", _WAIT: "waiting", _STARTED: "ran"}
_RAN_BY_STATUS = {
    states.STEP_COMPLETED: "ran_ok",
    states.STEP_FAILED: "ran_failed",
    states.STEP_CANCELLED: "ran_cancelled",
    states.STEP_SKIPPED: "ran_cancelled",
}

# Events that may put a run on pause (the run pauses when a failure is not
# retried), events that show it was not a pause after all, and events that end one.
_PAUSE_EVENTS = {"paused"}
_FAILURE_EVENTS = {"step_failed", "stall_detected", "wait_timed_out"}
_NOT_PAUSED_EVENTS = {"step_reattempted", "step_scheduled", "step_started", "step_completed", "finished", "rerun"}
_RESUME_EVENTS = {"resumed", "cancelled"}


@dataclass(frozen=True)
class Segment:
    """One bar: a *series* from *start* to *end*; *open* when it runs on to now."""

    series: str
    start: datetime
    end: datetime
    open: bool = False


# The step columns the timeline reads.
_STEP_MOMENTS = ("created_at", "scheduled_at", "waiting_since", "started_at", "finished_at", "updated_at")


def _u(moment: datetime | None) -> datetime | None:
    """The moment in UTC; None when missing or infinite (off the axis)."""
    if moment is None or isinstance(moment, Infinite):
        return None
    return timefmt.utc(moment)


def left_out(steps: Iterable[Mapping[str, Any]], events: Iterable[Mapping[str, Any]] = ()) -> bool:
    """True when a moment the timeline would draw is infinite, so it is not drawn."""
    return any(isinstance(step.get(name), Infinite) for step in steps for name in _STEP_MOMENTS) or any(
        isinstance(event.get("created_at"), Infinite) for event in events
    )


def attempt_segments(step: Mapping[str, Any], *, now: datetime) -> list[Segment]:
    """The bars of one step attempt (a pgbus_workflow_steps row), in time order.

    The attempt's moments (created, due, waiting since, started, finished)
    are put in time order, and each span is named by the moment that opens
    it: after created it waited, after due it queued, after waiting since
    it waited on a signal or batch, after started it ran. That reads both
    orders the runtime writes: a signal wait comes before the step runs
    (the claim makes it due), a batch wait after it has run and opened its
    fan-out. A step still open runs on to *now*.
    """
    now = timefmt.utc(now)
    status = step.get("status")
    created = _u(step.get("created_at"))
    points = [
        (moment, rank)
        for moment, rank in (
            (created, _CREATED),
            (_u(step.get("scheduled_at")), _DUE),
            (_u(step.get("waiting_since")), _WAIT),
            (_u(step.get("started_at")), _STARTED),
            (_u(step.get("finished_at")), _FINISHED),
        )
        if moment is not None
    ]
    is_open = status in states.STEP_OPEN
    ended = _u(step.get("updated_at"))
    if not is_open and not any(rank == _FINISHED for _, rank in points) and ended is not None:
        # An attempt that ended without finished_at ended when it was last written.
        points.append((ended, _FINISHED))
    points.sort()

    segments: list[Segment] = []
    for (start, rank), (end, next_rank) in pairwise(points):
        if rank == _FINISHED:
            break
        kind = _KIND_AFTER[rank]
        if kind == "ran":
            kind = _RAN_BY_STATUS.get(status or "", "ran_ok") if next_rank == _FINISHED else "ran_ok"
        elif end <= start:
            continue  # due at once, or claimed at once: nothing to draw
        segments.append(Segment(kind, start, end))
    if is_open and points:
        start, rank = points[-1]
        if rank != _FINISHED and start < now:
            kind = _KIND_AFTER[rank]
            segments.append(Segment("ran_open" if kind == "ran" else kind, start, now, open=True))
    return segments


def paused_periods(
    events: Iterable[Mapping[str, Any]], *, now: datetime, run_status: str | None = None
) -> list[Segment]:
    """When the run was paused, from its audit trail (oldest first).

    A pause opens at a ``paused`` event, or at a failure (step failed,
    stall detected, wait timed out) that was not retried: a failure
    followed by a reattempt, a new step or the run's end was not a pause.
    It closes at ``resumed`` or ``cancelled``; one still open runs to *now*
    (unless *run_status* says the run is no longer paused).
    """
    periods: list[Segment] = []
    start: datetime | None = None
    tentative = False
    for event in events:
        name, at = event.get("event"), _u(event.get("created_at"))
        if at is None:
            continue
        if name in _PAUSE_EVENTS:
            if start is None:
                start = at
            tentative = False
        elif name in _FAILURE_EVENTS:
            if start is None:
                start, tentative = at, True
        elif name in _NOT_PAUSED_EVENTS:
            if tentative:
                start, tentative = None, False
        elif name in _RESUME_EVENTS and start is not None:
            periods.append(Segment("paused", start, max(at, start)))
            start, tentative = None, False
    if start is not None and (run_status is None or run_status == states.PAUSED):
        end = max(timefmt.utc(now), start)
        periods.append(Segment("paused", start, end, open=True))
    return periods


def default_labels() -> dict[str, Any]:
    """The words the timeline prints, from the catalog."""
    return {
        "title": t("pgbus.workflows.timeline.title"),
        "series": {name: t(f"pgbus.workflows.timeline.series.{name}") for name in SERIES},
        "paused_row": t("pgbus.workflows.timeline.paused_row"),
        "now": t("pgbus.workflows.timeline.now"),
        "wait_timed_out": t("pgbus.workflows.events.wait_timed_out"),
        "statuses": {status: t(f"pgbus.workflows.step_statuses.{status}") for status in states.STEP},
    }


def legend(
    steps: Sequence[Mapping[str, Any]],
    events: Sequence[Mapping[str, Any]] = (),
    *,
    now: datetime,
    run_status: str | None = None,
    labels: Mapping[str, Any] | None = None,
) -> list[dict[str, str]]:
    """The series the chart draws, in SERIES order, each with its words and
    its glyph (GLYPHS, "" when colour and the bar's edge say enough)."""
    if not steps:
        return []
    labels = labels or default_labels()
    now = timefmt.utc(now)
    drawn = {segment.series for step in steps for segment in attempt_segments(step, now=now)}
    if paused_periods(events, now=now, run_status=run_status):
        drawn.add("paused")
    return [
        {"series": name, "label": labels["series"][name], "glyph": GLYPHS.get(name, "")}
        for name in SERIES
        if name in drawn
    ]


def _ellipsize(text: str, limit: int = LABEL_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _num(value: float) -> str:
    return f"{value:.1f}".rstrip("0").rstrip(".")


class _Axis:
    """Maps moments to x, and chooses the ticks."""

    def __init__(self, start: datetime, end: datetime):
        if end <= start:
            end = start + timedelta(seconds=1)
        self.start, self.end = start, end
        self.span = (end - start).total_seconds()

    def x(self, moment: datetime) -> float:
        return LABEL_WIDTH + (timefmt.utc(moment) - self.start).total_seconds() / self.span * CHART_WIDTH

    def ticks(self, tz) -> tuple[int, list[datetime]]:
        step = next((s for s in _TICK_STEPS if self.span / s <= MAX_TICKS), None)
        if step is None:
            # Longer than MAX_TICKS years (a step due in year 9999): whole
            # years, as many as keep the count at MAX_TICKS, so the axis
            # costs the same whatever the span.
            year = _TICK_STEPS[-1]
            step = math.ceil(self.span / MAX_TICKS / year) * year
        # Align ticks on the viewer's wall clock (whole hours, midnights).
        offset = (self.start.astimezone(tz).utcoffset() or timedelta()).total_seconds()
        first = math.ceil((self.start.timestamp() + offset) / step) * step
        moments, local = [], first
        while local - offset <= self.end.timestamp():
            moments.append(datetime.fromtimestamp(local - offset, tz=UTC))
            local += step
        return step, moments


def _tick_labels(step: int, moments: Sequence[datetime], *, locale, tz) -> list[str]:
    if step >= 86400:
        return [timefmt.short_date(m, locale=locale, tz=tz) for m in moments]
    zone = timefmt.zone(tz)
    days = [m.astimezone(zone).date() for m in moments]
    spans_days = len(set(days)) > 1
    labels = []
    for index, moment in enumerate(moments):
        # On a run over several days, the date where it changes (and on the
        # first tick), so the axis reads without guessing.
        if spans_days and (index == 0 or days[index] != days[index - 1]):
            labels.append(timefmt.short_date_time(moment, locale=locale, tz=tz, seconds=step < 60))
        else:
            labels.append(timefmt.short_time(moment, locale=locale, tz=tz, seconds=step < 60))
    return labels


def render(
    steps: Sequence[Mapping[str, Any]],
    events: Sequence[Mapping[str, Any]] = (),
    *,
    now: datetime,
    labels: Mapping[str, Any] | None = None,
    locale: timefmt.LocaleArg = None,
    tz: timefmt.TimeZoneArg = None,
    run_status: str | None = None,
) -> Markup:
    """The run's timeline as an inline ``<svg>``: *steps* are its step rows
    (every attempt, oldest first), *events* its audit trail; *labels* the
    words (default_labels() when None). Empty Markup when there are no steps."""
    if not steps:
        return Markup("")
    labels = labels or default_labels()
    now = timefmt.utc(now)
    rows = [(step, attempt_segments(step, now=now)) for step in steps]
    paused = paused_periods(events, now=now, run_status=run_status)

    moments = [created for step in steps if (created := _u(step.get("created_at"))) is not None]
    for segment in [s for _, segs in rows for s in segs] + paused:
        moments += [segment.start, segment.end]
    if not moments:
        return Markup("")
    axis = _Axis(min(moments), max(moments))

    # The legend is HTML beside the chart (legend()): it wraps in any
    # language and stays on screen while a narrow chart scrolls.
    top = AXIS_HEIGHT
    row_count = len(rows) + (1 if paused else 0)
    height = top + row_count * ROW_HEIGHT + 4

    parts: list[Markup] = [
        Markup(
            '<svg xmlns="http://www.w3.org/2000/svg" class="pgbus-timeline" role="img" '
            'viewBox="0 0 {w} {h}" width="{w}" height="{h}" data-rows="{rows}">'
        ).format(w=WIDTH, h=height, rows=row_count),
        Markup("<title>{}</title>").format(labels["title"]),
        _axis(axis, top, height, locale=locale, tz=tz),
    ]
    for period in paused:
        x0, x1 = _span(axis, period)
        parts.append(
            Markup('<rect class="pgbus-tl-paused-band" x="{}" y="{}" width="{}" height="{}"/>').format(
                _num(x0), top, _num(x1 - x0), row_count * ROW_HEIGHT
            )
        )

    y = top
    if paused:
        parts.append(_paused_row(paused, axis, y, labels, now=now, locale=locale, tz=tz))
        y += ROW_HEIGHT
    markers = [e for e in events if e.get("event") == "wait_timed_out" and _u(e.get("created_at")) is not None]
    for index, (step, segments) in enumerate(rows):
        parts.append(_attempt_row(step, segments, axis, y, index, labels, markers, now=now, locale=locale, tz=tz))
        y += ROW_HEIGHT

    if axis.start <= now <= axis.end:
        x = _num(axis.x(now))
        parts.append(
            Markup(
                '<g class="pgbus-tl-now-mark"><line class="pgbus-tl-now" x1="{x}" x2="{x}" y1="{y1}" y2="{y2}"/>'
                "<title>{label}</title></g>"
            ).format(x=x, y1=top - 4, y2=height - 4, label=labels["now"])
        )
    parts.append(Markup("</svg>"))
    return Markup("").join(parts)


def _span(axis: _Axis, segment: Segment) -> tuple[float, float]:
    x0, x1 = axis.x(segment.start), axis.x(segment.end)
    if x1 - x0 < MIN_BAR_WIDTH:
        x1 = x0 + MIN_BAR_WIDTH
    return x0, x1


def _axis(axis: _Axis, top: int, height: int, *, locale, tz) -> Markup:
    step, moments = axis.ticks(timefmt.zone(tz))
    texts = _tick_labels(step, moments, locale=locale, tz=tz)
    ticks = []
    loc, zone_info = timefmt.locale_of(locale), timefmt.zone(tz)
    for moment, text in zip(moments, texts, strict=True):
        x = escape(_num(axis.x(moment)))
        # The full moment as the locale writes it, remembered (timefmt):
        # the same round moments come back on every refresh.
        title = timefmt.stamp(moment, loc, zone_info)[1]
        ticks.append(
            '<g class="pgbus-tl-tick">'
            f'<line class="pgbus-tl-gridline" x1="{x}" x2="{x}" y1="{top - 4}" y2="{height - 4}"/>'
            f'<text class="pgbus-tl-tick-label" x="{x}" y="{top - 10}" text-anchor="middle">{escape(text)}</text>'
            f"<title>{escape(title)}</title></g>"
        )
    baseline = (
        f'<line class="pgbus-tl-axis-line" x1="{LABEL_WIDTH}" x2="{LABEL_WIDTH + CHART_WIDTH}" '
        f'y1="{top - 4}" y2="{top - 4}"/>'
    )
    return Markup(f'<g class="pgbus-tl-axis">{baseline}{"".join(ticks)}</g>')


def _bar(segment: Segment, axis: _Axis, y: int, labels, *, now, locale, tz) -> Markup:
    x0, x1 = _span(axis, segment)
    end = labels["now"] if segment.open else timefmt.clock(segment.end, now=now, locale=locale, tz=tz, seconds=True)
    title = t(
        "pgbus.workflows.timeline.bar_title",
        series=labels["series"][segment.series],
        start=timefmt.clock(segment.start, now=now, locale=locale, tz=tz, seconds=True),
        end=end,
        duration=timefmt.between(segment.start, segment.end),
    )
    classes = f"pgbus-tl-bar pgbus-tl-{segment.series}" + (" pgbus-tl-open" if segment.open else "")
    # Written with escape() rather than Markup.format: a long run has
    # hundreds of bars, and every value is escaped all the same.
    series = escape(segment.series)
    bar = (
        f'<rect class="{escape(classes)}" data-series="{series}" x="{escape(_num(x0))}" '
        f'y="{y + (ROW_HEIGHT - BAR_HEIGHT) // 2}" width="{escape(_num(x1 - x0))}" height="{BAR_HEIGHT}" rx="2">'
        f"<title>{escape(title)}</title></rect>"
    )
    glyph = GLYPHS.get(segment.series)
    if glyph:
        # A shape as well as a colour: a failed run of a step is told from
        # a good one without seeing colours (WCAG 1.4.1).
        bar += (
            f'<text class="pgbus-tl-glyph" data-series="{series}" x="{escape(_num(x1 + 2))}" '
            f'y="{y + ROW_HEIGHT // 2 + 4}" aria-hidden="true">{escape(glyph)}</text>'
        )
    return Markup(bar)


def _row_frame(y: int, index: int, label: str, title: str, kind: str, extra_attrs: Markup) -> Markup:
    stripe = "pgbus-tl-stripe" + (" pgbus-tl-stripe-alt" if index % 2 else "")
    return Markup(
        f'<g class="pgbus-tl-row pgbus-tl-row-{escape(kind)}"{escape(extra_attrs)}><title>{escape(title)}</title>'
        f'<rect class="{stripe}" x="0" y="{y}" width="{WIDTH}" height="{ROW_HEIGHT}"/>'
        f'<text class="pgbus-tl-label" x="8" y="{y + ROW_HEIGHT // 2 + 4}">{escape(label)}</text>'
    )


def _paused_row(paused, axis, y, labels, *, now, locale, tz) -> Markup:
    parts = [_row_frame(y, 1, _ellipsize(labels["paused_row"]), labels["paused_row"], "paused", Markup(""))]
    parts += [_bar(period, axis, y, labels, now=now, locale=locale, tz=tz) for period in paused]
    parts.append(Markup("</g>"))
    return Markup("").join(parts)


def _attempt_row(step, segments, axis, y, index, labels, markers, *, now, locale, tz) -> Markup:
    name, attempt, status = str(step.get("step_name") or ""), step.get("attempt") or 1, step.get("status")
    title = t(
        "pgbus.workflows.timeline.row_title",
        step=name,
        attempt=attempt,
        status=labels["statuses"].get(status, status or ""),
    )
    attrs = Markup(f' data-step="{escape(name)}" data-attempt="{escape(attempt)}" data-status="{escape(status or "")}"')
    label = _ellipsize(f"{name} #{attempt}")
    if bidi.has_controls(name):
        # Isolated (bidi.py), so a control in the name cannot turn the
        # attempt number around; cut first, so the cut keeps the isolate whole.
        suffix = f" #{attempt}"
        label = bidi.isolate_text(_ellipsize(name, max(LABEL_CHARS - len(suffix), 4))) + suffix
    parts = [_row_frame(y, index, label, title, "attempt", attrs)]
    parts += [_bar(segment, axis, y, labels, now=now, locale=locale, tz=tz) for segment in segments]
    for event in markers:
        if event.get("step_id") is not None and event.get("step_id") == step.get("id"):
            x, mid = axis.x(event["created_at"]), y + ROW_HEIGHT // 2
            parts.append(
                Markup(
                    '<path class="pgbus-tl-marker" d="M{x0} {mid} L{x} {top} L{x1} {mid} L{x} {bottom} Z">'
                    "<title>{title}</title></path>"
                ).format(
                    x0=_num(x - 5),
                    x=_num(x),
                    x1=_num(x + 5),
                    mid=mid,
                    top=mid - 6,
                    bottom=mid + 6,
                    title=labels["wait_timed_out"],
                )  # fmt: skip
            )
    parts.append(Markup("</g>"))
    return Markup("").join(parts)
