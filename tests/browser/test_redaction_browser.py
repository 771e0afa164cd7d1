"""The Reveal on a run's page in Chromium (docs/redaction.md): an admin
reads the card number as "[redacted]", presses Reveal with a reason, and
reads it in clear in a panel that the live refresh leaves in place, with
the audit line in the trail; a viewer is offered no Reveal.

Skipped only when /usr/bin/chromium is missing (CI installs it)."""

from __future__ import annotations

import pytest
from support.action_support import operator_app
from support.browser import WAIT_MS, requires_chromium, serve
from support.web_helpers import CARD, _card_run

from pgbus_web.core import policy
from pgbus_web.rules import redaction

pytestmark = requires_chromium

# The role each browser is signed in with, by its user name (a host's role_of).
ROLES = {"root": "admin", "vic": "viewer"}


@pytest.fixture
def server(database):
    yield from serve(
        operator_app(
            database,
            refresh_interval=1,
            actor_name=lambda request: request.headers.get("X-User"),
            role_of=lambda request: ROLES.get(request.headers.get("X-User"), "viewer"),
        )
    )


@pytest.fixture
def card_run(engine, runs):
    policy.forget()
    workflow_id = _card_run(runs, 1)
    policy.change(engine, policy.REDACT, ["card_number"], actor="dashboard:root", reason="pci")
    yield workflow_id
    policy.forget()


def _page(chromium, user: str):
    context = chromium.new_context(viewport={"width": 1280, "height": 900}, extra_http_headers={"X-User": user})
    return context, context.new_page()


def test_an_admin_reveals_in_the_page_and_the_panel_outlives_the_refresh(chromium, server, card_run):
    context, page = _page(chromium, "root")
    try:
        page.goto(f"{server}/workflows/{card_run}")
        assert CARD not in page.content()
        assert redaction.MARK in page.locator(".pgbus-arguments").first.inner_text()
        page.fill("#pgbus-reveal-reason", "chargeback 77")
        page.click(".pgbus-reveal-form button[type=submit]")
        panel = page.locator(".pgbus-run-revealed")
        panel.wait_for(timeout=WAIT_MS)
        assert CARD in panel.inner_text()
        page.locator("#pgbus-run-audit", has_text="chargeback 77").wait_for(timeout=WAIT_MS)
        # Two live refreshes later (every second here) the panel is still there.
        page.wait_for_timeout(2500)
        assert CARD in page.locator(".pgbus-run-revealed").inner_text()
        # The refreshed blocks stay redacted.
        assert CARD not in page.locator("#pgbus-run-header").inner_text()
    finally:
        context.close()


def test_a_viewer_sees_the_mark_and_no_reveal(chromium, server, card_run):
    context, page = _page(chromium, "vic")
    try:
        page.goto(f"{server}/workflows/{card_run}")
        assert CARD not in page.content()
        assert page.locator(".pgbus-redacted-note").count() == 1
        assert page.locator(".pgbus-reveal-form").count() == 0
    finally:
        context.close()
