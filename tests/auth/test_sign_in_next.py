"""The sign-in's ``next``: the address it sends a signed-in user to. Only a
plain path of this site is followed; anything else (CR/LF or another
control character, a scheme, ``//host``, a backslash) falls back to the
dashboard's start page, never a 500 and never another site."""

from __future__ import annotations

from urllib.parse import quote

import pytest
from support.auth_support import VIEWER, sign_in, signed_in_app, write_users
from support.web_helpers import soup

START = "/workflows"

REFUSED = [
    "/workflows\r\nX: 1",
    "/workflows\nX: 1",
    "/workflows\rX: 1",
    "/work\tflows",
    "/work\x00flows",
    "/work\x7fflows",
    "/work\x85flows",
    "//evil.example/x",
    "///evil.example/x",
    "/\\evil.example/x",
    "\\\\evil.example/x",
    "/workflows\\..\\x",
    "https://evil.example/x",
    "javascript:alert(1)",
    "evil.example/x",
    "",
]


@pytest.fixture
def app(database, tmp_path):
    return signed_in_app(database, write_users(tmp_path / "users"))


@pytest.mark.parametrize("next_url", REFUSED)
def test_a_signed_in_get_with_a_bad_next_goes_to_the_start_page(app, next_url):
    client = app.test_client()
    assert sign_in(client, *VIEWER).status_code == 303
    response = client.get(f"/sign-in?next={quote(next_url, safe='')}")
    assert response.status_code == 303
    assert response.headers["Location"] == START
    assert "X" not in response.headers


@pytest.mark.parametrize("next_url", REFUSED)
def test_the_form_and_its_post_with_a_bad_next_go_to_the_start_page(app, next_url):
    client = app.test_client()
    page = client.get(f"/sign-in?next={quote(next_url, safe='')}")
    assert page.status_code == 200
    form = soup(page)
    assert form.select_one("input[name=next]")["value"] == START
    token = form.select_one("input[name=token]")["value"]
    response = client.post(
        "/sign-in", data={"token": token, "name": VIEWER[0], "password": VIEWER[1], "next": next_url}
    )
    assert response.status_code == 303
    assert response.headers["Location"] == START


@pytest.mark.parametrize("next_url", ["/workflows?status=paused&reason=paused_error", "/locks", "/workflows/a%2Fb"])
def test_a_path_of_this_site_is_followed(app, next_url):
    client = app.test_client()
    sign_in(client, *VIEWER)
    response = client.get(f"/sign-in?next={quote(next_url, safe='')}")
    assert response.status_code == 303
    assert response.headers["Location"] == next_url
