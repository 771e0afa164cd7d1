"""`pgbus-web tokens add/list/revoke`: a token shown once (only its
SHA-256 kept), listed with its last use, refused once revoked."""

from __future__ import annotations

import hashlib

import sqlalchemy as sa
from click.testing import CliRunner
from support.api_support import Api

from pgbus_web.launch import main_group


def run(database_url, *args):
    return CliRunner().invoke(main_group, ["tokens", *args, "--database-url", database_url])


def test_add_list_use_and_revoke(database_url, engine, app):
    added = run(database_url, "add", "deploy-bot", "--role", "operator")
    assert added.exit_code == 0, added.output
    token = added.stdout.strip().splitlines()[-1]
    assert token.startswith("pgbw_") and len(token) > 40
    with engine.connect() as conn:
        stored = conn.execute(sa.text("SELECT token_sha256 FROM pgbus_web_api_tokens")).scalars().all()
    assert stored == [hashlib.sha256(token.encode()).hexdigest()]  # never the token itself

    again = run(database_url, "add", "deploy-bot", "--role", "viewer")
    assert again.exit_code == 1 and "exists" in again.output
    assert run(database_url, "add", "no spaces", "--role", "viewer").exit_code == 1
    assert run(database_url, "add", "x", "--role", "root").exit_code == 2  # not a role

    listed = run(database_url, "list").output.splitlines()
    assert listed[1].split("\t")[:2] == ["deploy-bot", "operator"] and listed[1].split("\t")[3] == "-"
    assert Api(app.test_client(), token).get("/runs").status_code == 200
    used = run(database_url, "list").output.splitlines()[1].split("\t")
    assert used[3].endswith("UTC") and used[4] == "-"

    assert run(database_url, "revoke", "deploy-bot").exit_code == 0
    assert Api(app.test_client(), token).get("/runs").status_code == 401
    assert run(database_url, "revoke", "deploy-bot").exit_code == 1
    assert run(database_url, "list").output.splitlines()[1].split("\t")[4].endswith("UTC")
    # The name is free again once revoked.
    assert run(database_url, "add", "deploy-bot", "--role", "viewer").exit_code == 0
