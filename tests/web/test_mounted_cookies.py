"""The dashboard mounted under a prefix keeps its language and time-zone
cookies to that prefix (like the CSRF cookie), so the host site's other
pages never receive them."""

from __future__ import annotations

from flask import Flask
from support.browser import requires_chromium, serve

from pgbus_web.demo.workflows import REGISTRY
from pgbus_web.extension import PgbusWeb
from pgbus_web.i18n import LOCALE_COOKIE, TIMEZONE_COOKIE


def host_app(database) -> Flask:
    host = Flask("host")
    host.config["SECRET_KEY"] = "host secret"
    PgbusWeb(host, url_prefix="/ops", database=database, registry=REGISTRY)
    return host


def test_the_language_cookie_is_scoped_to_the_mount(database):
    response = host_app(database).test_client().get("/ops/workflows?locale=de")
    cookie = next(value for value in response.headers.getlist("Set-Cookie") if value.startswith(LOCALE_COOKIE))
    assert "Path=/ops;" in cookie or cookie.endswith("Path=/ops")
    assert "Path=/;" not in cookie


def test_the_page_tells_the_time_zone_script_the_mount(database):
    response = host_app(database).test_client().get("/ops/workflows")
    assert b'data-pgbus-cookie-path="/ops"' in response.data


@requires_chromium
def test_the_browser_keeps_the_time_zone_cookie_to_the_mount(database, chromium):
    server = serve(host_app(database))
    base = next(server)
    try:
        context = chromium.new_context(timezone_id="Europe/Berlin")
        page = context.new_page()
        page.goto(f"{base}/ops/workflows")
        page.wait_for_load_state("load")
        zone = [cookie for cookie in context.cookies() if cookie["name"] == TIMEZONE_COOKIE]
        assert [(cookie["value"], cookie["path"]) for cookie in zone] == [("Europe/Berlin", "/ops")]
        context.close()
    finally:
        server.close()
