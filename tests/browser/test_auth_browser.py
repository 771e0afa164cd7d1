"""Signing in and out in a real browser (Debian's Chromium): the form has
the keyboard focus, a wrong password says so and keeps the name, the right
one lands on the page asked for, the top bar names the user, sign-out ends
it; no CSP violation or script error on the way."""

from __future__ import annotations

import pytest
from support.auth_support import OPERATOR, signed_in_app, write_users
from support.browser import WAIT_MS, requires_chromium, serve

from pgbus_web.i18n import t

pytestmark = requires_chromium


@pytest.fixture
def server(database, tmp_path):
    yield from serve(signed_in_app(database, write_users(tmp_path / "users")))


def test_sign_in_and_out(server, chromium):
    context = chromium.new_context()
    page = context.new_page()
    page.set_default_timeout(WAIT_MS)
    problems: list[str] = []
    page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda error: problems.append(str(error)))

    page.goto(server + "/locks")
    assert "/sign-in?next=/locks" in page.url
    assert page.evaluate("document.activeElement.id") == "pgbus-sign-in-name"
    page.keyboard.type(OPERATOR[0])
    page.keyboard.press("Tab")
    page.keyboard.type("wrong password")
    page.keyboard.press("Enter")
    page.locator("[role=alert]").wait_for()
    assert page.locator("[role=alert]").inner_text() == t("pgbus.web.auth.failed")
    assert page.input_value("#pgbus-sign-in-name") == OPERATOR[0]

    page.fill("#pgbus-sign-in-password", OPERATOR[1])
    page.press("#pgbus-sign-in-password", "Enter")
    page.wait_for_url(server + "/locks")
    account = page.locator(".pgbus-account")
    assert OPERATOR[0] in account.inner_text()

    account.locator("button").click()
    page.wait_for_url("**/sign-in")
    page.goto(server + "/workflows")
    assert "/sign-in" in page.url
    # A failed form post is a 401 the browser reports; nothing else.
    assert [p for p in problems if "401" not in p] == []
    context.close()
