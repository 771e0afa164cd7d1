"""The Sessions page in real Chromium, as an admin signed in through the
form: another person's session and a token are listed and ended with the
page's buttons, and their next request is refused; a viewer has no link
to the page and is refused it (docs/standalone.md, Sessions and the
access log)."""

from __future__ import annotations

import pytest
from support.api_support import Api, token_for
from support.auth_support import CHEAP, OPERATOR, VIEWER, sign_in
from support.browser import WAIT_MS, requires_chromium, serve
from support.web_helpers import make_app

from pgbus_web.auth import Auth, User, passwords, users

pytestmark = requires_chromium

ADMIN = ("ada", "admin password")


@pytest.fixture
def app(database, tmp_path):
    path = tmp_path / "users"
    users.write(
        path,
        {
            name: User(name, role, passwords.hash_password(password, CHEAP))
            for (name, password), role in ((ADMIN, "admin"), (OPERATOR, "operator"), (VIEWER, "viewer"))
        },
    )
    return make_app(database, auth=Auth(path), SECRET_KEY="test secret")


def signed_in_page(chromium, base, who):
    context = chromium.new_context(viewport={"width": 1280, "height": 800})
    page = context.new_page()
    page.set_default_timeout(WAIT_MS)
    page.goto(base + "/sign-in")
    page.fill("input[name=name]", who[0])
    page.fill("input[name=password]", who[1])
    page.locator("form button[type=submit]").click()
    page.wait_for_url("**/workflows")
    return context, page


def test_an_admin_ends_a_session_and_revokes_a_token_from_the_page(chromium, app, engine):
    otto = app.test_client()
    assert sign_in(otto, *OPERATOR).status_code == 303 and otto.get("/workflows").status_code == 200
    bot = Api(app.test_client(), token_for(engine, "deploy-bot", "operator"))
    assert bot.get("/runs").status_code == 200
    for base in serve(app):
        admin_context, admin = signed_in_page(chromium, base, ADMIN)
        viewer_context, viewer = signed_in_page(chromium, base, VIEWER)
        try:
            # The viewer: no link, and the page refused.
            assert viewer.locator(".pgbus-nav a", has_text="Sessions").count() == 0
            assert viewer.goto(base + "/sessions").status == 403
            # The admin: the link, and both sessions and the token listed.
            admin.locator(".pgbus-nav a", has_text="Sessions").click()
            admin.wait_for_url("**/sessions")
            row = admin.locator(f'.pgbus-session-row[data-name="{OPERATOR[0]}"]')
            assert row.count() == 1
            assert admin.locator(f'.pgbus-session-row[data-name="{ADMIN[0]}"]').count() == 1
            assert admin.locator('.pgbus-token-row[data-name="deploy-bot"]').count() == 1
            assert admin.locator('.pgbus-access-line[data-kind="sign_in"]').count() == 3

            row.locator("button.pgbus-session-end").click()
            admin.wait_for_load_state("load")
            assert admin.locator(f'.pgbus-session-row[data-name="{OPERATOR[0]}"]').count() == 0
            assert otto.get("/workflows").status_code == 401
            assert admin.locator('.pgbus-access-line[data-kind="session_ended"]').count() == 1

            admin.locator('.pgbus-token-row[data-name="deploy-bot"] button.pgbus-token-revoke').click()
            admin.wait_for_load_state("load")
            assert admin.locator('.pgbus-token-row[data-name="deploy-bot"]').count() == 0
            assert bot.get("/runs").status_code == 401
            # Control: the admin's and the viewer's own sessions go on.
            assert admin.goto(base + "/sessions").status == 200
            assert viewer.goto(base + "/workflows").status == 200
        finally:
            admin_context.close()
            viewer_context.close()
