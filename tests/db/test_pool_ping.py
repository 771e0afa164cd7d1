"""The pool pings a connection before use only when it sat idle
(db.PING_IDLE seconds or more since it was returned): a request that takes
the connection the request before returned costs no extra round trip
(docs/performance.md, "The pool's ping"). A restarted server is in
test_frozen_database.py."""

from __future__ import annotations

import pytest
from sqlalchemy.dialects.postgresql.psycopg import PGDialect_psycopg
from sqlalchemy.pool import NullPool

from pgbus_web import db
from pgbus_web.app import create_app
from pgbus_web.demo.workflows import REGISTRY


@pytest.fixture
def pings(monkeypatch):
    """The pings sent, counted."""
    sent = []
    original = PGDialect_psycopg.do_ping

    def counted(self, dbapi_connection):
        sent.append(dbapi_connection)
        return original(self, dbapi_connection)

    monkeypatch.setattr(PGDialect_psycopg, "do_ping", counted)
    return sent


def _app(database_url):
    # Its own engine and pool (the schema installed by the engine fixture).
    return create_app({"database_url": database_url, "registry": REGISTRY, "TESTING": True, "run_operations": False})


def test_a_connection_returned_just_before_is_taken_without_a_ping(engine, database_url, pings, monkeypatch):
    monkeypatch.setattr(db, "PING_IDLE", 3600.0)
    app = _app(database_url)
    try:
        client = app.test_client()
        for _ in range(3):
            assert client.get("/workflows").status_code == 200
        assert pings == []
        # The control: the same requests with every pooled connection idle
        # long enough are each pinged first (the first one's is new: none).
        monkeypatch.setattr(db, "PING_IDLE", 0.0)
        for _ in range(3):
            assert client.get("/workflows").status_code == 200
        assert len(pings) == 3
    finally:
        app.extensions["pgbus_web"].database.dispose()


def test_a_failed_ping_takes_a_new_connection(database_url, pings, monkeypatch):
    monkeypatch.setattr(db, "PING_IDLE", 0.0)
    engine = db.create_engine(database_url)
    other = db.create_engine(database_url, poolclass=NullPool)
    try:
        with engine.connect() as conn:
            first = conn.exec_driver_sql("SELECT pg_backend_pid()").scalar_one()
        with other.connect() as conn:
            assert conn.exec_driver_sql("SELECT pg_terminate_backend(%s)", (first,)).scalar_one()
        # The terminated one is pinged, found gone and replaced: no error.
        with engine.connect() as conn:
            now = conn.exec_driver_sql("SELECT pg_backend_pid()").scalar_one()
        assert now != first
        assert pings
    finally:
        engine.dispose()
        other.dispose()


def test_an_engine_without_the_ping_never_pings(database_url, pings, monkeypatch):
    monkeypatch.setattr(db, "PING_IDLE", 0.0)
    engine = db.create_engine(database_url, pool_pre_ping=False)
    try:
        for _ in range(3):
            with engine.connect() as conn:
                conn.exec_driver_sql("SELECT 1")
        assert pings == []
    finally:
        engine.dispose()
