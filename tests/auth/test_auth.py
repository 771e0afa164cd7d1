"""Sign-in for the standalone server: every dashboard route refuses an
anonymous request (the sign-in form for a browser, 401 for the rest) and
writes nothing; a viewer sees the pages without buttons and gets 403 on a
post; an operator acts as dashboard:<user>; forged and expired sessions,
HTTP Basic, throttling, and a trusted proxy's header from an allowed and a
disallowed address."""

from __future__ import annotations

import base64
import logging
import time

import pytest
import sqlalchemy as sa
from flask import Flask
from flask.sessions import SecureCookieSessionInterface
from support.action_support import Browser, paused_on_capture
from support.auth_support import OPERATOR, VIEWER, sign_in, signed_in_app, write_users
from support.refusals import everything
from support.web_helpers import Runs, soup

from pgbus_web.auth import session as sessions
from pgbus_web.auth.throttle import PER_NAME_ADDRESS
from pgbus_web.i18n import force_locale, t


@pytest.fixture
def runs(engine) -> Runs:
    return Runs(engine)


@pytest.fixture
def users_file(tmp_path):
    return write_users(tmp_path / "users")


@pytest.fixture
def app(database, users_file):
    return signed_in_app(database, users_file)


@pytest.fixture
def run_id(runs):
    return paused_on_capture(runs)


