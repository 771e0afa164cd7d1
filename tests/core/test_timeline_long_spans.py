"""A timeline over any span draws a bounded axis: a step due in year 9999
(written before times that far ahead were refused, or by another client)
gives a handful of ticks, not one per year."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from datetime import UTC, datetime, timedelta

import pytest

from pgbus_web.web.drawing import timeline

NOW = datetime(2026, 1, 5, 14, 5, 3, tzinfo=UTC)
SVG = "{http://www.w3.org/2000/svg}"
YEAR = 365 * 86400


def ticks_of(markup) -> list[ET.Element]:
    root = ET.fromstring(str(markup))
    return [element for element in root.iter() if "pgbus-tl-tick" in (element.get("class") or "").split()]


def far_step(due: datetime) -> dict:
    return {
        "id": 1, "step_name": "capture_payment", "status": "scheduled", "attempt": 2,
        "created_at": NOW - timedelta(minutes=5), "scheduled_at": due, "waiting_since": None,
        "started_at": None, "finished_at": None, "updated_at": NOW - timedelta(minutes=5),
    }  # fmt: skip


@pytest.mark.parametrize("tz", ["UTC", "Pacific/Kiritimati", "America/New_York"])
def test_a_step_due_in_year_9999_draws_a_few_ticks_quickly(tz):
    steps = [far_step(datetime(9999, 12, 31, 23, 59, tzinfo=UTC))]
    markup = timeline.render(steps, [], now=NOW, locale="en", tz=tz)  # loads the locale data, not timed
    # Before the bound: ~8,000 ticks and over a second; the ticks drawn are
    # the measure of the work, not a stopwatch a busy machine would fail.
    assert 2 <= len(ticks_of(markup)) <= 12
    assert len(str(markup)) < 20_000


@pytest.mark.parametrize("years", [8, 30, 365, 2_000, 7_973])
def test_spans_longer_than_the_steps_use_whole_years_and_stay_bounded(years):
    axis = timeline._Axis(NOW, NOW + timedelta(days=365 * years))
    step, moments = axis.ticks(UTC)
    assert step % YEAR == 0
    assert axis.span / step <= timeline.MAX_TICKS
    assert 1 <= len(moments) <= timeline.MAX_TICKS + 1
    assert all(NOW <= moment <= axis.end for moment in moments)
