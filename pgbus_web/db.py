"""Connections to PostgreSQL: one SQLAlchemy engine (and its pool) per URL.

Every connection runs with ``TimeZone = 'UTC'`` so that timestamps without a
zone (pgbus_uniqueness_keys.created_at) and ``now()`` mean the same thing in
every process. A ``Database`` pairs the primary with an optional read-only
replica: pages may read from the replica, writes always go to the primary.

Every wait on the database has an end (``Bounds``), so that a slow or frozen
server costs a request seconds, not the outage:

- opening a connection: ``connect_timeout`` (libpq's; whole seconds, at least 2);
- a statement: the server's ``statement_timeout`` cancels it, and the client
  stops waiting ``ANSWER_GRACE`` seconds later, for a server too frozen to
  cancel anything (``pgbus_web.bounded``); the connection is then dropped;
- the pool's check of a connection that sat idle (pre-ping): ``ping``;
- waiting for a free connection in the pool: ``pool_timeout``.

TCP keepalives and ``tcp_user_timeout`` are set too: they find a server
whose host or network is gone (no packet acknowledged), including on a
connection idle in the pool. They cannot find a frozen server process, whose
kernel still acknowledges everything; the client's own bound does.
"""

from __future__ import annotations

import math
import os
import threading
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Iterator

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import Connection, Engine, make_url
from sqlalchemy.exc import ArgumentError
from sqlalchemy.pool import NullPool

from .bounded import BoundedConnection
from .models import values
from .schema import status as schema_status

DATABASE_URL_ENV = "PGBUS_DATABASE_URL"

# Pool sizes for one dashboard process; a worker uses one connection.
POOL_SIZE = 5
MAX_OVERFLOW = 10
# Seconds to wait for a server to accept a connection (libpq counts whole
# seconds, and no fewer than 2).
CONNECT_TIMEOUT = 5
# Seconds a page's statement may run before the server cancels it. The
# slowest statement of a page on a million runs takes 2 to 4 s (the
# needs-attention groups, docs/performance.md); live refresh polls every 10 s.
STATEMENT_TIMEOUT = 10
# The worker's and the lock reaper's statements: sweeps and reaps read more
# than a page, and nobody waits on them; a failed tick is tried again.
WORKER_STATEMENT_TIMEOUT = 60
# Seconds the client waits beyond statement_timeout before it gives up on
# an answer: the server's own cancel, when it can send one, comes first.
ANSWER_GRACE = 2
# Seconds a pooled connection that sat idle may take to answer the ping
# that checks it before use.
PING_TIMEOUT = 2
# Seconds a request waits for a free connection when all are in use.
POOL_TIMEOUT = 5
# Seconds /health may take in all (its own connection, never the pool's).
HEALTH_TIMEOUT = 2
# TCP keepalives (seconds): probe after a minute idle, every 10 s, give up
# after 3 unanswered; and drop a connection whose sent data stays
# unacknowledged this long (milliseconds). Both only for TCP connections.
KEEPALIVES_IDLE = 60
KEEPALIVES_INTERVAL = 10
KEEPALIVES_COUNT = 3
TCP_USER_TIMEOUT_MS = 30_000


@dataclass(frozen=True)
class Bounds:
    """How long one process waits on the database, in seconds."""

    connect: float = CONNECT_TIMEOUT
    # None: no statement_timeout, and no client-side bound on an answer.
    statement: float | None = STATEMENT_TIMEOUT
    ping: float = PING_TIMEOUT
    pool: float = POOL_TIMEOUT
    grace: float = ANSWER_GRACE

    @property
    def answer(self) -> float | None:
        """The most the client waits for any one answer."""
        return None if self.statement is None else self.statement + self.grace

    @classmethod
    def health(cls, seconds: float) -> "Bounds":
        """One connection, one SELECT 1, all within *seconds* (the connect
        step within max(2, seconds): libpq's floor)."""
        return cls(connect=seconds, statement=seconds, ping=seconds, pool=seconds, grace=0)

    def server_options(self) -> str:
        """The session settings sent when connecting (libpq's ``options``)."""
        options = "-c TimeZone=UTC"
        if self.statement is not None:
            options += f" -c statement_timeout={int(self.statement * 1000)}"
        return options

    def connect_args(self) -> dict:
        return {
            "options": self.server_options(),
            "connect_timeout": max(2, math.ceil(self.connect)),
            "application_name": "pgbus-web",
            "keepalives": 1,
            "keepalives_idle": KEEPALIVES_IDLE,
            "keepalives_interval": KEEPALIVES_INTERVAL,
            "keepalives_count": KEEPALIVES_COUNT,
            "tcp_user_timeout": TCP_USER_TIMEOUT_MS,
        }


# Bounds for the maintenance commands (schema install, seeding): one
# operator at a terminal, statements that may rightly take minutes on a
# big database, and Ctrl-C to stop them. Only connecting is bounded.
UNBOUNDED_STATEMENTS = Bounds(statement=None)


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


