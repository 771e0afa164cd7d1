"""X-Forwarded-* through a real waitress server, as `pgbus-web serve`
creates it (serve.create_server): believed from a --trusted-proxy peer,
so that behind a TLS proxy the cookies are Secure; dropped from any other
peer; and an X-Forwarded-Prefix that is not a plain path of this site
never reaches a link or a form's action. The test connects from
127.0.0.1: trusted when the proxies are loopback, untrusted when they are
10.0.0.0/8."""

from __future__ import annotations

import http.client

import pytest
from bs4 import BeautifulSoup
from support.auth_support import write_users
from support.served import running
from support.web_helpers import make_app

from pgbus_web.auth import Auth
from pgbus_web.launch.serve import create_server

TRUSTED = ["127.0.0.1/32"]
ELSEWHERE = ["10.0.0.0/8"]


@pytest.fixture
def serve(database, tmp_path):
    """serve(proxies) -> port of a waitress server for the standalone app
    with sign-in, one trusted proxy, believed from *proxies*."""
    users_file = write_users(tmp_path / "users")
    servers = []

    def start(proxies):
        app = make_app(
            database,
            auth=Auth(users_file),
            SECRET_KEY="test secret",
            trusted_proxies=1,
            trusted_proxy_addresses=proxies,
        )
        context = running(create_server(app, "127.0.0.1", 0, threads=4))
        servers.append(context)
        return context.__enter__()

    yield start
    for context in servers:
        context.__exit__(None, None, None)


def get(port: int, path: str, headers: dict[str, str]):
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        connection.request("GET", path, headers=headers)
        response = connection.getresponse()
        return response.status, response.headers.get_all("Set-Cookie") or [], response.read().decode()
    finally:
        connection.close()


def session_cookie(set_cookies: list[str]) -> str:
    [found] = [header for header in set_cookies if header.startswith("session=")]
    return found


def flags(header: str) -> set[str]:
    return {part.strip().split("=", 1)[0].lower() for part in header.split(";")[1:]}


def form_action(body: str) -> str:
    return BeautifulSoup(body, "html.parser").select_one("form.pgbus-sign-in-form")["action"]


def test_a_trusted_proxys_https_makes_the_cookies_secure(serve):
    port = serve(TRUSTED)
    status, set_cookies, _ = get(port, "/sign-in", {"X-Forwarded-Proto": "https"})
    assert status == 200
    assert "secure" in flags(session_cookie(set_cookies))
    # Control: the same server over plain http, no proxy's word.
    _, plain, _ = get(port, "/sign-in", {})
    assert "secure" not in flags(session_cookie(plain))


def test_an_untrusted_peers_forwarded_headers_change_nothing(serve):
    port = serve(ELSEWHERE)
    status, set_cookies, body = get(port, "/sign-in", {"X-Forwarded-Proto": "https", "X-Forwarded-Prefix": "/ops"})
    assert status == 200
    assert "secure" not in flags(session_cookie(set_cookies))
    assert form_action(body) == "/sign-in"


def test_a_trusted_proxys_plain_prefix_is_believed(serve):
    port = serve(TRUSTED)
    _, _, body = get(port, "/sign-in", {"X-Forwarded-Prefix": "/ops"})
    assert form_action(body) == "/ops/sign-in"


@pytest.mark.parametrize(
    "prefix",
    [
        "//evil.example",
        "/ok//evil.example",
        "/\\evil.example",
        "\\\\evil.example",
        "https://evil.example",
        "evil.example",
        "/a\tb",
        "/a b",
        "/x?y",
        "/x#y",
    ],
)
@pytest.mark.parametrize("proxies", [TRUSTED, ELSEWHERE])
def test_a_hostile_prefix_never_reaches_a_forms_action(serve, prefix, proxies):
    port = serve(proxies)
    status, _, body = get(port, "/sign-in", {"X-Forwarded-Prefix": prefix})
    assert status == 200
    action = form_action(body)
    assert action == "/sign-in", action
    assert "evil" not in body
