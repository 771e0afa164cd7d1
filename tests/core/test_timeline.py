"""The run timeline: bars per step attempt, paused periods from the audit
trail, and the SVG (parsed, not compared as text): rows, bars, legend,
axis, tooltips, fifty attempts, escaping, no inline style."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from datetime import UTC, datetime, timedelta

import pytest

from pgbus_web.web.drawing import timeline
from pgbus_web.web.drawing.timeline import Segment

NOW = datetime(2026, 1, 5, 14, 5, 3, tzinfo=UTC)
SVG = "{http://www.w3.org/2000/svg}"


def ago(**delta) -> datetime:
    return NOW - timedelta(**delta)


def ahead(**delta) -> datetime:
    return NOW + timedelta(**delta)


def attempt(name="capture_payment", status="completed", attempt=1, id=1, **times):
    row = {
        "id": id,
        "step_name": name,
        "status": status,
        "attempt": attempt,
        "created_at": None,
        "scheduled_at": None,
        "waiting_since": None,
        "started_at": None,
        "finished_at": None,
        "updated_at": None,
    }
    row.update(times)
    return row


def series(segments):
    return [(s.series, s.start, s.end, s.open) for s in segments]


# --- one attempt's bars -----------------------------------------------------------


def test_attempt_that_ran_at_once_and_completed():
    step = attempt(created_at=ago(minutes=10), scheduled_at=ago(minutes=10), started_at=ago(minutes=9),
                   finished_at=ago(minutes=8))  # fmt: skip
    assert series(timeline.attempt_segments(step, now=NOW)) == [
        ("queued", ago(minutes=10), ago(minutes=9), False),
        ("ran_ok", ago(minutes=9), ago(minutes=8), False),
    ]


def test_attempt_due_later_waited_until_due():
    step = attempt(name="send_tips", status="scheduled", created_at=ago(hours=1), scheduled_at=ahead(hours=23))
    assert series(timeline.attempt_segments(step, now=NOW)) == [("waited", ago(hours=1), ahead(hours=23), False)]


def test_attempt_due_and_not_picked_up_is_queued_until_now():
    step = attempt(status="scheduled", created_at=ago(minutes=30), scheduled_at=ago(minutes=20))
    assert series(timeline.attempt_segments(step, now=NOW)) == [
        ("waited", ago(minutes=30), ago(minutes=20), False),
        ("queued", ago(minutes=20), NOW, True),
    ]


def test_attempt_in_progress_runs_open_to_now():
    step = attempt(status="in_progress", created_at=ago(minutes=5), scheduled_at=ago(minutes=5),
                   started_at=ago(minutes=4))  # fmt: skip
    assert series(timeline.attempt_segments(step, now=NOW))[-1] == ("ran_open", ago(minutes=4), NOW, True)


@pytest.mark.parametrize(
    ("status", "kind"), [("failed", "ran_failed"), ("cancelled", "ran_cancelled"), ("completed", "ran_ok")]
)
def test_attempt_ran_by_outcome(status, kind):
    step = attempt(status=status, created_at=ago(minutes=5), scheduled_at=ago(minutes=5), started_at=ago(minutes=4),
                   finished_at=ago(minutes=3))  # fmt: skip
    assert series(timeline.attempt_segments(step, now=NOW))[-1] == (kind, ago(minutes=4), ago(minutes=3), False)


def test_signal_wait_comes_before_the_run():
    # Waits from creation; the claimed signal makes it due, then it runs.
    step = attempt(name="await_shipment", created_at=ago(hours=3), waiting_since=ago(hours=3),
                   scheduled_at=ago(minutes=10), started_at=ago(minutes=9), finished_at=ago(minutes=8))  # fmt: skip
    assert series(timeline.attempt_segments(step, now=NOW)) == [
        ("waiting", ago(hours=3), ago(minutes=10), False),
        ("queued", ago(minutes=10), ago(minutes=9), False),
        ("ran_ok", ago(minutes=9), ago(minutes=8), False),
    ]


def test_signal_still_awaited_waits_to_now():
    step = attempt(name="await_profile", status="waiting", created_at=ago(hours=3), scheduled_at=ago(hours=3),
                   waiting_since=ago(hours=3))  # fmt: skip
    assert series(timeline.attempt_segments(step, now=NOW)) == [("waiting", ago(hours=3), NOW, True)]


def test_batch_wait_comes_after_the_run():
    # The step runs, opens its fan-out, then waits for the batch to finish.
    step = attempt(name="notify_vendors", created_at=ago(minutes=30), scheduled_at=ago(minutes=30),
                   started_at=ago(minutes=29), waiting_since=ago(minutes=28), finished_at=ago(minutes=2))  # fmt: skip
    assert series(timeline.attempt_segments(step, now=NOW)) == [
        ("queued", ago(minutes=30), ago(minutes=29), False),
        ("ran_ok", ago(minutes=29), ago(minutes=28), False),
        ("waiting", ago(minutes=28), ago(minutes=2), False),
    ]


def test_attempt_ended_without_finished_at_ends_at_its_last_write():
    step = attempt(status="cancelled", created_at=ago(minutes=5), scheduled_at=ago(minutes=5),
                   started_at=ago(minutes=4), updated_at=ago(minutes=1))  # fmt: skip
    assert series(timeline.attempt_segments(step, now=NOW))[-1] == (
        "ran_cancelled",
        ago(minutes=4),
        ago(minutes=1),
        False,
    )


# --- paused periods ---------------------------------------------------------------


def ev(name, at, **extra):
    return {"event": name, "created_at": at, "actor": "system", **extra}


def test_paused_then_resumed():
    events = [ev("started", ago(hours=2)), ev("paused", ago(hours=1)), ev("resumed", ago(minutes=30))]
    assert timeline.paused_periods(events, now=NOW) == [Segment("paused", ago(hours=1), ago(minutes=30))]


def test_failure_that_paused_the_run_until_resumed():
    events = [ev("step_failed", ago(hours=1)), ev("resumed", ago(minutes=30)), ev("step_scheduled", ago(minutes=30))]
    assert timeline.paused_periods(events, now=NOW) == [Segment("paused", ago(hours=1), ago(minutes=30))]


def test_failure_that_was_retried_is_no_pause():
    events = [
        ev("step_failed", ago(hours=1)),
        ev("step_reattempted", ago(hours=1)),
        ev("step_started", ago(minutes=50)),
    ]
    assert timeline.paused_periods(events, now=NOW) == []


def test_pause_still_open_runs_to_now():
    events = [ev("stall_detected", ago(minutes=20)), ev("paused", ago(minutes=20))]
    assert timeline.paused_periods(events, now=NOW) == [Segment("paused", ago(minutes=20), NOW, True)]


def test_pause_ended_by_cancel():
    events = [ev("paused", ago(minutes=20)), ev("cancelled", ago(minutes=5))]
    assert timeline.paused_periods(events, now=NOW) == [Segment("paused", ago(minutes=20), ago(minutes=5))]


def test_trailing_failure_of_a_failed_run_is_no_pause():
    events = [ev("step_failed", ago(minutes=20))]
    assert timeline.paused_periods(events, now=NOW, run_status="failed") == []


def test_two_pauses():
    events = [ev("paused", ago(hours=3)), ev("resumed", ago(hours=2)), ev("wait_timed_out", ago(hours=1)),
              ev("resumed", ago(minutes=10))]  # fmt: skip
    assert timeline.paused_periods(events, now=NOW) == [
        Segment("paused", ago(hours=3), ago(hours=2)),
        Segment("paused", ago(hours=1), ago(minutes=10)),
    ]


# --- the SVG ------------------------------------------------------------------------


def parse(markup) -> ET.Element:
    root = ET.fromstring(str(markup))
    assert root.tag == f"{SVG}svg"
    return root


def classes(element) -> list[str]:
    return (element.get("class") or "").split()


def find_all(root, cls) -> list[ET.Element]:
    return [element for element in root.iter() if cls in classes(element)]


def title_of(element) -> str:
    return element.find(f"{SVG}title").text


def order_run() -> tuple[list[dict], list[dict]]:
    steps = [
        attempt("reserve_stock", "completed", id=1, created_at=ago(minutes=60), scheduled_at=ago(minutes=60),
                started_at=ago(minutes=59), finished_at=ago(minutes=58)),
        attempt("capture_payment", "failed", id=2, created_at=ago(minutes=58), scheduled_at=ago(minutes=58),
                started_at=ago(minutes=57), finished_at=ago(minutes=56)),
        attempt("capture_payment", "in_progress", attempt=2, id=3, created_at=ago(minutes=56),
                scheduled_at=ago(minutes=30), started_at=ago(minutes=20)),
    ]  # fmt: skip
    events = [ev("step_failed", ago(minutes=56), step_id=2), ev("paused", ago(minutes=56)),
              ev("resumed", ago(minutes=30), actor="dashboard:alice")]  # fmt: skip
    return steps, events


def test_render_rows_and_bars():
    steps, events = order_run()
    root = parse(timeline.render(steps, events, now=NOW, locale="en", tz="UTC"))
    rows = find_all(root, "pgbus-tl-row-attempt")
    assert [(row.get("data-step"), row.get("data-attempt")) for row in rows] == [
        ("reserve_stock", "1"), ("capture_payment", "1"), ("capture_payment", "2"),
    ]  # fmt: skip
    bars = [[bar.get("data-series") for bar in find_all(row, "pgbus-tl-bar")] for row in rows]
    assert bars == [["queued", "ran_ok"], ["queued", "ran_failed"], ["waited", "queued", "ran_open"]]
    assert "pgbus-tl-open" in classes(find_all(rows[2], "pgbus-tl-bar")[-1])


def test_render_row_and_bar_tooltips():
    steps, events = order_run()
    root = parse(timeline.render(steps, events, now=NOW, locale="en", tz="UTC"))
    row = find_all(root, "pgbus-tl-row-attempt")[1]
    assert title_of(row) == "capture_payment #1: Failed"
    bar = find_all(row, "pgbus-tl-bar")[-1]
    assert title_of(bar).replace("\u202f", " ") == "Ran, failed: 1:08:03 PM – 1:09:03 PM (1m)"


def test_render_paused_row_and_band():
    steps, events = order_run()
    root = parse(timeline.render(steps, events, now=NOW, locale="en", tz="UTC"))
    [paused_row] = find_all(root, "pgbus-tl-row-paused")
    assert [bar.get("data-series") for bar in find_all(paused_row, "pgbus-tl-bar")] == ["paused"]
    assert paused_row.find(f"{SVG}text").text == "Run paused"
    assert len(find_all(root, "pgbus-tl-paused-band")) == 1
    assert root.get("data-rows") == "4"


def test_render_legend_names_the_series_drawn():
    # The key is HTML beside the chart (it wraps in any language), not
    # text placed in the SVG by a guessed width.
    steps, events = order_run()
    root = parse(timeline.render(steps, events, now=NOW, locale="en", tz="UTC"))
    assert find_all(root, "pgbus-tl-legend-item") == []
    legend = {item["series"]: item["label"] for item in timeline.legend(steps, events, now=NOW)}
    assert legend == {
        "waited": "Not yet due",
        "queued": "Queued",
        "paused": "Paused",
        "ran_ok": "Ran OK",
        "ran_failed": "Ran, failed",
        "ran_open": "Running",
    }


def test_render_axis_ticks_and_now_line():
    steps, events = order_run()
    root = parse(timeline.render(steps, events, now=NOW, locale="en", tz="UTC"))
    labels = [tick.find(f"{SVG}text").text.replace("\u202f", " ") for tick in find_all(root, "pgbus-tl-tick")]
    assert labels == ["1:10 PM", "1:20 PM", "1:30 PM", "1:40 PM", "1:50 PM", "2:00 PM"]
    xs = [float(tick.find(f"{SVG}line").get("x1")) for tick in find_all(root, "pgbus-tl-tick")]
    assert xs == sorted(xs) and timeline.LABEL_WIDTH <= xs[0] and xs[-1] <= timeline.LABEL_WIDTH + timeline.CHART_WIDTH
    [now_line] = find_all(root, "pgbus-tl-now")
    assert float(now_line.get("x1")) == pytest.approx(timeline.LABEL_WIDTH + timeline.CHART_WIDTH)


def test_render_axis_in_the_viewers_zone_and_language():
    steps, events = order_run()
    root = parse(timeline.render(steps, events, now=NOW, locale="de", tz="Europe/Berlin"))
    labels = [tick.find(f"{SVG}text").text for tick in find_all(root, "pgbus-tl-tick")]
    assert labels[0] == "14:10"


def test_render_multi_day_axis_names_the_days():
    steps = [attempt("send_tips", "scheduled", created_at=ago(hours=1), scheduled_at=ahead(days=3))]
    root = parse(timeline.render(steps, [], now=NOW, locale="en", tz="UTC"))
    labels = [tick.find(f"{SVG}text").text.replace("\u202f", " ") for tick in find_all(root, "pgbus-tl-tick")]
    assert labels[:3] == ["Jan 6, 12:00 AM", "12:00 PM", "Jan 7, 12:00 AM"]


def test_render_long_axis_is_days():
    steps = [attempt("send_tips", "scheduled", created_at=ago(hours=1), scheduled_at=ahead(days=10))]
    root = parse(timeline.render(steps, [], now=NOW, locale="en", tz="UTC"))
    labels = [tick.find(f"{SVG}text").text for tick in find_all(root, "pgbus-tl-tick")]
    assert labels[:3] == ["Jan 7", "Jan 9", "Jan 11"]


def test_render_wait_timed_out_marker():
    steps = [attempt("await_shipment", "failed", id=9, created_at=ago(days=3), waiting_since=ago(days=3),
                     finished_at=ago(minutes=5))]  # fmt: skip
    events = [ev("wait_timed_out", ago(minutes=5), step_id=9)]
    root = parse(timeline.render(steps, events, now=NOW, locale="en", tz="UTC"))
    [marker] = find_all(root, "pgbus-tl-marker")
    assert title_of(marker) == "Wait timed out"


def fifty_attempts(name="capture_payment"):
    steps = []
    for index in range(50):
        start = ago(minutes=100 - 2 * index)
        steps.append(attempt(name, "failed" if index < 49 else "in_progress", attempt=index + 1, id=index + 1,
                             created_at=start, scheduled_at=start, started_at=start + timedelta(seconds=20),
                             finished_at=None if index == 49 else start + timedelta(seconds=80)))  # fmt: skip
    return steps


def test_fifty_attempts_stay_legible():
    few = parse(timeline.render(fifty_attempts()[:5], [], now=NOW))
    many = parse(timeline.render(fifty_attempts(), [], now=NOW))
    rows = find_all(many, "pgbus-tl-row-attempt")
    assert len(rows) == 50
    # Rows keep their height: the SVG grows instead.
    stripes = [float(find_all(row, "pgbus-tl-stripe")[0].get("height")) for row in rows]
    assert set(stripes) == {timeline.ROW_HEIGHT}
    assert float(many.get("height")) - float(few.get("height")) == 45 * timeline.ROW_HEIGHT
    ys = [float(find_all(row, "pgbus-tl-stripe")[0].get("y")) for row in rows]
    assert all(b - a == timeline.ROW_HEIGHT for a, b in zip(ys, ys[1:], strict=False))
    assert len(find_all(many, "pgbus-tl-bar")) == 100
    # Every bar is at least wide enough to see.
    assert min(float(bar.get("width")) for bar in find_all(many, "pgbus-tl-bar")) >= timeline.MIN_BAR_WIDTH


def test_long_step_names_are_cut_with_the_full_name_in_the_tooltip():
    name = "notify_every_vendor_and_warehouse_about_the_order"
    root = parse(timeline.render(fifty_attempts(name)[:1], [], now=NOW))
    [row] = find_all(root, "pgbus-tl-row-attempt")
    label = row.find(f"{SVG}text").text
    assert len(label) == timeline.LABEL_CHARS and label.endswith("…")
    assert title_of(row).startswith(name + " #1")


def test_names_are_escaped():
    hostile = '<script>alert("x")</script>'
    steps = [attempt(hostile, "completed", created_at=ago(minutes=2), started_at=ago(minutes=1),
                     finished_at=NOW)]  # fmt: skip
    markup = str(timeline.render(steps, [], now=NOW))
    assert "<script>" not in markup
    root = parse(markup)
    assert find_all(root, "pgbus-tl-row-attempt")[0].get("data-step") == hostile


def test_no_inline_style_and_no_script():
    steps, events = order_run()
    root = parse(timeline.render(steps + fifty_attempts(), events, now=NOW))
    assert not [element for element in root.iter() if element.get("style") is not None]
    assert not [element for element in root.iter() if element.tag in (f"{SVG}style", f"{SVG}script")]
    assert not [name for element in root.iter() for name in element.attrib if name.startswith("on")]


def test_custom_labels():
    steps, _ = order_run()
    labels = timeline.default_labels()
    labels["title"] = "Zeitleiste"
    root = parse(timeline.render(steps[:1], [], now=NOW, labels=labels))
    assert title_of(root) == "Zeitleiste"


def test_no_steps_renders_nothing():
    assert str(timeline.render([], [], now=NOW)) == ""


def test_a_failed_attempt_has_a_glyph_as_well_as_a_colour():
    steps, events = order_run()
    root = parse(timeline.render(steps, events, now=NOW, locale="en", tz="UTC"))
    failed_bars = [bar for bar in find_all(root, "pgbus-tl-bar") if bar.get("data-series") == "ran_failed"]
    glyphs = find_all(root, "pgbus-tl-glyph")
    assert failed_bars and len(glyphs) == len(failed_bars)
    assert {glyph.text for glyph in glyphs} == {"✕"}
    # A good attempt has none (the control).
    assert any(bar.get("data-series") == "ran_ok" for bar in find_all(root, "pgbus-tl-bar"))
    keys = {item["series"]: item["glyph"] for item in timeline.legend(steps, events, now=NOW)}
    assert keys["ran_failed"] == "✕" and keys["ran_ok"] == ""
