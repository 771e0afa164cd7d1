"""The zone a "Resume later" or "Reschedule" time is read in: the one the
form was drawn in (its hidden ``tz`` field), so a first page drawn in UTC
before the browser reported its zone still means what it showed."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from support.action_support import message, paused_on_capture, ready_later, steps_of
from support.web_helpers import soup


def url(workflow_id: str, verb: str) -> str:
    return f"/workflows/{workflow_id}/{verb}"


@pytest.mark.parametrize("verb, make", [("resume_at", paused_on_capture), ("reschedule", ready_later)])
def test_a_first_visit_form_carries_the_zone_it_was_drawn_in(app, runs, make, verb):
    client = app.test_client()  # a fresh browser: no zone cookie yet
    page = soup(client.get(f"/workflows/{make(runs)}", headers={"X-User": "alice"}))
    form = page.select_one(f"#pgbus-action-{verb}")
    assert form.select_one('input[name="tz"]')["type"] == "hidden"
    assert form.select_one('input[name="tz"]')["value"] == "UTC"


def test_the_form_zone_wins_over_a_cookie_set_after_the_page_was_drawn(browser, runs, engine):
    workflow_id = paused_on_capture(runs)
    zone = soup(browser.load(f"/workflows/{workflow_id}")).select_one('#pgbus-action-resume_at input[name="tz"]')[
        "value"
    ]
    assert zone == "UTC"
    # timezone.js sets the cookie once the first page is on screen.
    browser.client.set_cookie("pgbus_tz", "America/New_York")
    response = browser.post(url(workflow_id, "resume_at"), {"at": "2028-01-31T14:05", "tz": zone}, htmx=True)
    assert response.status_code == 200, message(response)
    assert steps_of(engine, workflow_id)[-1]["scheduled_at"] == datetime(2028, 1, 31, 14, 5, tzinfo=UTC)


@pytest.mark.parametrize("verb, make", [("resume_at", paused_on_capture), ("reschedule", ready_later)])
def test_a_time_is_read_in_the_zone_the_form_names(browser, runs, engine, verb, make):
    workflow_id = make(runs)
    response = browser.post(url(workflow_id, verb), {"at": "2028-01-31T14:05", "tz": "Europe/Berlin"}, htmx=True)
    assert response.status_code == 200, message(response)
    # 14:05 in Berlin in winter is 13:05 UTC.
    assert steps_of(engine, workflow_id)[-1]["scheduled_at"] == datetime(2028, 1, 31, 13, 5, tzinfo=UTC)


@pytest.mark.parametrize("cookie, expected_hour", [("Asia/Tokyo", 5), (None, 14)], ids=["cookie", "utc"])
@pytest.mark.parametrize("zone", ["Mars/Olympus", "../../etc/passwd", "Europe/Berlin\x00", "x" * 300, ""])
def test_a_zone_that_is_not_real_falls_back_to_the_cookie_then_utc(browser, runs, engine, zone, cookie, expected_hour):
    workflow_id = paused_on_capture(runs)
    if cookie:
        browser.client.set_cookie("pgbus_tz", cookie)
    response = browser.post(url(workflow_id, "resume_at"), {"at": "2028-01-31T14:05", "tz": zone}, htmx=True)
    assert response.status_code == 200, message(response)
    expected = datetime(2028, 1, 31, expected_hour, 5, tzinfo=UTC)
    assert steps_of(engine, workflow_id)[-1]["scheduled_at"] == expected
