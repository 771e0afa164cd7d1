"""Every answer under the dashboard's prefix is its own translated page:
the 404 and 405 that routing gives before any blueprint is chosen
(``/workflows/``, ``/locks/xyz``, ``/nothing-here``) as much as a view's.
Standalone (at "/") and mounted at "/ops" in a host app, whose own
answers outside the prefix are left alone."""

from __future__ import annotations

import pytest
from support.refusals import everything
from support.web_helpers import MOUNTS, assert_dashboard_headers, soup, text_of

from pgbus_web.i18n import force_locale, t


@pytest.fixture(params=sorted(MOUNTS), ids=lambda prefix: f"at {prefix or '/'}")
def mounted(request, database):
    prefix = request.param
    return prefix, MOUNTS[prefix](database)


def title(key: str, locale: str) -> str:
    with force_locale(locale):
        return t(key)


@pytest.mark.parametrize("locale", ["de", "ja"])
@pytest.mark.parametrize(
    "method, path, status, key",
    [
        ("GET", "/nothing-here", 404, "pgbus.web.errors.not_found_title"),
        ("GET", "/workflows/", 404, "pgbus.web.errors.not_found_title"),
        ("GET", "/locks/xyz", 404, "pgbus.web.errors.not_found_title"),
        ("GET", "/locks/", 404, "pgbus.web.errors.not_found_title"),
        ("GET", "/insights/", 404, "pgbus.web.errors.not_found_title"),
        # Read as the run "insights/" (run_ids.py): that run is not found.
        ("GET", "/workflows/insights/", 404, "pgbus.workflows.show.not_found_title"),
        ("GET", "/workflows/a/b/c/d", 404, "pgbus.workflows.show.not_found_title"),
        ("POST", "/nothing-here", 404, "pgbus.web.errors.not_found_title"),
        ("DELETE", "/workflows", 405, "pgbus.web.errors.method_title"),
        ("PUT", "/locks/reap", 405, "pgbus.web.errors.method_title"),
    ],
)
def test_routing_errors_under_the_prefix_are_the_dashboards_translated_page(
    mounted, engine, method, path, status, key, locale
):
    prefix, app = mounted
    before = everything(engine)
    response = app.test_client().open(prefix + path, method=method, headers={"Accept-Language": locale})
    assert response.status_code == status
    page = soup(response)
    assert page.html["lang"] == locale
    assert text_of(page.select_one("#pgbus-error-title")) == title(key, locale)
    assert title(key, locale) != title(key, "en")  # control: the words are the locale's
    # The dashboard's layout around it, with its way back, and its headers.
    assert page.select_one('link[href*="pgbus-static"]') is not None
    assert_dashboard_headers(response)
    if status == 405:
        # The methods the address does take, as routing said.
        allowed = {"GET", "HEAD", "OPTIONS"} if path == "/workflows" else {"OPTIONS", "POST"}
        assert set(response.headers["Allow"].split(", ")) == allowed
    assert everything(engine) == before


def test_the_language_parameter_picks_the_words_too(mounted):
    prefix, app = mounted
    response = app.test_client().get(prefix + "/nothing-here?locale=fi")
    assert soup(response).html["lang"] == "fi"
    assert text_of(soup(response).select_one("#pgbus-error-title")) == title("pgbus.web.errors.not_found_title", "fi")


def test_the_hosts_own_answers_outside_the_prefix_are_left_alone(database):
    host = MOUNTS["/ops"](database)
    client = host.test_client()
    response = client.get("/elsewhere")
    assert response.status_code == 404
    assert "pgbus-error-title" not in response.get_data(as_text=True)
    assert client.get("/opsx/workflows").status_code == 404
    assert "pgbus-error-title" not in client.get("/opsx/workflows").get_data(as_text=True)
    # Control: the host's page and the dashboard's still answer.
    assert client.get("/").get_data(as_text=True) == "host home"
    assert client.get("/ops/workflows").status_code == 200


def test_a_slash_redirect_is_still_a_redirect(mounted):
    prefix, app = mounted
    response = app.test_client().get(prefix + "/workflows//insights/OrderWorkflow")
    assert response.status_code in (301, 308)
