"""The operations' pages in a real browser (Debian's Chromium): every
piece is drawn with the dashboard's own styles (the facts grid, toned
badges, a full-width progress bar with its words in a polite live region),
nothing is wider than a phone, a badge's label and count read apart, and
the "Operation N started." banner goes once the operation is done.

Skipped only when /usr/bin/chromium is missing (CI installs it)."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect
from support.action_support import operator_app, paused_on_capture
from support.browser import WAIT_MS, requires_chromium, serve

from pgbus_web.demo.workflows import REGISTRY
from pgbus_web.runtime import operation_runner

pytestmark = requires_chromium

LIST = "/workflows/operations"


@pytest.fixture
def server(database):
    yield from serve(operator_app(database, actor_name=lambda request: "browser"))


def finish(engine):
    runner = operation_runner.Runner(engine, REGISTRY)
    while runner.step() is not None:
        pass


def start_through_the_dialog(page, server, reason="gateway back"):
    """The index filtered to the paused runs, its entry, the preview dialog
    and its confirmation: the operation's page, as an operator gets there."""
    page.goto(server + "/workflows?status=paused")
    page.locator("form.pgbus-operation-entry button").click()
    page.locator("#pgbus-operation-reason").fill(reason)
    page.locator("form.pgbus-operation-form button[type=submit]").click()
    page.wait_for_url("**/workflows/operations/*")


def styled(page, selector: str) -> dict:
    return page.locator(selector).first.evaluate(
        """element => { const style = getComputedStyle(element);
             return {display: style.display, width: element.getBoundingClientRect().width,
                     parent: element.parentElement.getBoundingClientRect().width,
                     background: style.backgroundColor, radius: style.borderRadius,
                     classes: element.className, appearance: style.appearance}; }"""
    )


@pytest.mark.parametrize("width, height", [(1280, 800), (390, 844)])
def test_the_operations_pages_wear_the_dashboards_styles(chromium, server, runs, engine, width, height):
    for _ in range(3):
        paused_on_capture(runs)
    context = chromium.new_context(viewport={"width": width, "height": height})
    page = context.new_page()
    page.set_default_timeout(WAIT_MS)
    try:
        start_through_the_dialog(page, server)
        assert "started" in page.locator("#pgbus-messages").inner_text()
        finish(engine)
        # The page's own poll sees it done: the banner goes, the polling stops.
        page.locator('#pgbus-operation[data-status="done"]').wait_for()
        expect(page.locator("#pgbus-messages p")).to_have_count(0, timeout=WAIT_MS)
        facts = styled(page, "#pgbus-operation dl")
        assert "pgbus-facts" in facts["classes"] and facts["display"] == "grid", facts
        badge = styled(page, "#pgbus-operation-title .pgbus-badge")
        assert "pgbus-tone-green" in badge["classes"] and badge["radius"] != "0px", badge
        assert badge["background"] not in ("rgba(0, 0, 0, 0)", "transparent"), badge
        bar = styled(page, "#pgbus-operation progress")
        assert bar["appearance"] == "none" and bar["width"] >= bar["parent"] - 1, bar
        live = page.locator("#pgbus-operation [aria-live=polite]")
        assert live.locator("progress").count() == 1
        assert live.inner_text().strip() == "3 of 3 runs handled"
        widths = page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
        assert widths[0] <= widths[1], widths
        # A reload of a done operation shows no stale banner either.
        page.reload()
        assert page.locator("#pgbus-messages").inner_text().strip() == ""

        page.goto(server + LIST)
        headers = [text.strip().lower() for text in page.locator("#pgbus-operations th").all_inner_texts()]
        assert "reason" in headers, headers
        row_badge = styled(page, "tr.pgbus-operation-row .pgbus-badge")
        assert "pgbus-tone-green" in row_badge["classes"], row_badge
        widths = page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
        assert widths[0] <= widths[1], widths

        # A badge with a count reads its label, a space, then the count.
        page.goto(server + "/workflows")
        counted = page.locator(".pgbus-status-counts a.pgbus-badge").first.inner_text()
        assert re.fullmatch(r"\D+\S \d+", counted), counted
    finally:
        context.close()
