"""The bulk confirmation in a real browser, as a modal dialog: a group's
button opens the operation's preview over the page (showModal: a backdrop,
the rest of the page inert), its title and its start button on screen at
a desktop and a phone size, the page not scrolled, focus inside; Escape
and the back button close it and give focus back to the button that
opened it, on the list the operator was on.

Skipped only when /usr/bin/chromium is missing (CI installs it)."""

from __future__ import annotations

import pytest
from support.action_support import ago, operator_app, paused_on_capture
from support.browser import WAIT_MS, requires_chromium, serve

pytestmark = requires_chromium

# Enough runs for a long page: a dialog drawn in the page's flow lands
# far from the button, and its autofocused field scrolls the page to it.
RUNS = 60
SIZES = [(1280, 800), (390, 844)]
BUTTON = '#pgbus-attention tr.pgbus-attention-group[data-reason="paused_error"] form[data-verb="retry"] button'
DIALOG = "dialog#pgbus-operation-dialog"


@pytest.fixture
def server(database):
    yield from serve(operator_app(database, actor_name=lambda request: "browser", refresh_interval=1))


@pytest.fixture
def many_paused(runs):
    return [paused_on_capture(runs, paused_at=ago(minutes=5 + index)) for index in range(RUNS)]


def open_page(chromium, size, scheme="light", locale="en-US"):
    width, height = size
    context = chromium.new_context(
        locale=locale, timezone_id="Europe/Oslo", color_scheme=scheme, viewport={"width": width, "height": height}
    )
    page = context.new_page()
    page.set_default_timeout(WAIT_MS)
    problems: list[str] = []
    page.on(
        "console",
        lambda msg: (
            problems.append(msg.text)
            if msg.type == "error" and not msg.text.startswith("Failed to load resource")
            else None
        ),
    )
    page.on("pageerror", lambda error: problems.append(str(error)))
    page.problems = problems
    return context, page


def open_dialog(page):
    button = page.locator(BUTTON)
    button.focus()
    page.keyboard.press("Enter")
    page.locator(f"{DIALOG}[open]").wait_for()
    # A poll from here: the page's CSP refuses the eval a string predicate
    # of wait_for_function needs.
    for _ in range(50):
        if page.evaluate("(sel) => document.querySelector(sel).matches(':modal')", DIALOG):
            break
        page.wait_for_timeout(100)
    assert page.evaluate("(sel) => document.querySelector(sel).matches(':modal')", DIALOG), "not a modal dialog"
    return page.locator(DIALOG)


def focus_is_on_the_button(page) -> bool:
    return page.evaluate(f"() => document.activeElement === document.querySelector({BUTTON!r})")


def inside_viewport(page, selector) -> bool:
    return page.evaluate(
        "(sel) => { const r = document.querySelector(sel).getBoundingClientRect();"
        " return r.top >= 0 && r.left >= 0 && r.bottom <= innerHeight && r.right <= innerWidth; }",
        selector,
    )


@pytest.mark.parametrize("size", SIZES, ids=lambda size: f"{size[0]}x{size[1]}")
def test_the_group_button_opens_a_modal_dialog_on_screen(server, chromium, many_paused, size):
    context, page = open_page(chromium, size)
    try:
        page.goto(f"{server}/workflows")
        page.locator(BUTTON).scroll_into_view_if_needed()
        scrolled = page.evaluate("() => scrollY")
        open_dialog(page)
        assert page.evaluate("() => scrollY") == scrolled  # no jump
        assert inside_viewport(page, f"{DIALOG} h2")
        assert inside_viewport(page, f"{DIALOG} button.pgbus-operation-start")
        assert page.evaluate("(sel) => document.querySelector(sel).contains(document.activeElement)", DIALOG)
        # A backdrop over the page, and the dashboard's own surface.
        backdrop = page.evaluate(
            f"() => getComputedStyle(document.querySelector({DIALOG!r}), '::backdrop').backgroundColor"
        )
        assert backdrop not in ("rgba(0, 0, 0, 0)", "transparent")
        surface = page.evaluate(
            f"() => [getComputedStyle(document.querySelector({DIALOG!r})).backgroundColor,"
            " getComputedStyle(document.querySelector('.pgbus-card')).backgroundColor]"
        )
        assert surface[0] == surface[1]
        assert page.evaluate("() => document.documentElement.scrollWidth <= innerWidth")
        # Tab stays in the dialog (the page beneath is inert).
        for _ in range(12):
            page.keyboard.press("Tab")
            assert page.evaluate(
                "(sel) => { const a = document.activeElement; return a === "
                "document.body || document.querySelector(sel).contains(a); }",
                DIALOG,
            )
        assert page.problems == []
    finally:
        context.close()


