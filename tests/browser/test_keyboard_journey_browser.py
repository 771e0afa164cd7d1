"""The operator's keyboard journey in a real browser: from the top of the
index to a needs-attention group's Retry, the dialog with focus in its
reason, the confirmation, the operation's page and its runs counted as
completed, by keyboard only, in few presses, focus never dropped to the
page's body; at a desktop size in English and a phone size in Japanese.

Skipped only when /usr/bin/chromium is missing (CI installs it)."""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from playwright.sync_api import Error, expect
from support.action_support import ago, operator_app, paused_on_capture
from support.browser import WAIT_MS, requires_chromium, serve

from pgbus_web.demo.workflows import REGISTRY
from pgbus_web.runtime import operation_runner

pytestmark = requires_chromium

RUNS = 3
# Every key press counts, the reason's characters aside (typed).
MOST_PRESSES = 15
RETRY = '#pgbus-attention tr.pgbus-attention-group[data-reason="paused_error"] form[data-verb="retry"] button'
COMPLETED = '.pgbus-operation-outcomes a[data-outcome-value="completed"]'
# What holds focus, in words a failure message can show.
ACTIVE = (
    "() => { const a = document.activeElement;"
    " if (!a || a === document.body) return 'body';"
    " return a.tagName.toLowerCase() + (a.id ? '#' + a.id : '') + "
    "' ' + (a.textContent || a.value || '').trim().slice(0, 40); }"
)


@pytest.fixture
def server(database):
    yield from serve(operator_app(database, actor_name=lambda request: "browser"))


@pytest.fixture
def paused(runs):
    return [paused_on_capture(runs, paused_at=ago(minutes=5 + index)) for index in range(RUNS)]


class Keys:
    """page.keyboard, counting each press and what holds focus after it."""

    def __init__(self, page):
        self.page = page
        self.trail: list[tuple[str, str]] = []

    def press(self, key: str) -> str:
        self.page.keyboard.press(key)
        where = self.where()
        self.trail.append((key, where))
        return where

    def where(self) -> str:
        # A press that leads to another page: asked again once it is loaded.
        for _ in range(20):
            try:
                self.page.wait_for_load_state()
                self.page.wait_for_timeout(50)
                return self.page.evaluate(ACTIVE)
            except Error:
                self.page.wait_for_timeout(100)
        return self.page.evaluate(ACTIVE)

    def tab_until(self, selector: str, most: int = MOST_PRESSES) -> None:
        for _ in range(most):
            self.press("Tab")
            if self.page.evaluate("(sel) => document.activeElement === document.querySelector(sel)", selector):
                return
        raise AssertionError(f"never reached {selector}: {self.trail}")

    def focus_lost(self) -> list[tuple[str, str]]:
        return [step for step in self.trail if step[1] == "body"]


def finish(engine):
    runner = operation_runner.Runner(engine, REGISTRY)
    while runner.step() is not None:
        pass


@pytest.mark.parametrize("size, locale", [((1280, 800), "en"), ((390, 844), "ja")], ids=["1280-en", "390-ja"])
def test_an_operator_retries_a_group_by_keyboard(chromium, server, engine, paused, size, locale):
    width, height = size
    context = chromium.new_context(viewport={"width": width, "height": height}, timezone_id="Europe/Oslo")
    page = context.new_page()
    page.set_default_timeout(WAIT_MS)
    problems: list[str] = []
    page.on("pageerror", lambda error: problems.append(str(error)))
    keys = Keys(page)
    try:
        page.goto(f"{server}/workflows?locale={locale}")
        # The first visit reloads once in the browser's zone (timezone.js).
        page.wait_for_load_state("networkidle")
        # The first Tab finds the skip link to the groups; Enter follows it.
        assert keys.press("Tab").startswith("a ")
        assert page.evaluate("() => document.activeElement.getAttribute('href')") == "#pgbus-attention"
        assert keys.press("Enter").startswith("section#pgbus-attention")
        keys.tab_until(RETRY)
        keys.press("Enter")
        page.locator("dialog#pgbus-operation-dialog[open]").wait_for()
        expect(page.locator("#pgbus-operation-reason")).to_be_focused()
        page.keyboard.type("gateway is back")
        keys.press("Enter")
        page.wait_for_url("**/workflows/operations/*")
        # The operation's page opens with focus on the operation.
        keys.trail.append(("(load)", keys.where()))
        assert keys.trail[-1][1].startswith("section#pgbus-operation"), keys.trail
        finish(engine)
        # A worker finishes the retried runs.
        with engine.begin() as conn:
            conn.execute(
                sa.text(
                    "UPDATE pgbus_workflows SET status = 'completed', finished_at = now() WHERE workflow_id = ANY(:ids)"
                ),
                {"ids": paused},
            )
        completed = page.locator(COMPLETED)
        expect(completed).to_have_text(f"Completed {RUNS}" if locale == "en" else f"完了 {RUNS}")
        keys.tab_until(COMPLETED)
        presses = [step for step in keys.trail if step[0] != "(load)"]
        assert len(presses) < MOST_PRESSES, keys.trail
        assert keys.focus_lost() == [], keys.trail
        assert problems == []
    finally:
        context.close()
