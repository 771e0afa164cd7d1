"""Every cookie the dashboard sets is Secure whenever the request is HTTPS:
directly, or behind a TLS proxy the standalone app is told to trust
(``trusted_proxies``, Werkzeug's ProxyFix), and only then: an
``X-Forwarded-Proto`` nobody was told to trust changes nothing. The
session cookie, which carries the flashed message after an action, is
SameSite=Lax like the dashboard's own. A mounted dashboard follows its
host's ``request.is_secure``, and leaves the host's session cookie to the
host's settings."""

from __future__ import annotations

import pytest
from flask import Flask
from support.action_support import Browser, paused_on_capture
from support.web_helpers import Runs, make_app

from pgbus_web.demo.workflows import REGISTRY
from pgbus_web.extension import PgbusWeb
from pgbus_web.i18n import LOCALE_COOKIE
from pgbus_web.plumbing import csrf

SESSION_COOKIE = "session"


@pytest.fixture
def runs(engine) -> Runs:
    return Runs(engine)


def cookies(responses) -> dict[str, set[str]]:
    """Each cookie the responses set, by name, with its attributes
    (lower-cased names; SameSite with its value)."""
    found: dict[str, set[str]] = {}
    for response in responses:
        for header in response.headers.getlist("Set-Cookie"):
            name_value, *attributes = [part.strip() for part in header.split(";")]
            name = name_value.split("=", 1)[0]
            flags = set()
            for attribute in attributes:
                key, _, value = attribute.partition("=")
                flags.add(f"samesite={value.lower()}" if key.lower() == "samesite" else key.lower())
            found[name] = flags
    return found


def act(client, prefix: str, workflow_id: str, scheme: str = "http") -> list:
    """Load a page in German (the language cookie, the CSRF cookie) and
    cancel the run with a plain form post (the flashed message's session)."""
    browser = Browser(client)
    base = f"{scheme}://localhost{prefix}"
    loaded = browser.load(f"{base}/workflows/{workflow_id}?locale=de")
    done = browser.post(f"{base}/workflows/{workflow_id}/cancel", {"confirmed": "1"})
    assert done.status_code == 303
    return [loaded, done]


def assert_every_cookie(found: dict[str, set[str]], names: set[str], *, secure: bool) -> None:
    assert names <= set(found), found
    for name in names:
        assert ("secure" in found[name]) is secure, (name, found[name])
        assert "httponly" in found[name], name
        assert "samesite=lax" in found[name], name


OURS = {csrf.COOKIE_NAME, LOCALE_COOKIE}


# --- standalone -----------------------------------------------------------------


def test_behind_a_trusted_tls_proxy_every_cookie_is_secure(database, runs):
    client = make_app(database, trusted_proxies=1).test_client()
    client.environ_base["HTTP_X_FORWARDED_PROTO"] = "https"
    found = cookies(act(client, "", paused_on_capture(runs)))
    assert_every_cookie(found, OURS | {SESSION_COOKIE}, secure=True)


def test_a_forwarded_proto_nobody_trusts_makes_nothing_secure(database, runs):
    client = make_app(database).test_client()
    client.environ_base["HTTP_X_FORWARDED_PROTO"] = "https"
    found = cookies(act(client, "", paused_on_capture(runs)))
    assert_every_cookie(found, OURS | {SESSION_COOKIE}, secure=False)


def test_only_the_configured_number_of_proxies_is_believed(database, runs):
    # Two hops wrote the header: the client's claim ("https") first, the
    # trusted proxy's ("http") last. One trusted proxy: its word counts.
    one = make_app(database, trusted_proxies=1).test_client()
    one.environ_base["HTTP_X_FORWARDED_PROTO"] = "https, http"
    assert_every_cookie(cookies(act(one, "", paused_on_capture(runs))), OURS, secure=False)
    two = make_app(database, trusted_proxies=2).test_client()
    two.environ_base["HTTP_X_FORWARDED_PROTO"] = "https, https"
    assert_every_cookie(cookies(act(two, "", paused_on_capture(runs))), OURS, secure=True)


def test_served_over_https_directly_every_cookie_is_secure(database, runs):
    client = make_app(database).test_client()
    found = cookies(act(client, "", paused_on_capture(runs), "https"))
    assert_every_cookie(found, OURS | {SESSION_COOKIE}, secure=True)


def test_over_plain_http_the_flash_cookie_is_still_samesite_lax(database, runs):
    found = cookies(act(make_app(database).test_client(), "", paused_on_capture(runs)))
    assert_every_cookie(found, OURS | {SESSION_COOKIE}, secure=False)


# --- mounted --------------------------------------------------------------------


def host_app(database) -> Flask:
    host = Flask("host")
    host.config["SECRET_KEY"] = "host secret"
    PgbusWeb(host, url_prefix="/ops", database=database, registry=REGISTRY)
    return host


@pytest.mark.parametrize("scheme, secure", [("https", True), ("http", False)])
def test_mounted_cookies_follow_the_hosts_request_is_secure(database, runs, scheme, secure):
    client = host_app(database).test_client()
    found = cookies(act(client, "/ops", paused_on_capture(runs), scheme))
    assert_every_cookie(found, OURS, secure=secure)
    # The host's session cookie keeps the host's own settings (Flask's
    # defaults here: neither Secure nor SameSite).
    assert found[SESSION_COOKIE] == {"httponly", "path"}


def test_a_mounted_dashboard_trusts_no_forwarded_header_itself(database, runs):
    client = host_app(database).test_client()
    client.environ_base["HTTP_X_FORWARDED_PROTO"] = "https"
    assert_every_cookie(cookies(act(client, "/ops", paused_on_capture(runs))), OURS, secure=False)
