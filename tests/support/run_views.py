"""Reading a run's page as an operator or a viewer sees it."""

from __future__ import annotations

from pgbus_web import i18n
from support.action_support import Browser
from support.web_helpers import make_app, soup

OPERATOR = "alice"


def role_app(database):
    """Alice may act, anyone else only views."""
    return make_app(
        database,
        can_act=lambda request: request.headers.get("X-User") == OPERATOR,
        actor_name=lambda request: request.headers.get("X-User"),
    )


def badge(response) -> str:
    return soup(response).select_one("#pgbus-run-header .pgbus-run-title").get_text(" ", strip=True)


def page(browser: Browser, workflow_id: str, locale: str = "en", tz: str = "UTC"):
    # By cookie, not ?locale=: every viewer asks the same address.
    browser.client.set_cookie(i18n.TIMEZONE_COOKIE, tz)
    browser.client.set_cookie(i18n.LOCALE_COOKIE, locale)
    response = browser.load(f"/workflows/{workflow_id}")
    assert response.status_code == 200
    return response
