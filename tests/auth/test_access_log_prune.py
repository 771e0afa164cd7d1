"""`pgbus-web prune` keeps the access log to its retention
(--access-log-older-than, a year by default): older lines go, and so do
sessions that ended or expired before the cutoff; newer lines, a live
session and its sign-in stay; a dry run counts and deletes nothing."""

from __future__ import annotations

from datetime import timedelta

import sqlalchemy as sa
from click.testing import CliRunner

from pgbus_web.core import sessions
from pgbus_web.launch import main_group


def prune(database_url, *args):
    return CliRunner().invoke(
        main_group, ["prune", "--older-than", "90d", *args, "--database-url", database_url], catch_exceptions=False
    )


def counts(engine):
    with engine.connect() as conn:
        return (
            conn.execute(sa.text("SELECT count(*) FROM pgbus_web_access_log")).scalar_one(),
            conn.execute(sa.text("SELECT count(*) FROM pgbus_web_sessions")).scalar_one(),
        )


def test_prune_deletes_the_access_log_and_sessions_past_their_retention(database_url, engine):
    old_session = sessions.start(engine, "ada", address="192.0.2.1", lifetime=timedelta(hours=8))
    sessions.failed(engine, "mallory", address="203.0.113.9")
    live = sessions.start(engine, "pat", address="192.0.2.2", lifetime=timedelta(hours=8))
    with engine.begin() as conn:
        # Forty days ago: the first sign-in, its session and the failure.
        conn.execute(
            sa.text("UPDATE pgbus_web_access_log SET at = at - interval '40 days' WHERE subject IN ('ada', 'mallory')")
        )
        conn.execute(
            sa.text(
                "UPDATE pgbus_web_sessions SET started_at = started_at - interval '40 days',"
                " last_seen_at = last_seen_at - interval '40 days',"
                " expires_at = expires_at - interval '40 days' WHERE id = :id"
            ),
            {"id": old_session},
        )
    assert counts(engine) == (3, 2)

    # The default retention (a year) keeps all of it.
    kept = prune(database_url)
    assert kept.exit_code == 0 and "Deleted 0 access log line(s) and 0 ended session(s)" in kept.output
    dry = prune(database_url, "--access-log-older-than", "30d", "--dry-run")
    assert "would delete 2 access log line(s) and 1 ended session(s)" in dry.output
    assert counts(engine) == (3, 2)

    done = prune(database_url, "--access-log-older-than", "30d")
    assert done.exit_code == 0 and "Deleted 2 access log line(s) and 1 ended session(s)" in done.output
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT subject FROM pgbus_web_access_log")).scalars().all() == ["pat"]
        assert conn.execute(sa.text("SELECT id FROM pgbus_web_sessions")).scalars().all() == [live]
    assert sessions.alive(engine, live, "pat")
    # A retention that is not a duration is refused before anything is read.
    assert prune(database_url, "--access-log-older-than", "a year").exit_code == 2
