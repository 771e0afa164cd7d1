"""Every answer in the dashboard's URL space carries the security headers,
the ones Werkzeug's routing gives before the blueprint is chosen (404 for an
unknown path, 405, the redirect of a doubled slash) as much as the pages'
own 400, 413 and 503; and no redirect of the dashboard names a host, however
hostile the ``Host`` header or the path. Tested standalone (mounted at "/")
and mounted at "/ops" in a host app, whose own answers are left alone."""

from __future__ import annotations

import http.client

import pytest
from support.action_support import Browser, paused_on_capture
from support.refusals import everything
from support.served import running
from support.web_helpers import MOUNTS, Runs, assert_dashboard_headers, host_app, make_app
from waitress.server import create_server

from pgbus_web import db
from pgbus_web.plumbing import csrf, security

# A port nothing listens on: every connection is refused at once.
DEAD_URL = "postgresql://pgbus:pgbus@127.0.0.1:9/pgbus"
HOSTILE = "evil.example"


@pytest.fixture(params=sorted(MOUNTS), ids=lambda prefix: f"at {prefix or '/'}")
def mounted(request, database):
    prefix = request.param
    return prefix, MOUNTS[prefix](database)


@pytest.fixture
def runs(engine) -> Runs:
    return Runs(engine)


def assert_same_origin(response) -> None:
    location = response.headers["Location"]
    assert location.startswith("/") and not location.startswith(("//", "/\\")), location
    assert HOSTILE not in location
    assert HOSTILE not in response.get_data(as_text=True)


# --- the headers ----------------------------------------------------------------


@pytest.mark.parametrize(
    "method, path, status",
    [
        ("GET", "/no-such-page", 404),
        ("GET", "/workflows/a/b/c/d", 404),
        ("DELETE", "/workflows", 405),
        ("POST", "/workflows", 405),
        ("PUT", "/locks/reap", 405),
        ("GET", "/workflows?status=exploded", 400),
    ],
)
def test_routing_and_refusals_carry_the_headers(mounted, method, path, status):
    prefix, app = mounted
    response = app.test_client().open(prefix + path, method=method)
    assert response.status_code == status
    assert_dashboard_headers(response)


def test_a_post_without_token_and_a_body_too_big_carry_the_headers(mounted, runs, engine):
    prefix, app = mounted
    workflow_id = paused_on_capture(runs)
    before = everything(engine)
    browser = Browser(app.test_client())
    browser.load(f"{prefix}/workflows/{workflow_id}")
    refused = browser.post(f"{prefix}/workflows/{workflow_id}/cancel", {"confirmed": "1"}, token="")
    assert refused.status_code == 400
    assert_dashboard_headers(refused)
    too_big = browser.post(
        f"{prefix}/workflows/{workflow_id}/cancel", {"confirmed": "1", "padding": "x" * (csrf.MAX_BODY + 1)}
    )
    assert too_big.status_code == 413
    assert_dashboard_headers(too_big)
    assert everything(engine) == before


def test_the_database_unavailable_page_carries_the_headers(mounted):
    prefix, _ = mounted
    dead = db.Database(db.create_engine(DEAD_URL))
    try:
        app = MOUNTS[prefix](dead)
        for path in ("/workflows", "/health"):
            response = app.test_client().get(prefix + path)
            assert response.status_code == 503
            assert_dashboard_headers(response)
    finally:
        dead.dispose()


def test_the_host_keeps_its_own_answers(database):
    client = host_app(database).test_client()
    for path, status in (("/", 200), ("/elsewhere", 404), ("/opsx/workflows", 404)):
        response = client.get(path)
        assert response.status_code == status, path
        assert "Content-Security-Policy" not in response.headers, path
        assert "X-Frame-Options" not in response.headers, path
    # Control: the same kind of answer under the prefix does carry them.
    assert_dashboard_headers(client.get("/ops/elsewhere"))


def test_the_standalone_root_redirect_carries_the_headers(database):
    response = make_app(database).test_client().get("/", headers={"Host": HOSTILE})
    assert response.status_code == 302
    assert_dashboard_headers(response)
    assert response.headers["Location"] == "/workflows"


# --- redirects ------------------------------------------------------------------