def create_engine(url: str | None, bounds: Bounds | None = None, **kwargs) -> Engine:
    """An engine whose every connection uses UTC and whose every wait is
    bounded by *bounds* (the pages' defaults when None). *kwargs* go to
    SQLAlchemy; ``connect_args`` are added to ours."""
    bounds = bounds or Bounds()
    connect_args = {**bounds.connect_args(), **kwargs.pop("connect_args", {})}
    options: dict = {"pool_pre_ping": True, "connect_args": connect_args}
    if kwargs.get("poolclass") is not NullPool:
        options.update(pool_size=POOL_SIZE, max_overflow=MAX_OVERFLOW, pool_timeout=bounds.pool)
    options.update(kwargs)
    engine = sa.create_engine(normalize_url(url), **options)
    _bound_waits(engine, bounds)
    # Values Python cannot hold (infinite timestamps, JSON past its parser)
    # load as models.values says.
    return values.install(engine)


def _bound_waits(engine: Engine, bounds: Bounds) -> None:
    """Every connection of *engine* is a BoundedConnection: a statement's
    answer waits at most bounds.answer, the pool's ping of an idle
    connection at most bounds.ping."""

    @event.listens_for(engine, "do_connect")
    def _connect(dialect, record, cargs, cparams):
        connection = BoundedConnection.connect(*cargs, **cparams)
        connection.answer_bound = bounds.answer
        return connection

    # A connection leaves the pool through the ping (pool_pre_ping, before
    # the checkout event) and comes back after its reset's rollback, so
    # the bound is the ping's exactly while it sits in the pool.
    @event.listens_for(engine, "checkin")
    def _idle(dbapi_connection, record):
        if dbapi_connection is not None:
            dbapi_connection.answer_bound = bounds.ping

    @event.listens_for(engine, "checkout")
    def _in_use(dbapi_connection, record, proxy):
        dbapi_connection.answer_bound = bounds.answer


def describe_url(engine: Engine) -> str:
    """The engine's URL without its password, for messages."""
    return engine.url.render_as_string(hide_password=True)


def place(conn) -> dict[str, str]:
    """Where *conn* reads: its host (a TCP host with its port, or the
    socket's directory) and database name, as the server connection
    settled them (URL, environment, service file alike); never the user
    or the password."""
    info = getattr(conn.connection.driver_connection, "info", None)
    if not hasattr(info, "dbname"):
        # A host app's engine on another driver: what its URL says.
        url = conn.engine.url
        return {"host": f"{url.host}:{url.port}" if url.port else str(url.host or ""), "database": url.database or ""}
    host = info.host
    if not host.startswith("/"):
        host = f"{host}:{info.port}"
    return {"host": host, "database": info.dbname}


class SchemaProblem(RuntimeError):
    """The database answers but lacks this release's schema."""


@dataclass
class Database:
    """The primary (reads and writes) and an optional replica (reads only)."""

    primary: Engine
    replica: Engine | None = None
    # One engine per health bound, made on first use (see check).
    _health: dict[float, Engine] = field(default_factory=dict, init=False, repr=False, compare=False)
    _health_lock: threading.Lock = field(
        default_factory=threading.Lock, init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        # A host's own engines too: a page must not fail on a stored value.
        for engine in (self.primary, self.replica):
            if engine is not None:
                values.install(engine)

    @classmethod
    def from_urls(
        cls, url: str | None, replica_url: str | None = None, bounds: Bounds | None = None
    ) -> "Database":
        primary = create_engine(url, bounds)
        replica = create_engine(replica_url, bounds) if replica_url else None
        return cls(primary, replica)

    @contextmanager
    def read(self) -> Iterator[Connection]:
        """A connection for pages: the replica when there is one."""
        engine = self.replica or self.primary
        with engine.connect() as conn:
            # Each statement its own transaction: a page only reads, and
            # under READ COMMITTED each statement takes its own snapshot
            # anyway. Saves the BEGIN and ROLLBACK round trips, and the
            # connection is never left idle in a transaction while the
            # page draws.
            conn.execution_options(isolation_level="AUTOCOMMIT")
            yield conn

    @contextmanager
    def write(self) -> Iterator[Connection]:
        """A transaction on the primary, committed when the block ends."""
        with self.primary.begin() as conn:
            yield conn

    def check(self, timeout: float = HEALTH_TIMEOUT) -> None:
        """One ``SELECT 1`` where pages read, within *timeout* seconds, on
        a connection of its own: never behind the pages' pool, which
        requests stuck on a frozen server may hold. Raises SQLAlchemy's
        OperationalError (or InterfaceError) when the server does not
        answer, SchemaProblem when it answers without this release's
        schema (every page would fail)."""
        with self._health_engine(timeout).connect() as conn:
            problem = schema_status.problem(conn)
        if problem:
            raise SchemaProblem(problem)

    def _health_engine(self, timeout: float) -> Engine:
        with self._health_lock:
            engine = self._health.get(timeout)
            if engine is None:
                # The read engine's URL (its connect_args are ours); no pool:
                # each check opens and closes its connection.
                url = (self.replica or self.primary).url.render_as_string(hide_password=False)
                engine = create_engine(url, Bounds.health(timeout), poolclass=NullPool)
                self._health[timeout] = engine
            return engine

    def dispose(self) -> None:
        self.primary.dispose()
        if self.replica is not None:
            self.replica.dispose()
        with self._health_lock:
            for engine in self._health.values():
                engine.dispose()
            self._health.clear()
