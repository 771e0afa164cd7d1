"""Helpers the sign-in tests share: a users file with a viewer and an
operator (hashed with argon2's cheapest parameters, so that tests stay
quick; verify reads the parameters from the hash), and the standalone app
with sign-in."""

from __future__ import annotations

from pathlib import Path

from argon2 import PasswordHasher, profiles

from pgbus_web.auth import Auth, User, passwords, users
from support.web_helpers import make_app, soup

VIEWER = ("vera", "viewer password")
OPERATOR = ("otto", "operator password")
CHEAP = PasswordHasher.from_parameters(profiles.CHEAPEST)


def write_users(path: Path) -> Path:
    users.write(
        path,
        {
            VIEWER[0]: User(VIEWER[0], users.VIEWER, passwords.hash_password(VIEWER[1], CHEAP)),
            OPERATOR[0]: User(OPERATOR[0], users.OPERATOR, passwords.hash_password(OPERATOR[1], CHEAP)),
        },
    )
    return path


def signed_in_app(database, users_file: Path, **auth_options):
    return make_app(database, auth=Auth(users_file, **auth_options), SECRET_KEY="test secret")


def sign_in(client, name: str, password: str, next_url: str = "/workflows"):
    page = client.get(f"/sign-in?next={next_url}")
    token = soup(page).select_one("input[name=token]")["value"]
    return client.post("/sign-in", data={"token": token, "name": name, "password": password, "next": next_url})