def test_escape_closes_the_dialog_and_focus_goes_back_to_its_button(server, chromium, many_paused):
    context, page = open_page(chromium, SIZES[0])
    try:
        page.goto(f"{server}/workflows")
        open_dialog(page)
        page.keyboard.press("Escape")
        page.locator(f"{DIALOG}[open]").wait_for(state="detached")
        assert focus_is_on_the_button(page)
        assert page.problems == []
    finally:
        context.close()


def test_the_back_button_closes_the_dialog_on_the_same_list(server, chromium, many_paused):
    context, page = open_page(chromium, SIZES[1])
    try:
        page.goto(f"{server}/workflows")
        url = page.url
        dialog = open_dialog(page)
        dialog.locator(".pgbus-form-actions a.pgbus-button").click()
        page.locator(f"{DIALOG}[open]").wait_for(state="detached")
        assert page.url == url
        assert focus_is_on_the_button(page)
        # Opened again, it is fresh and modal again.
        open_dialog(page)
        assert page.problems == []
    finally:
        context.close()


def test_retry_is_named_retry_on_the_button_the_dialog_and_the_run_page(server, chromium, many_paused):
    # Resume on runs paused on an error tries the failed step again: the
    # group's button, the dialog's title and start button and the run's
    # own button all call it Retry.
    context, page = open_page(chromium, SIZES[0])
    try:
        page.goto(f"{server}/workflows")
        assert page.locator(BUTTON).inner_text().strip() == "Retry all"
        dialog = open_dialog(page)
        assert dialog.locator("h2").inner_text().strip() == f"Retry: {RUNS} matching runs"
        assert dialog.locator("button.pgbus-operation-start").inner_text().strip() == f"Retry {RUNS} runs"
        # "applies to", not "fits": the verb is what applies to runs.
        assert dialog.locator(".pgbus-operation-fits").inner_text().strip() == f"Retry applies to {RUNS} of them."
        page.goto(f"{server}/workflows/{many_paused[0]}")
        summary = page.locator('details.pgbus-action[data-verb="resume"] summary')
        assert summary.inner_text().strip() == "Retry capture_payment"
        assert page.problems == []
    finally:
        context.close()


@pytest.mark.parametrize("locale", ["de-DE", "ja-JP"])
def test_a_phone_screen_is_not_widened_in_long_languages(server, chromium, many_paused, locale):
    # German's top bar (live switch, language menu) and skip links are the
    # widest: they wrap, and the skip links stay out of sight until focused.
    context, page = open_page(chromium, SIZES[1], locale=locale)
    try:
        page.goto(f"{server}/workflows")
        assert page.evaluate("() => document.documentElement.scrollWidth <= innerWidth")
        assert page.evaluate(
            "() => Array.from(document.querySelectorAll('.pgbus-skip-link')).every((a) "
            "=> a.getBoundingClientRect().bottom <= 0)"
        )
        open_dialog(page)
        assert page.evaluate("() => document.documentElement.scrollWidth <= innerWidth")
        assert inside_viewport(page, f"{DIALOG} button.pgbus-operation-start")
    finally:
        context.close()