def basic(name: str, password: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{name}:{password}".encode()).decode()}


def dashboard_requests(app, run_id):
    """(method, url) for every route of the blueprint but the open ones."""
    values = {
        "workflow_id": run_id,
        "verb": "cancel",
        "workflow_class": "OrderWorkflow",
        "operation_id": 1,
        "batch_id": "batch-1",
        "key": "stall_threshold",
        "session_id": "A" * 32,
        "name": "ada",
    }
    found = []
    for rule in app.url_map.iter_rules():
        if not rule.endpoint.startswith("pgbus_web.") or rule.endpoint in ("pgbus_web.static", "pgbus_web.health"):
            continue
        url = rule.build({name: values[name] for name in rule.arguments}, append_unknown=False)[1]
        for method in sorted(rule.methods - {"HEAD", "OPTIONS"}):
            found.append((method, url))
    return found


def actors(engine) -> list[str]:
    with engine.connect() as conn:
        return [row[0] for row in conn.execute(sa.text("SELECT actor FROM pgbus_workflow_events ORDER BY id"))]


# --- anonymous ----------------------------------------------------------------


def test_every_route_refuses_an_anonymous_request_and_writes_nothing(app, engine, run_id):
    requests = dashboard_requests(app, run_id)
    assert {method for method, _ in requests} == {"GET", "POST"}
    assert len(requests) >= 10  # the pages, the verbs, the locks' actions
    client = app.test_client()
    before = everything(engine)
    for method, url in requests:
        # A script or an API-like request: 401 with a Basic challenge.
        response = client.open(url, method=method, data={"reason": "x"})
        assert response.status_code == 401, (method, url, response.status_code)
        assert response.headers["WWW-Authenticate"].startswith('Basic realm="pgbus-web"')
        # htmx: 401 and a redirect htmx follows, no browser password dialog.
        response = client.open(url, method=method, headers={"HX-Request": "true"})
        assert response.status_code == 401 and "WWW-Authenticate" not in response.headers
        assert response.headers["HX-Redirect"].startswith("/sign-in?next=")
    for method, url in requests:
        if method == "GET":
            # A browser's navigation: the sign-in form, then back here.
            response = client.get(url, headers={"Accept": "text/html"})
            assert response.status_code == 303, url
            assert response.headers["Location"].startswith("/sign-in?next=")
    assert everything(engine) == before


def test_open_routes_stay_open(app):
    client = app.test_client()
    assert client.get("/health").status_code == 200
    assert client.get("/pgbus-static/pgbus.css").status_code == 200


def test_the_sign_in_page_is_translated_and_labelled(app):
    client = app.test_client()
    response = client.get("/sign-in?locale=de")
    assert response.status_code == 200
    page = soup(response)
    with force_locale("de"):
        assert page.select_one("h1").get_text() == t("pgbus.web.auth.title")
        assert page.select_one("label[for=pgbus-sign-in-password]").get_text() == t("pgbus.web.auth.password")
    assert page.select_one("h1").get_text() != "Sign in"  # control: not the English fallback
    assert page.select_one("#pgbus-sign-in-password")["type"] == "password"


# --- the form and its session -----------------------------------------------------


def test_the_session_cookie_is_httponly_lax_and_expiring(app):
    client = app.test_client()
    response = sign_in(client, *VIEWER)
    assert response.status_code == 303 and response.headers["Location"] == "/workflows"
    cookie = response.headers["Set-Cookie"]
    assert "HttpOnly" in cookie and "SameSite=Lax" in cookie and "Expires=" in cookie
    assert "Secure" not in cookie


def test_the_session_cookie_is_secure_over_https(app):
    client = app.test_client()
    page = client.get("/sign-in", base_url="https://localhost")
    token = soup(page).select_one("input[name=token]")["value"]
    response = client.post(
        "/sign-in",
        base_url="https://localhost",
        data={"token": token, "name": VIEWER[0], "password": VIEWER[1], "next": "/workflows"},
    )
    assert response.status_code == 303
    assert "Secure" in response.headers["Set-Cookie"]


def test_a_wrong_password_is_refused_logged_without_it_and_writes_nothing(app, engine, run_id, caplog):
    client = app.test_client()
    before = everything(engine)
    with caplog.at_level(logging.WARNING, logger="pgbus_web.auth"):
        response = sign_in(client, VIEWER[0], "not the password")
    assert response.status_code == 401
    assert soup(response).select_one("[role=alert]").get_text() == t("pgbus.web.auth.failed")
    assert "vera" in caplog.text and "not the password" not in caplog.text
    assert client.get("/workflows", headers={"Accept": "text/html"}).status_code == 303
    assert everything(engine) == before


def test_the_sign_in_form_needs_its_token(app):
    client = app.test_client()
    client.get("/sign-in")
    response = client.post("/sign-in", data={"name": VIEWER[0], "password": VIEWER[1]})
    assert response.status_code == 400
    assert client.get("/workflows", headers={"Accept": "text/html"}).status_code == 303


def test_failed_sign_ins_are_throttled_per_user(app, caplog):
    client = app.test_client()
    for _ in range(PER_NAME_ADDRESS):
        assert sign_in(client, OPERATOR[0], "wrong").status_code == 401
    # Now even the right password is refused, without being checked.
    response = sign_in(client, *OPERATOR)
    assert response.status_code == 429
    assert soup(response).select_one("[role=alert]").get_text() == t("pgbus.web.auth.throttled")
    # Another user from the same address is not locked out.
    assert sign_in(app.test_client(), *VIEWER).status_code == 303


def test_a_next_address_off_the_site_is_not_followed(app):
    client = app.test_client()
    response = sign_in(client, *VIEWER, next_url="//evil.example/x")
    assert response.status_code == 303
    assert not response.headers["Location"].startswith("//")
    assert "evil.example" not in response.headers["Location"].split("/")[2:3]


def test_sign_out_ends_the_session(app):
    client = app.test_client()
    sign_in(client, *VIEWER)
    page = client.get("/workflows")
    assert page.status_code == 200
    form = soup(page).select_one("form.pgbus-sign-out")
    assert VIEWER[0] in soup(page).select_one(".pgbus-account").get_text()
    # A post without the token signs nobody out.
    client.post("/sign-out")
    assert client.get("/workflows").status_code == 200
    client.post("/sign-out", data={"token": form.select_one("input[name=token]")["value"]})
    assert client.get("/workflows", headers={"Accept": "text/html"}).status_code == 303


def test_a_cookie_copied_before_sign_out_is_refused_after_it(app):
    client = app.test_client()
    sign_in(client, *VIEWER)
    page = client.get("/workflows")
    token = soup(page).select_one("form.pgbus-sign-out input[name=token]")["value"]
    copied = client.get_cookie("session").value
    other = sign_in(app.test_client(), *OPERATOR)  # another user's session
    assert other.status_code == 303

    client.post("/sign-out", data={"token": token})
    replay = app.test_client()
    replay.set_cookie("session", copied)
    assert replay.get("/workflows", headers={"Accept": "text/html"}).status_code == 303
    assert replay.get("/workflows").status_code == 401
    # Signing in again works, with a new session.
    again = app.test_client()
    assert sign_in(again, *VIEWER).status_code == 303
    assert again.get("/workflows").status_code == 200


def test_sign_out_is_seen_by_every_process(database, users_file):
    # Two apps over one database, as two processes behind one address.
    first, second = (signed_in_app(database, users_file) for _ in range(2))
    client = first.test_client()
    sign_in(client, *VIEWER)
    cookie = client.get_cookie("session").value
    elsewhere = second.test_client()
    elsewhere.set_cookie("session", cookie)
    assert elsewhere.get("/workflows").status_code == 200
    token = soup(client.get("/workflows")).select_one("form.pgbus-sign-out input[name=token]")["value"]
    client.post("/sign-out", data={"token": token})
    assert elsewhere.get("/workflows").status_code == 401


def test_a_forged_session_is_anonymous(app):
    other = Flask("forger")
    other.secret_key = "not the secret"
    forged = (
        SecureCookieSessionInterface()
        .get_signing_serializer(other)
        .dumps({sessions.KEY: {"u": OPERATOR[0], "t": int(time.time()), "h": "0" * 32, "c": "x"}})
    )
    client = app.test_client()
    client.set_cookie("session", forged)
    assert client.get("/workflows", headers={"Accept": "text/html"}).status_code == 303
    assert client.get("/workflows").status_code == 401


def test_an_expired_session_is_anonymous(app, users_file, engine):
    from pgbus_web.auth import UsersFile
    from pgbus_web.core import sessions as live_sessions

    user = UsersFile(users_file).get(OPERATOR[0])
    row = live_sessions.start(engine, user.name, address="127.0.0.1", lifetime=sessions.LIFETIME)
    client = app.test_client()
    with client.session_transaction() as session:
        sessions.start(session, user, now=time.time() - sessions.LIFETIME.total_seconds() - 5, session_id=row)
    assert client.get("/workflows").status_code == 401
    # Control: the same session started now is good.
    with client.session_transaction() as session:
        sessions.start(session, user, session_id=row)
    assert client.get("/workflows").status_code == 200
    # A cookie without a session row (made before there were rows) is not.
    with client.session_transaction() as session:
        sessions.start(session, user)
    assert client.get("/workflows").status_code == 401


def test_removing_a_user_ends_their_session(app, users_file):
    from pgbus_web.auth import users

    client = app.test_client()
    sign_in(client, *VIEWER)
    assert client.get("/workflows").status_code == 200
    remaining = users.read(users_file)
    del remaining[VIEWER[0]]
    users.write(users_file, remaining)
    assert client.get("/workflows").status_code == 401


# --- roles ------------------------------------------------------------------------


def test_a_viewer_sees_no_buttons_and_cannot_post(app, engine, run_id):
    client = app.test_client()
    sign_in(client, *VIEWER)
    page = client.get(f"/workflows/{run_id}")
    assert page.status_code == 200
    assert not soup(page).select(f'form[action*="/workflows/{run_id}/"]')
    browser = Browser(client)
    before = everything(engine)
    for method, url in dashboard_requests(app, run_id):
        if method == "POST":
            assert browser.post(url, {"reason": "x"}).status_code == 403, url
    assert everything(engine) == before


def test_an_operator_sees_the_buttons_and_acts_as_dashboard_user(app, engine, run_id):
    client = app.test_client()
    sign_in(client, *OPERATOR)
    page = client.get(f"/workflows/{run_id}")
    assert soup(page).select(f'form[action*="/workflows/{run_id}/"]')
    response = Browser(client).post(f"/workflows/{run_id}/cancel", {"reason": "by hand"})
    assert response.status_code in (200, 303)
    assert f"dashboard:{OPERATOR[0]}" in actors(engine)


def test_http_basic_for_scripts(app, engine, run_id):
    client = app.test_client()
    assert client.get("/workflows", headers=basic(*VIEWER)).status_code == 200
    assert client.get("/workflows", headers=basic(VIEWER[0], "wrong")).status_code == 401
    assert client.get("/workflows", headers=basic("nobody", "wrong")).status_code == 401
    # A viewer's post through Basic: 403, nothing written.
    before = everything(engine)
    assert client.post(f"/workflows/{run_id}/cancel", headers=basic(*VIEWER)).status_code == 403
    assert everything(engine) == before


# --- a trusted proxy's header --------------------------------------------------------


@pytest.fixture
def proxied(database):
    from support.web_helpers import make_app

    from pgbus_web.auth import Auth

    auth = Auth(
        None, trusted_header="X-Forwarded-User", trusted_role_header="X-Forwarded-Role", trusted_proxies=["10.0.0.0/8"]
    )
    return make_app(database, auth=auth, SECRET_KEY="test secret", trusted_proxies=1)


def test_the_trusted_header_from_an_allowed_address(proxied, engine, run_id):
    client = proxied.test_client()
    proxy = {"REMOTE_ADDR": "10.1.2.3"}
    headers = {"X-Forwarded-User": "pat", "X-Forwarded-Role": "operator"}
    assert client.get("/workflows", headers=headers, environ_base=proxy).status_code == 200
    browser = Browser(client)
    browser.client.environ_base.update(proxy)
    browser.user = "pat"
    page = client.get("/workflows", headers=headers)
    browser.token = __import__("json").loads(soup(page).select_one("body")["hx-headers"])["X-CSRF-Token"]
    response = browser.post(f"/workflows/{run_id}/cancel", {"reason": "via proxy"}, headers=headers)
    assert response.status_code in (200, 303)
    assert "dashboard:pat" in actors(engine)


def test_the_trusted_header_without_a_role_is_a_viewer(proxied, engine, run_id):
    client = proxied.test_client()
    client.environ_base.update({"REMOTE_ADDR": "10.1.2.3"})
    headers = {"X-Forwarded-User": "pat"}
    page = client.get("/workflows", headers=headers)
    assert page.status_code == 200
    before = everything(engine)
    assert client.post(f"/workflows/{run_id}/cancel", headers=headers).status_code == 403
    assert everything(engine) == before


def test_the_trusted_header_from_another_address_is_ignored(proxied, engine, run_id):
    client = proxied.test_client()
    headers = {"X-Forwarded-User": "pat", "X-Forwarded-Role": "operator"}
    before = everything(engine)
    for environ in ({"REMOTE_ADDR": "192.0.2.7"},):
        assert client.get("/workflows", headers=headers, environ_base=environ).status_code == 401
        # Claiming to come from the proxy through X-Forwarded-For changes nothing.
        spoofed = {**headers, "X-Forwarded-For": "10.0.0.1"}
        assert client.get("/workflows", headers=spoofed, environ_base=environ).status_code == 401
        assert client.post(f"/workflows/{run_id}/cancel", headers=spoofed, environ_base=environ).status_code == 401
    assert everything(engine) == before


def test_without_sign_in_the_app_is_as_before(database):
    from support.web_helpers import make_app

    assert make_app(database).test_client().get("/workflows").status_code == 200


def test_basic_credentials_stop_working_when_the_password_changes(app, users_file):
    from support.auth_support import CHEAP

    from pgbus_web.auth import passwords, users

    client = app.test_client()
    assert client.get("/workflows", headers=basic(*VIEWER)).status_code == 200
    assert client.get("/workflows", headers=basic(*VIEWER)).status_code == 200  # remembered
    changed = users.read(users_file)
    changed[VIEWER[0]] = users.User(VIEWER[0], users.VIEWER, passwords.hash_password("a new password", CHEAP))
    users.write(users_file, changed)
    assert client.get("/workflows", headers=basic(*VIEWER)).status_code == 401
    assert client.get("/workflows", headers=basic(VIEWER[0], "a new password")).status_code == 200


# --- a broken users file ----------------------------------------------------------------


def test_a_users_file_broken_while_serving_is_503_with_its_line_never_500(app, users_file, run_id, caplog):
    client = app.test_client()
    sign_in(client, *OPERATOR)
    assert client.get("/workflows").status_code == 200
    good = users_file.read_text()
    users_file.write_text(good + "mallory:root:$argon2id$x\n")
    line = len(good.splitlines()) + 1
    with force_locale("de"):
        german = t("pgbus.web.auth.users_file_broken", line=line)
    sentence = t("pgbus.web.auth.users_file_broken", line=line)
    assert german != sentence
    with caplog.at_level(logging.ERROR, logger="pgbus_web.auth.users"):
        for answer in (
            client.get("/workflows"),
            client.get(f"/workflows/{run_id}"),
            client.post(f"/workflows/{run_id}/actions/cancel", data={"reason": "x"}),
            app.test_client().get("/sign-in"),
            app.test_client().get("/workflows", headers=basic(*OPERATOR)),
        ):
            assert answer.status_code == 503, answer.get_data(as_text=True)[:300]
            assert answer.get_data(as_text=True).strip() == sentence
        assert client.get("/workflows", headers={"Accept-Language": "de"}).get_data(as_text=True).strip() == german
        api = client.get("/api/v1/runs")
        assert api.status_code == 503 and api.mimetype == "application/problem+json"
        assert api.json["detail"] == sentence
    # Logged once, with the file and what is wrong; the page leaves the path out.
    logged = [record.getMessage() for record in caplog.records if "users file" in record.getMessage()]
    assert len(logged) == 1, logged
    assert f"{users_file}, line {line}: invalid role 'root'" in logged[0]
    assert str(users_file) not in sentence
    # Fixed, the same session goes on.
    users_file.write_text(good)
    assert client.get("/workflows").status_code == 200


def test_an_unreadable_users_file_is_503(app, users_file):
    client = app.test_client()
    sign_in(client, *VIEWER)
    users_file.write_bytes(b"\xff\xfe not text\n")
    answer = client.get("/workflows")
    assert answer.status_code == 503
    assert answer.get_data(as_text=True).strip() == t("pgbus.web.auth.users_file_unreadable")