@pytest.mark.parametrize(
    "prefix, path, status, target",
    [
        # Werkzeug reads leading slashes of the whole path as one.
        ("", "//workflows", 200, None),
        ("", "/workflows//insights//OrderWorkflow", 308, "/workflows/insights/OrderWorkflow"),
        ("", "//evil.example/workflows", 404, None),
        ("/ops", "/ops//workflows", 308, "/ops/workflows"),
        ("/ops", "/ops///workflows", 308, "/ops/workflows"),
        ("/ops", "/ops/workflows//insights//OrderWorkflow", 308, "/ops/workflows/insights/OrderWorkflow"),
        ("/ops", "/ops//evil.example/workflows", 404, None),
    ],
)
def test_a_doubled_slash_stays_on_this_site(database, prefix, path, status, target):
    client = MOUNTS[prefix](database).test_client()
    for host in (HOSTILE, f"{HOSTILE}:443", "localhost"):
        response = client.get("/", environ_overrides={"PATH_INFO": path}, headers={"Host": host})
        assert response.status_code == status, (path, host)
        assert_dashboard_headers(response)
        if target is None:
            assert "Location" not in response.headers
        else:
            assert response.headers["Location"] == target
            assert_same_origin(response)


def test_the_mounted_doubled_slash_redirect_of_the_issue(database):
    # GET /ops//workflows with Host: evil.example answered
    # Location: http://evil.example/ops/workflows.
    response = (
        host_app(database)
        .test_client()
        .get("/", environ_overrides={"PATH_INFO": "/ops//workflows"}, headers={"Host": HOSTILE})
    )
    assert response.status_code == 308
    assert response.headers["Location"] == "/ops/workflows"
    assert_same_origin(response)


def test_the_303_after_an_action_stays_on_this_site(mounted, runs, engine):
    prefix, app = mounted
    workflow_id = paused_on_capture(runs)
    client = app.test_client()
    # Every request of this browser names the hostile host, so its cookies
    # (the CSRF one) go along.
    client.environ_base["HTTP_HOST"] = HOSTILE
    browser = Browser(client)
    browser.load(f"{prefix}/workflows/{workflow_id}")
    done = browser.post(f"{prefix}/workflows/{workflow_id}/cancel", {"confirmed": "1"})
    assert done.status_code == 303
    assert done.headers["Location"] == f"{prefix}/workflows/{workflow_id}"
    assert_same_origin(done)
    back = client.get(f"{prefix}/workflows/bulk/retry")
    assert back.status_code == 303
    assert_same_origin(back)


def test_the_language_and_time_zone_choices_do_not_redirect(mounted):
    prefix, app = mounted
    client = app.test_client()
    client.environ_base["HTTP_HOST"] = HOSTILE
    response = client.get(f"{prefix}/workflows?locale=de")
    # The language is a link to the same page; the zone a cookie the
    # browser writes. Neither answers with a redirect.
    assert response.status_code == 200
    assert "Location" not in response.headers
    assert HOSTILE not in response.get_data(as_text=True)


@pytest.mark.parametrize(
    "location, safe",
    [
        ("http://evil.example/ops/workflows", "/ops/workflows"),
        ("https://evil.example", "/"),
        ("//evil.example/workflows?a=1", "/workflows?a=1"),
        ("/\\evil.example/workflows", "/evil.example/workflows"),
        ("/\t/evil.example", "/"),
        ("/workflows?back=//x", "/workflows?back=//x"),
        ("/ops/workflows/abc", "/ops/workflows/abc"),
    ],
)
def test_same_origin_keeps_only_the_path(location, safe):
    assert security.same_origin(location) == safe


@pytest.mark.parametrize("prefix", ["", "/ops"])
def test_hostile_paths_over_real_http(database, prefix):
    """The raw request line, as a client sends it to waitress: a path that
    begins with // (which a browser would read as another host) and a
    hostile Host header."""
    app = MOUNTS[prefix](database)
    with running(create_server(app, host="127.0.0.1", port=0, threads=2)) as port:
        for path in (f"{prefix}//{HOSTILE}/workflows", f"{prefix}//workflows", f"{prefix}///workflows"):
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            try:
                conn.putrequest("GET", path, skip_host=True)
                conn.putheader("Host", HOSTILE)
                conn.endheaders()
                response = conn.getresponse()
                body = response.read().decode("utf-8", "replace")
                location = response.getheader("Location")
                assert response.getheader("Content-Security-Policy") == security.CONTENT_SECURITY_POLICY, path
                if location is not None:
                    assert location.startswith("/") and not location.startswith(("//", "/\\")), (path, location)
                    assert HOSTILE not in location, path
                    assert HOSTILE not in body, path
            finally:
                conn.close()
