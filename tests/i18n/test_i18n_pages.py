"""Every page of a seeded database in every locale: no message key shows
through, ``<html lang>`` says the locale, the language menu links every
language and keeps the query, and the choice is remembered."""

from __future__ import annotations

import re

import pytest
from support.web_helpers import every_state, soup

from pgbus_web import i18n

LOCALES = i18n.available_locales()
# A message key: "pgbus." and at least two more dotted parts ("pgbus.css" is not one).
KEY = re.compile(r"pgbus\.[a-z_]+\.[a-z0-9_.]+")


@pytest.fixture
def pages(app, runs):  # noqa: F811
    """The URLs of every page on a database with runs in every state."""
    made = every_state(runs)
    urls = ["/workflows", "/workflows?status=paused&reason=paused_error"]
    urls += [f"/workflows/{workflow_id}" for workflow_id in made.values()]
    urls += [f"/workflows/insights/{name}" for name in ("OrderWorkflow", "OnboardingWorkflow", "RefundWorkflow")]
    if "pgbus_web.locks" in app.view_functions:
        from pgbus_web.locks.lock_seeder import seed_locks

        seed_locks(runs.engine, 40, seed=1)
        urls.append("/locks")
    return urls


@pytest.mark.parametrize("locale", LOCALES)
def test_every_page_is_fully_translated(client, pages, locale):  # noqa: F811
    for url in pages:
        joiner = "&" if "?" in url else "?"
        response = client.get(f"{url}{joiner}locale={locale}")
        assert response.status_code == 200, url
        html = response.get_data(as_text=True)
        assert KEY.findall(html) == [], url
        assert soup(response).select_one("html")["lang"] == locale, url


def test_language_menu_links_every_locale_keeping_the_query(client, pages):  # noqa: F811
    page = soup(client.get("/workflows?status=paused&locale=de"))
    links = page.select(".pgbus-lang-menu a[hreflang]")
    assert [link["hreflang"] for link in links] == list(LOCALES)
    french = next(link for link in links if link["hreflang"] == "fr")
    assert french["href"] == "?status=paused&locale=fr"
    assert french.get_text() == "Français"
    current = page.select_one('.pgbus-lang-menu a[aria-current="true"]')
    assert current["hreflang"] == "de"


def test_chosen_locale_is_remembered_across_pages(client, pages):  # noqa: F811
    client.get("/workflows?locale=ja")
    page = soup(client.get("/workflows", headers={"Accept-Language": "de"}))
    assert page.select_one("html")["lang"] == "ja"


def test_accept_language_picks_the_page_language(client, pages):  # noqa: F811
    page = soup(client.get("/workflows", headers={"Accept-Language": "pt-BR,pt;q=0.9,en;q=0.5"}))
    assert page.select_one("html")["lang"] == "pt"


def test_times_follow_the_browser_time_zone(client, pages):  # noqa: F811
    client.set_cookie(i18n.TIMEZONE_COOKIE, "Asia/Tokyo")
    page = soup(client.get("/workflows?locale=en"))
    titles = [tag["title"] for tag in page.select("time[title]")]
    assert titles and all("+0900" in title for title in titles), titles[:3]


def test_timezone_script_is_served_and_included(client, pages):  # noqa: F811
    page = soup(client.get("/workflows"))
    scripts = [tag["src"] for tag in page.select("script[src]")]
    timezone_js = next(src for src in scripts if src.endswith("timezone.js"))
    response = client.get(timezone_js)
    assert response.status_code == 200
    assert b"pgbus_tz" in response.data


# --- what the actions answer ------------------------------------------------------

PAUSED_ERROR_GROUP = {
    "workflow_class": "OrderWorkflow",
    "step_name": "capture_payment",
    "reason": "paused_error",
    "error_class": "TimeoutError",
}


@pytest.mark.parametrize("locale", LOCALES)
def test_action_answers_are_fully_translated(database, runs, locale):  # noqa: F811
    from support.action_support import Browser, operator_app

    made = every_state(runs)
    browser = Browser(operator_app(database).test_client())
    browser.load(f"/workflows?locale={locale}")
    answers = {
        # Without JavaScript a group's button answers the operation's preview page.
        "bulk confirmation": browser.post("/workflows/bulk/retry", PAUSED_ERROR_GROUP),
        "operation page": browser.client.get("/workflows/operations"),
        "pause": browser.post(f"/workflows/{made['running']}/pause", follow_redirects=True),
        "pause again": browser.post(f"/workflows/{made['running']}/pause", follow_redirects=True),
        "bad time": browser.post(f"/workflows/{made['ready_due_later']}/reschedule", {"at": "soon"}),
        "signal as htmx": browser.post(
            f"/workflows/{made['waiting_signal']}/signals", {"name": "shipment_confirmed", "payload": "{}"}, htmx=True
        ),
    }
    for what, response in answers.items():
        html = response.get_data(as_text=True)
        assert KEY.findall(html) == [], what
        assert "pgbus-notice" in html or "pgbus-operation" in html, what
