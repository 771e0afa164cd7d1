"""Times on the pages: the sweep's stored English sentences ("in progress
since 2026-...+00:00, longer than the stall threshold of 600s") and the
audit trail's ISO details are said in the operator's language through the
time formatter; in Chromium no page shows a raw ISO time in any locale,
the zone is named, and a first visit (no zone cookie yet) shows the
browser's zone, not UTC.

The browser part is skipped only when /usr/bin/chromium is missing."""

from __future__ import annotations

import re

import pytest
from support.action_support import ago, operator_app
from support.browser import WAIT_MS, requires_chromium, serve
from support.web_helpers import soup, step, text_of

from pgbus_web import i18n
from pgbus_web.rules import states
from pgbus_web.runtime import flow

ISO = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d")


def stalled_run(runs) -> str:
    """A run the sweep paused as stalled, written as the sweep writes it."""
    started = ago(minutes=15)
    return runs.make(
        states.PAUSED,
        step(
            "capture_payment",
            "failed",
            error_class=states.STEP_STALLED_ERROR,
            error_message=f"in progress since {flow.iso(started)}, longer than the stall threshold of 600s",
            started_at=started,
            finished_at=ago(minutes=2),
        ),
        paused_at=ago(minutes=2),
        events_=[
            {
                "event": "stall_detected",
                "actor": "system",
                "step": 0,
                "details": {"started_at": flow.iso(started), "threshold_seconds": 600},
            }
        ],
    )


def test_the_stall_sentence_and_details_are_said_in_the_operators_language(client, runs):
    workflow_id = stalled_run(runs)
    index = soup(client.get("/workflows?locale=de"))
    message = text_of(index.select_one("#pgbus-attention .pgbus-attention-message"))
    assert re.fullmatch(r"Läuft seit \d\d:\d\d:\d\d ?, länger als die Hängegrenze von 10 min", message), message
    assert not ISO.search(message)
    page = soup(client.get(f"/workflows/{workflow_id}?locale=de"))
    error = text_of(page.select_one(".pgbus-error-message"))
    assert error.startswith("Läuft seit ") and not ISO.search(error)
    details = text_of(page.select_one("#pgbus-run-audit .pgbus-audit-details"))
    assert not ISO.search(details) and "10 min" in details
    # A message that is not the sweep's is shown as stored (the control).
    other = runs.make(
        states.PAUSED,
        step("capture_payment", "failed", error_class="ValueError", error_message="in progress since yesterday"),
        paused_at=ago(minutes=1),
    )
    other_page = soup(client.get(f"/workflows/{other}?locale=de"))
    assert text_of(other_page.select_one(".pgbus-error-message")) == "in progress since yesterday"


@pytest.fixture
def server(database):
    yield from serve(operator_app(database, actor_name=lambda request: "browser", refresh_interval=600))


@requires_chromium
def test_no_page_shows_a_raw_iso_time_in_any_locale(chromium, server, runs):
    workflow_id = stalled_run(runs)
    context = chromium.new_context(timezone_id="America/New_York")
    page = context.new_page()
    page.set_default_timeout(WAIT_MS)
    found = {}
    try:
        for locale in i18n.available_locales():
            for path in ("/workflows", f"/workflows/{workflow_id}", "/locks", "/workflows/operations"):
                page.goto(f"{server}{path}?locale={locale}")
                page.wait_for_load_state("load")
                text = page.evaluate("document.body.innerText")
                if ISO.search(text):
                    found[(locale, path)] = ISO.findall(text)
        assert found == {}
    finally:
        context.close()


@requires_chromium
def test_a_first_visit_shows_the_browsers_zone_and_names_it(chromium, server, runs):
    stalled_run(runs)
    context = chromium.new_context(timezone_id="Asia/Tokyo")  # no cookie yet
    page = context.new_page()
    page.set_default_timeout(WAIT_MS)
    try:
        page.goto(f"{server}/workflows")
        page.locator('.pgbus-zone-note[data-zone="Asia/Tokyo"]').wait_for()
        assert page.locator(".pgbus-zone-note").inner_text() == "Times in Asia/Tokyo"
        title = page.locator("#pgbus-runs time").first.get_attribute("title")
        assert title.endswith("+0900"), title
    finally:
        context.close()
