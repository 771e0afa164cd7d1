"""The dashboard mounted under a prefix keeps its language and time-zone
cookies to that prefix (like the CSRF cookie), so the host site's other
pages never receive them."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from flask import Flask
from werkzeug.serving import make_server

from pgbus_web.demo.workflows import REGISTRY
from pgbus_web.i18n import LOCALE_COOKIE, TIMEZONE_COOKIE
from pgbus_web.web import PgbusWeb

CHROMIUM = Path("/usr/bin/chromium")
LAUNCH_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
               "--disable-sync", "--no-first-run"]


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


@pytest.mark.skipif(not CHROMIUM.exists(), reason="Debian's chromium is not installed")
def test_the_browser_keeps_the_time_zone_cookie_to_the_mount(database):
    from playwright.sync_api import sync_playwright

    httpd = make_server("127.0.0.1", 0, host_app(database), threaded=True)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=LAUNCH_ARGS, headless=True)
            try:
                context = browser.new_context(timezone_id="Europe/Berlin")
                page = context.new_page()
                page.goto(f"http://127.0.0.1:{httpd.server_port}/ops/workflows")
                page.wait_for_load_state("load")
                zone = [cookie for cookie in context.cookies() if cookie["name"] == TIMEZONE_COOKIE]
                assert [(cookie["value"], cookie["path"]) for cookie in zone] == [("Europe/Berlin", "/ops")]
            finally:
                browser.close()
    finally:
        httpd.shutdown()
        thread.join(timeout=10)
