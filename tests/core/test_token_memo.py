"""An API token is read from the database on every request (docs/api.md,
Tokens): one revoked by another process is refused on its next request,
as one revoked by this process; its last use is written at most once a
minute."""

from __future__ import annotations

import time

import sqlalchemy as sa
from support.api_support import Api, token_for

from pgbus_web.core import tokens


def _revoked_elsewhere(engine, name):
    # As `pgbus-web tokens revoke` in another process writes it.
    with engine.begin() as conn:
        conn.execute(sa.text("UPDATE pgbus_web_api_tokens SET revoked_at = now() WHERE name = :name"), {"name": name})


def test_a_token_revoked_by_another_process_is_refused_on_its_next_request(app, engine):
    api = Api(app.test_client(), token_for(engine, "memo-bot", "viewer"))
    assert api.get("/runs").status_code == 200
    _revoked_elsewhere(engine, "memo-bot")
    assert api.get("/runs").status_code == 401
    # Control: a live token at that moment goes through.
    assert Api(app.test_client(), token_for(engine, "other-bot", "viewer")).get("/runs").status_code == 200


def test_a_token_revoked_by_this_process_is_refused_at_once(app, engine):
    api = Api(app.test_client(), token_for(engine, "memo-bot", "viewer"))
    assert api.get("/runs").status_code == 200
    assert tokens.revoke(engine, "memo-bot")
    assert api.get("/runs").status_code == 401


def _last_used(engine, name):
    with engine.connect() as conn:
        return conn.execute(
            sa.text("SELECT last_used_at FROM pgbus_web_api_tokens WHERE name = :name"), {"name": name}
        ).scalar_one()


def test_its_last_use_is_written_once_a_minute(app, engine, monkeypatch):
    api = Api(app.test_client(), token_for(engine, "memo-bot", "viewer"))
    assert _last_used(engine, "memo-bot") is None
    assert api.get("/runs").status_code == 200
    first = _last_used(engine, "memo-bot")
    assert first is not None
    with engine.begin() as conn:  # as if written long ago: only this process's memo holds the next write back
        conn.execute(sa.text("UPDATE pgbus_web_api_tokens SET last_used_at = now() - interval '1 hour'"))
    assert api.get("/runs").status_code == 200
    assert _last_used(engine, "memo-bot") < first
    later = time.monotonic() + tokens.TOUCH_EVERY.total_seconds() + 1
    monkeypatch.setattr(tokens.time, "monotonic", lambda: later)
    assert api.get("/runs").status_code == 200
    assert _last_used(engine, "memo-bot") >= first
