"""The demo's database on its embedded server: ``pgbus_demo``, made once.

Its collation is chosen here rather than inherited from the shell that
started the server (initdb takes the cluster's from ``LANG``): on
PostgreSQL 17 and later, the builtin provider's ``C.UTF-8``. Text then
sorts by code point, the order glibc's ``C.UTF-8`` gives too, but is
compared byte by byte instead of through the C library, so the seeder's
index builds over run ids take a third less time (docs/performance.md,
"Seeding"). Case mapping (``lower()``, which the search reads) stays
Unicode's. An older server gets its default collation.
"""

from __future__ import annotations

from urllib.parse import urlsplit

import sqlalchemy as sa
from sqlalchemy.engine import Connection
from sqlalchemy.pool import NullPool

from .. import db

NAME = "pgbus_demo"
# PostgreSQL's builtin collation provider arrived in version 17.
BUILTIN_SINCE = 170000


def create_statement(name: str, server_version: int) -> str:
    """CREATE DATABASE *name* (a name this program chose, never input) on
    a server of *server_version* (``server_version_num``)."""
    statement = f'CREATE DATABASE "{name}"'
    if server_version >= BUILTIN_SINCE:
        statement += " TEMPLATE template0 ENCODING 'UTF8' LOCALE_PROVIDER builtin BUILTIN_LOCALE 'C.UTF-8'"
    return statement


def create(conn: Connection, name: str) -> None:
    """Create database *name* on *conn*'s server (an autocommit connection:
    CREATE DATABASE runs outside a transaction)."""
    version = conn.execute(sa.text("SELECT current_setting('server_version_num')::int")).scalar_one()
    conn.exec_driver_sql(create_statement(name, version))


def url_of(server_url: str, name: str) -> str:
    """The URL of database *name* on *server_url*'s server, written as that
    one is (its scheme and query kept to the letter, so the URL the demo
    prints still works in psql)."""
    return urlsplit(server_url)._replace(path=f"/{name}").geturl()


def ensure(server_url: str, name: str = NAME) -> str:
    """The URL of the demo's database on *server_url*'s server, created when
    it is not there yet (an earlier demo's is reused as it is)."""
    engine = db.create_engine(server_url, db.UNBOUNDED_STATEMENTS, isolation_level="AUTOCOMMIT", poolclass=NullPool)
    try:
        with engine.connect() as conn:
            exists = conn.execute(
                sa.text("SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = :name)"), {"name": name}
            ).scalar_one()
            if not exists:
                create(conn, name)
    finally:
        engine.dispose()
    return url_of(server_url, name)
