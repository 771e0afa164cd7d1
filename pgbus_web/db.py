"""Connections to PostgreSQL: one SQLAlchemy engine (and its pool) per URL.

Every connection runs with ``TimeZone = 'UTC'`` so that timestamps without a
zone (pgbus_uniqueness_keys.created_at) and ``now()`` mean the same thing in
every process. A ``Database`` pairs the primary with an optional read-only
replica: pages may read from the replica, writes always go to the primary.
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine, make_url
from sqlalchemy.exc import ArgumentError

from .models import values

DATABASE_URL_ENV = "PGBUS_DATABASE_URL"

# Pool sizes for one dashboard process; a worker uses one connection.
POOL_SIZE = 5
MAX_OVERFLOW = 10
# Seconds to wait for a server before giving up with a clear error.
CONNECT_TIMEOUT = 10


class DatabaseUrlError(ValueError):
    """The database URL is missing or is not a PostgreSQL URL."""


def normalize_url(url: str | None) -> str:
    """The URL as SQLAlchemy's psycopg 3 dialect wants it.

    Accepts ``postgres://``, ``postgresql://`` and ``postgresql+psycopg://``;
    falls back to ``PGBUS_DATABASE_URL`` when *url* is empty.
    """
    url = (url or os.environ.get(DATABASE_URL_ENV) or "").strip()
    if not url:
        raise DatabaseUrlError(
            f"no database URL: pass --database-url or set {DATABASE_URL_ENV}"
        )
    for prefix in ("postgres://", "postgresql://"):
        if url.startswith(prefix):
            url = "postgresql+psycopg://" + url[len(prefix):]
            break
    try:
        parsed = make_url(url)
    except ArgumentError as exc:
        raise DatabaseUrlError(f"malformed database URL: {exc}") from None
    if parsed.get_backend_name() != "postgresql":
        raise DatabaseUrlError(
            f"not a PostgreSQL URL (scheme {parsed.drivername!r}); "
            "expected postgresql://user:password@host:port/database"
        )
    if parsed.get_driver_name() != "psycopg":
        parsed = parsed.set(drivername="postgresql+psycopg")
    return parsed.render_as_string(hide_password=False)


def create_engine(url: str | None, **kwargs) -> Engine:
    """An engine whose every connection uses UTC and loads the values
    Python cannot hold (infinite timestamps, JSON past its parser) as
    ``models.values`` says."""
    options = {
        "pool_size": POOL_SIZE,
        "max_overflow": MAX_OVERFLOW,
        "pool_pre_ping": True,
        "connect_args": {
            "options": "-c TimeZone=UTC",
            "connect_timeout": CONNECT_TIMEOUT,
            "application_name": "pgbus-web",
        },
    }
    options.update(kwargs)
    return values.install(sa.create_engine(normalize_url(url), **options))


def describe_url(engine: Engine) -> str:
    """The engine's URL without its password, for messages."""
    return engine.url.render_as_string(hide_password=True)


@dataclass
class Database:
    """The primary (reads and writes) and an optional replica (reads only)."""

    primary: Engine
    replica: Engine | None = None

    def __post_init__(self) -> None:
        # A host's own engines too: a page must not fail on a stored value.
        for engine in (self.primary, self.replica):
            if engine is not None:
                values.install(engine)

    @classmethod
    def from_urls(cls, url: str | None, replica_url: str | None = None) -> "Database":
        primary = create_engine(url)
        replica = create_engine(replica_url) if replica_url else None
        return cls(primary, replica)

    @contextmanager
    def read(self) -> Iterator[Connection]:
        """A connection for pages: the replica when there is one."""
        engine = self.replica or self.primary
        with engine.connect() as conn:
            yield conn

    @contextmanager
    def write(self) -> Iterator[Connection]:
        """A transaction on the primary, committed when the block ends."""
        with self.primary.begin() as conn:
            yield conn

    def dispose(self) -> None:
        self.primary.dispose()
        if self.replica is not None:
            self.replica.dispose()
