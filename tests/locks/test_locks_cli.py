"""``pgbus-web locks reap`` against the test database."""

from __future__ import annotations

from datetime import timedelta

from click.testing import CliRunner
from support.lock_support import FLOOR

from pgbus_web.launch import main_group
from pgbus_web.locks import FRESH, LIVE, PARKED

OLD = FLOOR + timedelta(minutes=5)


def _reap(database_url, *args):
    return CliRunner().invoke(main_group, ["locks", "reap", "--database-url", database_url, *args])


def _scene(locks):
    locks.live("live-old", age=OLD)
    locks.gone("gone-old", age=OLD)
    locks.parked("parked", age=OLD, double_encoded=True)
    locks.acquire("fresh")
    locks.acquire("orphan", age=OLD)


def test_reap_releases_and_says_what_it_did(database_url, locks):
    _scene(locks)
    result = _reap(database_url)
    assert result.exit_code == 0, result.output
    assert (
        "Released 2 lock(s) older than 1 hour (1 unbound with no "
        "parked job, 1 bound to a message that no longer exists)." in result.output
    )
    assert "Spared 1 unbound lock(s) past the floor that a parked job carries." in result.output
    assert locks.states() == {"live-old": LIVE, "parked": PARKED, "fresh": FRESH}


def test_dry_run_lists_what_it_would_release_and_changes_nothing(database_url, locks):
    _scene(locks)
    before = locks.snapshot()
    result = _reap(database_url, "--dry-run")
    assert result.exit_code == 0, result.output
    assert "Dry run: would release 2 lock(s)" in result.output
    assert "  orphan  orphan  (pending, acquired " in result.output
    assert "  gone    gone-old  (pgbus_default #" in result.output
    assert locks.snapshot() == before


def test_older_than_sets_the_floor(database_url, locks):
    locks.acquire("ten-minutes", age=timedelta(minutes=10))
    result = _reap(database_url, "--older-than", "300")
    assert result.exit_code == 0, result.output
    assert "Released 1 lock(s) older than 5 minutes" in result.output
    assert locks.row("ten-minutes") is None


def test_older_than_must_be_positive(database_url, locks):
    locks.acquire("k", age=OLD)
    before = locks.snapshot()
    result = _reap(database_url, "--older-than", "0")
    assert result.exit_code == 2
    assert "--older-than" in result.output
    assert locks.snapshot() == before


def test_unreachable_database_is_one_line_and_non_zero():
    result = _reap("postgresql://nobody@127.0.0.1:1/none")
    assert result.exit_code == 1
    assert result.output.startswith("Error: cannot reach the database")
    assert "Traceback" not in result.output


def test_a_url_that_is_not_postgres_is_refused():
    result = _reap("mysql://localhost/db")
    assert result.exit_code == 1
    assert "not a PostgreSQL URL" in result.output
