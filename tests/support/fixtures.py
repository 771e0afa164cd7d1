"""Fixtures several test modules share, registered by conftest.py
(pytest_plugins): a test asks for one by name, no module imports it."""

from __future__ import annotations

import time
import uuid
from contextlib import contextmanager
from datetime import UTC, datetime

import pytest
import sqlalchemy as sa

from pgbus_web import db
from pgbus_web.core import page_reads
from pgbus_web.web.answering import page_cache


@contextmanager
def scratch_database(installed_engine, database_url):
    """(url, engine) of an empty database on the test server, dropped afterwards."""
    name = f"pgbus_scratch_{uuid.uuid4().hex[:12]}"
    # Its own engine, without the pages' statement_timeout: creating and
    # dropping a database waits on the disk, which a busy machine makes slow.
    admin = sa.create_engine(installed_engine.url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    url = sa.engine.make_url(database_url).set(database=name).render_as_string(hide_password=False)
    engine = db.create_engine(url)
    try:
        yield url, engine
    finally:
        engine.dispose()
        with admin.connect() as conn:
            conn.execute(sa.text(f'DROP DATABASE "{name}" WITH (FORCE)'))
        admin.dispose()


@pytest.fixture
def scratch(_installed_engine, database_url):
    """(url, engine) of an empty database of the test's own, dropped afterwards."""
    with scratch_database(_installed_engine, database_url) as made:
        yield made


@pytest.fixture
def bucket_clock(monkeypatch):
    """The pages' clock, held at the start of a bucket (shared.READ_EVERY),
    so that every page of a test is one bucket's; move it with .now."""

    class Clock:
        now = datetime.fromtimestamp(time.time() // page_cache.READ_EVERY * page_cache.READ_EVERY, UTC)

    held = Clock()
    monkeypatch.setattr(page_reads, "utcnow", lambda: held.now)
    return held


@pytest.fixture
def sent_statements(engine):
    """The statements sent on the test's engine, counted (.clear() to start again)."""
    seen: list[str] = []

    def count(conn, cursor, statement, parameters, context, executemany):
        seen.append(statement)

    sa.event.listen(engine, "before_cursor_execute", count)
    yield seen
    sa.event.remove(engine, "before_cursor_execute", count)
