"""Every page at a desktop and a phone size, light and dark, in English,
German and Japanese: nothing wider than the window, no text cut by an
element that hides its overflow (those that clip on purpose, a two-line
clamp, carry data-pgbus-clamp), the navigation's links on one line each,
and the bulk dialog's title and start button on screen. With
PGBUS_TEST_SCREENSHOTS naming a directory, each view is saved there as a
PNG to look at; unset, nothing is written.

Skipped only when /usr/bin/chromium is missing (CI installs it)."""

from __future__ import annotations

import pytest
from support.action_support import ago, paused_on_capture
from support.browser import WAIT_MS, requires_chromium, serve
from support.page_layout import CUT_TEXT, DIALOG, GROUP_BUTTON, INSIDE, LOCALES, admin_app, pages, saved_to, with_locale  # noqa: F401 (fixtures)
from support.web_helpers import step

from pgbus_web.demo.workflows import REGISTRY
from pgbus_web.runtime import operation_runner

pytestmark = requires_chromium


@pytest.fixture
def app(database):
    return admin_app(database)


@pytest.fixture
def server(app):
    yield from serve(app)


SIZES = [(1280, 800), (390, 844)]
SCHEMES = ["light", "dark"]


@pytest.fixture
def paths(app, runs, engine):
    found = pages(app, runs, engine)
    # A needs-attention group with Retry, for the dialog; the operation done.
    paused = [paused_on_capture(runs, paused_at=ago(minutes=5 + index)) for index in range(3)]
    runner = operation_runner.Runner(engine, REGISTRY)
    while runner.step() is not None:
        pass
    # A search inside the arguments, with its chips and the export links.
    for carrier in ("dhl", "ups"):
        runs.make(
            "waiting",
            arguments={"customer_id": 42, "order": {"id": 1042}},
            signals_=[{"name": "shipment_confirmed", "payload": {"carrier": carrier}}],
        )
    found["argument_search"] = "/workflows?arg.customer_id=42&signal.carrier=dhl&q=customer_id:42"
    # Two refunds compared: one failed at issue_refund, one completed.
    failed = runs.make(
        "failed",
        step("validate_refund", "completed", started_at=ago(minutes=9), finished_at=ago(minutes=8)),
        step(
            "issue_refund",
            "failed",
            error_class="Payments::GatewayTimeout",
            error_message="the payment gateway did not answer within 30 seconds\nbacktrace",
        ),
        workflow_class="RefundWorkflow",
        arguments={
            "customer": {"id": 42},
            "amount": {"value": 1250, "currency": "EUR"},
            "reason": "damaged",
            "items": ["a"],
        },
    )
    done = runs.make(
        "completed",
        step("validate_refund", "completed"),
        step("issue_refund", "completed"),
        step("notify_customer", "completed"),
        workflow_class="RefundWorkflow",
        arguments={"customer": {"id": 42}, "amount": 990, "items": ["a", "b"]},
    )
    found["compare"] = f"/workflows/compare?a={failed}&b={done}"
    found["compare_run"] = f"/workflows/{failed}"
    # The index searching for the end of one run's id (its one match offered).
    found["search_fragment"] = f"{found['index']}?q={paused[0][-12:]}"
    return found


@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("size", SIZES, ids=lambda size: f"{size[0]}x{size[1]}")
def test_every_page_in_every_language_fits_and_cuts_no_text(chromium, server, paths, size, scheme):
    width, height = size
    folder = saved_to()
    context = chromium.new_context(
        viewport={"width": width, "height": height}, color_scheme=scheme, timezone_id="Europe/Oslo"
    )
    page = context.new_page()
    page.set_default_timeout(WAIT_MS)
    problems: dict[str, object] = {}
    try:
        # The first visit reloads once in the browser's zone (timezone.js).
        page.goto(server + paths["index"])
        page.wait_for_load_state("networkidle")
        for locale in LOCALES:
            for name, path in [*paths.items(), ("dialog", paths["index"])]:
                where = f"{locale} {name}"
                page.goto(server + with_locale(path, locale))
                page.wait_for_load_state("load")
                if name == "dialog":
                    page.locator(GROUP_BUTTON).click()
                    page.locator(f"{DIALOG}[open]").wait_for()
                    page.wait_for_timeout(100)
                    for part in ("h2", "button.pgbus-operation-start"):
                        if not page.evaluate(INSIDE, f"{DIALOG} {part}"):
                            problems[f"{where}: {part} off screen"] = True
                widths = page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
                if widths[0] > widths[1]:
                    problems[f"{where}: wider than the window"] = widths
                # Each navigation link on one line (Japanese once broke them
                # after every character beside a wide end of the top bar).
                heights = page.evaluate(
                    "() => Array.from(document.querySelectorAll('.pgbus-nav a'),"
                    " (a) => Math.round(a.getBoundingClientRect().height))"
                )
                if max(heights) > min(heights):
                    problems[f"{where}: a navigation link wraps"] = heights
                cut = page.evaluate(CUT_TEXT)
                if cut:
                    problems[f"{where}: text cut"] = cut
                if folder is not None:
                    page.screenshot(
                        path=str(folder / f"{locale}-{width}x{height}-{scheme}-{name}.png"), full_page=name != "dialog"
                    )
    finally:
        context.close()
    assert problems == {}, problems


def test_the_cut_text_check_sees_cut_text_and_lets_a_clamp_be(chromium):
    # Control for the check above: a narrow box that hides a long word is
    # found; the same box marked as clamped on purpose, and a box that fits, are not.
    context = chromium.new_context(viewport={"width": 390, "height": 844})
    page = context.new_page()
    try:
        page.set_content(
            '<div id="cut" style="width:4rem;overflow:hidden;white-space:nowrap">Eindeutigkeitssperren</div>'
            '<div data-pgbus-clamp style="width:4rem;overflow:hidden;white-space:nowrap">Eindeutigkeitssperren</div>'
            '<div style="width:20rem;overflow:hidden">Sperren</div>'
        )
        cut = page.evaluate(CUT_TEXT)
        assert len(cut) == 1 and "Eindeutigkeitssperren" in cut[0], cut
    finally:
        context.close()
