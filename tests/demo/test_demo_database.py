"""The demo's database (demo/embedded_server.py): made once, with the builtin
C.UTF-8 collation where the server has it, so it sorts by code point and
still folds case beyond ASCII, whatever the locale of the shell that
started the server."""

from __future__ import annotations

import uuid

import pytest
import sqlalchemy as sa

from pgbus_web import db
from pgbus_web.demo import embedded_server

# Upper and lower case, accents, a digit, a symbol, a CJK character: code
# point order puts capitals first and accented letters last, which a
# linguistic collation does not.
WORDS = ["b", "B", "a", "Z", "é", "e", "10", "9", "_x", "注文", "Ö", "o"]


@pytest.fixture
def server_admin(database_url):
    # Without the pages' statement timeout: creating and dropping a database
    # waits on a checkpoint, which on a busy machine has taken over 10 s.
    engine = db.create_engine(
        database_url, db.UNBOUNDED_STATEMENTS, isolation_level="AUTOCOMMIT", pool_size=1, max_overflow=0
    )
    made = []
    yield engine, made
    with engine.connect() as conn:
        for name in made:
            conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    engine.dispose()


def _name(made: list) -> str:
    name = f"pgbus_demo_test_{uuid.uuid4().hex[:8]}"
    made.append(name)
    return name


def _one(url: str, statement: str, **binds):
    engine = db.create_engine(url, pool_size=1, max_overflow=0)
    try:
        with engine.connect() as conn:
            return conn.execute(sa.text(statement), binds).all()
    finally:
        engine.dispose()


def test_ensure_makes_the_database_once_with_the_builtin_collation(database_url, server_admin):
    _, made = server_admin
    name = _name(made)
    url = embedded_server.ensure(database_url, name)
    [(provider, locale, version)] = _one(
        url,
        "SELECT datlocprovider, datlocale, current_setting('server_version_num')::int"
        " FROM pg_database WHERE datname = current_database()",
    )
    if version >= embedded_server.BUILTIN_SINCE:
        assert (provider, locale) == ("b", "C.UTF-8")
    else:
        assert provider == "c"
    # A second demo reuses it, rows and all.
    engine = db.create_engine(url, pool_size=1, max_overflow=0)
    with engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE kept (n int)")
        conn.exec_driver_sql("INSERT INTO kept VALUES (7)")
    engine.dispose()
    assert embedded_server.ensure(database_url, name) == url
    assert _one(url, "SELECT n FROM kept") == [(7,)]


def test_the_demo_database_sorts_by_code_point_and_folds_case_beyond_ascii(database_url, server_admin):
    admin, made = server_admin
    url = embedded_server.ensure(database_url, _name(made))
    [(version,)] = _one(url, "SELECT current_setting('server_version_num')::int")
    if version < embedded_server.BUILTIN_SINCE:
        # Before PostgreSQL 17 the demo takes the server's default, whatever it sorts like.
        [(mine, default)] = _one(
            url,
            "SELECT (SELECT datcollate FROM pg_database WHERE datname = current_database()),"
            " (SELECT datcollate FROM pg_database WHERE datname = 'template1')",
        )
        assert mine == default
        return
    ordered = [word for (word,) in _one(url, "SELECT w FROM unnest(CAST(:words AS text[])) w ORDER BY w", words=WORDS)]
    assert ordered == sorted(WORDS)
    # The controls: the words come unsorted, and an order that ignores case
    # (as a linguistic collation would, first) is another order.
    assert WORDS != sorted(WORDS)
    assert sorted(WORDS, key=str.casefold) != sorted(WORDS)
    assert _one(url, "SELECT lower('ÉCOLE ÖL 注文')") == [("école öl 注文",)]
    # The control: a database whose character classes are C's folds ASCII only.
    plain = _name(made)
    with admin.connect() as conn:
        conn.exec_driver_sql(f"CREATE DATABASE \"{plain}\" TEMPLATE template0 ENCODING 'UTF8' LOCALE 'C'")
    assert _one(embedded_server.url_of(database_url, plain), "SELECT lower('ÉCOLE ÖL 注文')") == [("École Öl 注文",)]


def test_the_url_names_the_database_and_keeps_the_rest_as_written():
    embedded = "postgresql://postgres:@/postgres?host=/tmp/demo/pgdata"
    assert embedded_server.url_of(embedded, "pgbus_demo") == "postgresql://postgres:@/pgbus_demo?host=/tmp/demo/pgdata"
    remote = "postgresql+psycopg://u:p%40ss@db.example:5433/app?sslmode=require"
    assert embedded_server.url_of(remote, "x") == "postgresql+psycopg://u:p%40ss@db.example:5433/x?sslmode=require"


def test_the_create_statement_names_the_provider_only_where_the_server_has_it():
    assert "LOCALE_PROVIDER builtin" in embedded_server.create_statement("x", 170000)
    assert embedded_server.create_statement("x", 160004) == 'CREATE DATABASE "x"'
