"""Sessions an admin sees and ends, at the API and the command line, and
the access log they write (docs/standalone.md, Sessions and the access
log): only the sessions power lists or ends anything; an ended session or
revoked token is refused on its next request; a session's last sight is
written at most once a minute."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
import sqlalchemy as sa
from support.api_support import Api, token_for
from support.auth_support import OPERATOR, VIEWER, sign_in, signed_in_app, write_users
from support.policy_support import cli

from pgbus_web.core import permissions, policy, sessions


@pytest.fixture
def app(database, tmp_path):
    return signed_in_app(database, write_users(tmp_path / "users"))


def log_kinds(engine) -> list[tuple[str, str, str | None]]:
    with engine.connect() as conn:
        return [
            tuple(row)
            for row in conn.execute(sa.text("SELECT kind, subject, actor FROM pgbus_web_access_log ORDER BY id"))
        ]


def signed_in(app, who):
    client = app.test_client()
    assert sign_in(client, *who).status_code == 303
    assert client.get("/workflows").status_code == 200
    return client


def test_only_the_sessions_power_lists_and_ends_and_each_refusal_changes_nothing(app, engine, database_url):
    otto = signed_in(app, OPERATOR)
    operator = Api(app.test_client(), token_for(engine, "ops-bot", "operator"))
    approver = Api(app.test_client(), token_for(engine, "approver-bot", "approver"))
    for caller in (operator, approver):
        assert caller.get("/sessions").status_code == 403
        assert caller.get("/access-log").status_code == 403
    [row] = sessions.listing(engine, permissions.break_glass("cli"), policy.current(engine))["sessions"]
    assert approver.post(f"/sessions/{row['id']}/end").status_code == 403
    assert operator.post("/tokens/approver-bot/revoke").status_code == 403
    # The operator's page session goes on: nothing was ended.
    assert otto.get("/workflows").status_code == 200
    assert approver.get("/runs").status_code == 200
    by_cli = cli(database_url, "sessions", "list", token=token_for(engine, "ro", "viewer"))
    assert by_cli.exit_code == 1 and "may not see and end sessions and tokens" in by_cli.output


def test_an_admin_lists_ends_and_reads_the_access_log(app, engine, database_url):
    admin_token = token_for(engine, "sec-admin", "admin")
    admin = Api(app.test_client(), admin_token)
    otto, vera = signed_in(app, OPERATOR), signed_in(app, VIEWER)
    failed = app.test_client()
    assert sign_in(failed, OPERATOR[0], "wrong password").status_code == 401

    listed = admin.get("/sessions").json_body
    ottos = [row for row in listed["sessions"] if row["name"] == OPERATOR[0]]
    assert len(ottos) == 1 and ottos[0]["provider"] == "users file"
    assert {row["name"] for row in listed["tokens"]} == {"sec-admin"}
    # The command line lists the same, as the admin token or break-glass.
    shown = cli(database_url, "sessions", "list", token=admin_token).output
    assert ottos[0]["id"] in shown and "sec-admin" in shown
    # A session that is not (any more) is 404, nothing changed.
    assert admin.post("/sessions/" + "x" * 32 + "/end").status_code == 404
    assert admin.post("/sessions/not a session/end").status_code == 404
    assert admin.post(f"/sessions/{ottos[0]['id']}/end", {"why": "x"}).status_code == 422  # an unknown field
    assert otto.get("/workflows").status_code == 200
    ended = admin.post(f"/sessions/{ottos[0]['id']}/end")
    assert ended.status_code == 200 and ended.json_body["ended"] == 1
    assert otto.get("/workflows").status_code == 401
    assert vera.get("/workflows").status_code == 200  # control: another's session
    assert admin.post(f"/sessions/{ottos[0]['id']}/end").status_code == 404  # once

    # end-all at the command line: every session of the person, none of another's.
    again = signed_in(app, OPERATOR)
    # An expired session of the same person is not counted as ended: it needed no end.
    expired = sessions.start(engine, OPERATOR[0], address="192.0.2.1", lifetime=timedelta(hours=8))
    with engine.begin() as conn:
        conn.execute(
            sa.text("UPDATE pgbus_web_sessions SET expires_at = now() - interval '1 second' WHERE id = :id"),
            {"id": expired},
        )
    by_cli = cli(database_url, "sessions", "end-all", OPERATOR[0], token=admin_token)
    assert by_cli.exit_code == 0 and "Ended every session of" in by_cli.output
    assert "1 live session(s) ended." in by_cli.output
    assert again.get("/workflows").status_code == 401 and vera.get("/workflows").status_code == 200
    assert cli(database_url, "sessions", "end", "y" * 32, token=admin_token).exit_code == 1

    # A token, revoked by an admin: refused on its next request.
    bot = Api(app.test_client(), token_for(engine, "bot", "viewer"))
    assert bot.get("/runs").status_code == 200
    assert admin.post("/tokens/bot/revoke").status_code == 200
    assert bot.get("/runs").status_code == 401
    assert admin.post("/tokens/bot/revoke").status_code == 404

    # Sign-out: vera's sessions end, in the list and the log.
    token = vera.get("/workflows").get_data(as_text=True).split('name="token" value="')[1].split('"')[0]
    assert vera.post("/sign-out", data={"token": token}).status_code == 303
    assert admin.get("/sessions").json_body["sessions"] == []

    kinds = [kind for kind, _, _ in log_kinds(engine)]
    for kind in (
        "sign_in",
        "sign_in_failed",
        "session_ended",
        "sessions_ended",
        "token_added",
        "token_revoked",
        "token_new_address",
        "sign_out",
    ):
        assert kind in kinds, kind
    assert ("session_ended", OPERATOR[0], "api:sec-admin") in log_kinds(engine)
    assert ("sessions_ended", OPERATOR[0], "cli:sec-admin") in log_kinds(engine)
    lines = admin.get("/access-log").json_body["lines"]
    assert lines[0]["kind"] == "sign_out" and lines[0]["subject"] == VIEWER[0]  # newest first
    assert "wrong password" not in str(lines)  # never a password
    assert "token_added" in cli(database_url, "sessions", "log", token=admin_token).output


def test_a_sessions_last_sight_is_written_at_most_once_a_minute(app, engine, monkeypatch):
    otto = signed_in(app, OPERATOR)

    def last_seen():
        with engine.connect() as conn:
            return conn.execute(sa.text("SELECT last_seen_at FROM pgbus_web_sessions")).scalar_one()

    with engine.begin() as conn:  # as if seen an hour ago
        conn.execute(sa.text("UPDATE pgbus_web_sessions SET last_seen_at = now() - interval '1 hour'"))
    long_ago = last_seen()
    assert otto.get("/workflows").status_code == 200
    # This process wrote it less than a minute ago: not again.
    assert last_seen() == long_ago
    later = time.monotonic() + sessions.SEEN_EVERY.total_seconds() + 1
    monkeypatch.setattr(sessions.time, "monotonic", lambda: later)
    assert otto.get("/workflows").status_code == 200
    assert last_seen() > long_ago
