"""The run page's windows and the 304 polls in a real browser (Debian's
Chromium, headless, through Playwright): "Show older events" swaps the
audit trail alone (no reload) and puts its address in the address bar;
the live refresh, answered 304 while nothing changes, keeps that window,
and shows a change made elsewhere once there is one."""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from support.action_support import long_history, operator_app
from support.browser import WAIT_MS, requires_chromium, serve

pytestmark = requires_chromium


ANSWERED: list[tuple[int, bool]] = []


@pytest.fixture
def server(database):
    """The dashboard polling every second; ANSWERED records each poll's
    status and whether the browser sent its tag."""
    from flask import request

    app = operator_app(database, actor_name=lambda request: "browser", refresh_interval=1)
    ANSWERED.clear()

    @app.after_request
    def record(response):
        if request.headers.get("HX-Request") and request.path.startswith("/workflows/"):
            ANSWERED.append((response.status_code, "If-None-Match" in request.headers))
        return response

    yield from serve(app)


def test_older_events_swap_in_place_and_the_polls_keep_them(chromium, server, runs, engine):
    run = long_history(engine, runs, 10, 120)
    context = chromium.new_context(locale="en-US", timezone_id="UTC")
    page = context.new_page()
    page.set_default_timeout(WAIT_MS)
    problems: list[str] = []
    page.on("pageerror", lambda error: problems.append(str(error)))
    try:
        page.goto(f"{server}/workflows/{run}")
        newest_first = page.locator("#pgbus-run-audit li.pgbus-event").first.inner_text()
        page.evaluate("window.pgbusMarker = 'still here'")
        page.click("#pgbus-run-audit a.pgbus-window-older")
        page.locator("#pgbus-run-audit a.pgbus-window-newest").wait_for()
        assert "events_before=" in page.url
        assert page.evaluate("window.pgbusMarker") == "still here"  # no reload
        older_first = page.locator("#pgbus-run-audit li.pgbus-event").first.inner_text()
        assert older_first != newest_first
        # Polls come every second; with nothing changed they keep the window.
        page.wait_for_timeout(3000)
        assert page.locator("#pgbus-run-audit li.pgbus-event").first.inner_text() == older_first
        assert "120 events" in page.locator("#pgbus-run-audit .pgbus-card-head").inner_text()
        # The browser revalidated its polls with their tags, and some were
        # answered 304 (its cached fragment then swapped in, unchanged).
        assert (304, True) in ANSWERED
        # A change made elsewhere shows at the next poll.
        with engine.begin() as conn:
            conn.execute(
                sa.text(
                    "INSERT INTO pgbus_workflow_events (workflow_id, event, actor) "
                    "VALUES (:w, 'resumed', 'dashboard:someone')"
                ),
                {"w": run},
            )
        page.locator("#pgbus-run-audit .pgbus-card-head", has_text="121 events").wait_for()
        assert page.locator("#pgbus-run-audit a.pgbus-window-newest").count() == 1
        assert problems == []
    finally:
        context.close()
