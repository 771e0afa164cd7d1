"""The pages of an operation's pace, pause and approval in real Chromium
(docs/operations.md): an operation awaiting approval (its Approve button,
its pace), a paused one (Go on, who paused it) and the preview dialog with
its pace fields open, at a desktop and a phone size, light and dark, in
English, German and Japanese: axe-clean, nothing wider than the window,
the dialog's title and start button on screen. With PGBUS_TEST_SCREENSHOTS
naming a directory each view is saved there as a PNG."""

from __future__ import annotations

import pytest
from support.action_support import ago, operator_app, paused_on_capture
from support.browser import WAIT_MS, axe_violations, requires_chromium, serve
from support.page_layout import CUT_TEXT, DIALOG, GROUP_BUTTON, INSIDE, saved_to, with_locale

from pgbus_web.core import page_reads
from pgbus_web.demo.workflows import REGISTRY
from pgbus_web.runtime import operation_policy, operation_record

pytestmark = requires_chromium

SIZES = [(1280, 800), (390, 844)]
SCHEMES = ["light", "dark"]
LOCALES = ["en", "de", "ja"]


@pytest.fixture
def app(database):
    # An approver: the page that waits for approval shows its Approve.
    return operator_app(
        database,
        actor_name=lambda request: "browser",
        refresh_interval=600,
        approval_threshold=2,
        role_of=lambda request: "approver",
    )


@pytest.fixture
def server(app):
    yield from serve(app)


@pytest.fixture
def paths(app, runs, engine):
    for index in range(4):
        paused_on_capture(runs, paused_at=ago(minutes=5 + index))
    settings = app.extensions["pgbus_web"].settings
    common = dict(registry=REGISTRY, thresholds=page_reads.thresholds(engine), expected=None)
    paused_filter = operation_record.filters_of({"filters": {"status": "paused"}})
    awaiting = operation_policy.create(
        engine,
        paused_filter,
        "resume",
        None,
        reason="gateway back after the outage",
        actor="dashboard:alice",
        rate=50,
        max_in_flight=10,
        approval=page_reads.approval(engine, settings),
        **common,
    )
    held = operation_policy.create(
        engine,
        paused_filter,
        "resume",
        None,
        reason="slowly, the gateway is fragile",
        actor="dashboard:alice",
        rate=0.5,
        **common,
    )
    operation_record.pause(engine, held["id"], actor="dashboard:bob")
    return {
        "awaiting": f"/workflows/operations/{awaiting['id']}",
        "paused": f"/workflows/operations/{held['id']}",
        "dialog": "/workflows",
    }


@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("size", SIZES, ids=lambda size: f"{size[0]}x{size[1]}")
def test_pace_pause_and_approval_pages_fit_and_pass_axe(chromium, server, paths, size, scheme):
    width, height = size
    folder = saved_to()
    browser_context = chromium.new_context(
        viewport={"width": width, "height": height}, color_scheme=scheme, timezone_id="Europe/Oslo"
    )
    page = browser_context.new_page()
    page.set_default_timeout(WAIT_MS)
    problems: dict[str, object] = {}
    try:
        page.goto(server + paths["awaiting"])
        page.wait_for_load_state("networkidle")
        for locale in LOCALES:
            for name, path in paths.items():
                where = f"{locale} {name}"
                page.goto(server + with_locale(path, locale))
                page.wait_for_load_state("load")
                if name == "dialog":
                    page.locator(GROUP_BUTTON).click()
                    page.locator(f"{DIALOG}[open]").wait_for()
                    page.locator(f"{DIALOG} details.pgbus-operation-pace summary").click()
                    page.wait_for_timeout(100)
                    for part in ("h2", "button.pgbus-operation-start"):
                        page.locator(f"{DIALOG} {part}").scroll_into_view_if_needed()
                        if not page.evaluate(INSIDE, f"{DIALOG} {part}"):
                            problems[f"{where}: {part} off screen"] = True
                    if not page.locator(f"{DIALOG} input[name=rate]").is_visible():
                        problems[f"{where}: the rate field is not shown"] = True
                else:
                    expected = "form.pgbus-operation-approve" if name == "awaiting" else "form.pgbus-operation-resume"
                    if not page.locator(expected).is_visible():
                        problems[f"{where}: {expected} not shown"] = True
                    if not page.locator("form.pgbus-operation-pace-form").is_visible():
                        problems[f"{where}: the pace form is not shown"] = True
                widths = page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
                if widths[0] > widths[1]:
                    problems[f"{where}: wider than the window"] = widths
                cut = page.evaluate(CUT_TEXT)
                if cut:
                    problems[f"{where}: text cut"] = cut
                violations = axe_violations(page)
                if violations:
                    problems[f"{where}: axe"] = violations
                if folder is not None:
                    page.screenshot(
                        path=str(folder / f"pace-{locale}-{width}x{height}-{scheme}-{name}.png"),
                        full_page=name != "dialog",
                    )
    finally:
        browser_context.close()
    assert problems == {}, problems
