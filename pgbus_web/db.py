"""Connections to PostgreSQL: one SQLAlchemy engine (and its pool) per URL.

Every connection runs with ``TimeZone = 'UTC'`` so that timestamps without a
zone (pgbus_uniqueness_keys.created_at) and ``now()`` mean the same thing in
every process. A ``Database`` pairs the primary with an optional read-only
replica: pages may read from the replica, writes always go to the primary.
Pages read the replica only while it is within ``replica_max_lag`` seconds
of the primary and has replayed the reader's own last write (``route``);
otherwise, and whenever it cannot be reached, they read the primary
(docs/replica.md).

Every wait on the database has an end (``Bounds``), so that a slow or frozen
server costs a request seconds, not the outage:

- opening a connection: ``connect_timeout`` (libpq's; whole seconds, at least 2);
- a statement: the server's ``statement_timeout`` cancels it, and the client
  stops waiting ``ANSWER_GRACE`` seconds later, for a server too frozen to
  cancel anything (``pgbus_web.bounded``); the connection is then dropped;
- the pool's check of a connection that sat idle (``PING_IDLE`` seconds or
  more since it was returned; docs/performance.md): ``ping``;
- waiting for a free connection in the pool: ``pool_timeout``.

TCP keepalives and ``tcp_user_timeout`` are set too: they find a server
whose host or network is gone (no packet acknowledged), including on a
connection idle in the pool. They cannot find a frozen server process, whose
kernel still acknowledges everything; the client's own bound does.
"""

from __future__ import annotations

import collections
import math
import os
import threading
import time
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, cast

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import Connection, Engine, make_url
from sqlalchemy.exc import ArgumentError
from sqlalchemy.pool import NullPool

from .bounded import BoundedConnection
from .models import replication, values
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
# Seconds a connection may have been back in the pool and still be taken
# without that ping: one returned by the request before is used at once
# (the ping was a round trip on every request). A server that went away
# since (a restart) fails the statement instead; that invalidates the
# whole pool, so the requests after it connect anew (docs/performance.md).
PING_IDLE = 1.0
# Seconds a request waits for a free connection when all are in use.
POOL_TIMEOUT = 5
# Seconds /health may take in all (its own connection, never the pool's).
HEALTH_TIMEOUT = 2
# Seconds a page's request may wait on the server in all, its connects,
# pings and answers together (bounded.waiting): on a frozen server a page
# answers 503 after one such wait, not one per read. libpq's whole seconds
# may add up to 2 to a connect begun with less than that left.
PAGE_WAIT = 7
# TCP keepalives (seconds): probe after a minute idle, every 10 s, give up
# after 3 unanswered; and drop a connection whose sent data stays
# unacknowledged this long (milliseconds). Both only for TCP connections.
KEEPALIVES_IDLE = 60
KEEPALIVES_INTERVAL = 10
KEEPALIVES_COUNT = 3
TCP_USER_TIMEOUT_MS = 30_000
# Seconds a replica may be behind the primary and still serve pages.
REPLICA_MAX_LAG = 10.0
# Seconds one look at the replica's replay position is trusted: at most
# one check of the replica (and one of the primary) per this, whatever
# the requests.
REPLICA_CHECK_INTERVAL = 1.0
# Seconds that check may take (its own connections, never the pages' pool).
REPLICA_CHECK_TIMEOUT = 2.0


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
    def health(cls, seconds: float) -> Bounds:
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
        raise DatabaseUrlError(f"no database URL: pass --database-url or set {DATABASE_URL_ENV}")
    for prefix in ("postgres://", "postgresql://"):
        if url.startswith(prefix):
            url = "postgresql+psycopg://" + url[len(prefix) :]
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
    # pool_pre_ping=False: never pinged; otherwise pinged after PING_IDLE
    # (_bound_waits), never by SQLAlchemy's ping on every checkout.
    ping = kwargs.pop("pool_pre_ping", True)
    options: dict = {"pool_pre_ping": False, "connect_args": connect_args}
    if kwargs.get("poolclass") is not NullPool:
        options.update(pool_size=POOL_SIZE, max_overflow=MAX_OVERFLOW, pool_timeout=bounds.pool)
    options.update(kwargs)
    engine = sa.create_engine(normalize_url(url), **options)
    _bound_waits(engine, bounds, ping)
    # Values Python cannot hold (infinite timestamps, JSON past its parser)
    # load as models.values says.
    return values.install(engine)


def _bound_waits(engine: Engine, bounds: Bounds, ping: bool = True) -> None:
    """Every connection of *engine* is a BoundedConnection: a statement's
    answer waits at most bounds.answer, the pool's ping of an idle
    connection at most bounds.ping. With *ping*, a connection taken from
    the pool PING_IDLE seconds or more after it was returned is pinged
    first; one that does not answer is replaced by a new connection, and
    the pool's other connections (of the same server, gone the same way)
    are replaced as they are taken."""

    @event.listens_for(engine, "do_connect")
    def _connect(dialect, record, cargs, cparams):
        connection = BoundedConnection.connect(*cargs, **cparams)
        connection.answer_bound = bounds.answer
        return connection

    # A connection is returned after its reset's rollback and leaves the
    # pool through the checkout event, pinged there first when it sat
    # idle: the bound is the ping's exactly while it sits in the pool.
    @event.listens_for(engine, "checkin")
    def _idle(dbapi_connection, record):
        if dbapi_connection is not None:
            dbapi_connection.answer_bound = bounds.ping
            record.info[_RETURNED] = time.monotonic()

    @event.listens_for(engine, "checkout")
    def _in_use(dbapi_connection, record, proxy):
        returned = record.info.pop(_RETURNED, None)
        idle = 0.0 if engine in _PINGED_ALWAYS else PING_IDLE
        if ping and returned is not None and time.monotonic() - returned >= idle:
            try:
                engine.dialect.do_ping(dbapi_connection)
            except Exception as problem:  # noqa: BLE001  (any failure: not usable)
                # SQLAlchemy closes it and takes a new connection.
                raise sa.exc.InvalidatePoolError(f"the idle connection's ping failed: {problem}") from problem
        dbapi_connection.answer_bound = bounds.answer


# Where a pooled connection's record keeps the moment it was returned.
_RETURNED = "pgbus_returned_at"
# Engines whose connections are pinged whenever they leave the pool: a
# Database's replica, so that a replica gone is found when its connection
# is taken and the page reads the primary instead (Database.read), never
# a 503 for a stopped replica.
_PINGED_ALWAYS: weakref.WeakSet[Engine] = weakref.WeakSet()


def describe_url(engine: Engine) -> str:
    """The engine's URL without its password, for messages."""
    return engine.url.render_as_string(hide_password=True)


def place(conn) -> dict[str, str]:
    """Where *conn* reads: its host (a TCP host with its port, or the
    socket's directory) and database name, as the server connection
    settled them (URL, environment, service file alike); never the user
    or the password."""
    info: Any = getattr(conn.connection.driver_connection, "info", None)
    if not hasattr(info, "dbname"):
        # A host app's engine on another driver: what its URL says.
        url = conn.engine.url
        return {"host": f"{url.host}:{url.port}" if url.port else str(url.host or ""), "database": url.database or ""}
    host = info.host
    if not host.startswith("/"):
        host = f"{host}:{info.port}"
    return {"host": host, "database": info.dbname}


# What a connection failure looks like (SQLAlchemy's), for the fallbacks.
UNREACHABLE = (sa.exc.OperationalError, sa.exc.InterfaceError, sa.exc.TimeoutError)
# SQLSTATE of a statement the server cancelled (statement_timeout).
QUERY_CANCELED = "57014"


def cancelled(problem: BaseException) -> bool:
    """True when *problem* is a statement the server cancelled past its
    timeout: the database answered, too slowly, rather than being away."""
    return getattr(getattr(problem, "orig", None), "sqlstate", None) == QUERY_CANCELED


# A replica's states: within the lag bound; beyond it; not answering; a
# server that answers but is no standby (promoted, or the wrong URL).
STREAMING, LAGGING, UNREACHABLE_STATE, NOT_STANDBY = "streaming", "lagging", "unreachable", "not_standby"


@dataclass(frozen=True)
class ReplicaView:
    """One look at the replica."""

    state: str
    # Seconds it is behind at most (0: it had replayed all the primary had
    # written); None when unknown (unreachable, not a standby).
    lag: float | None
    # The WAL position it had replayed; None when unknown.
    replayed: int | None
    # time.monotonic() of the look.
    checked_at: float
    # The WAL position it had received, and whether it had replayed every
    # whole record of it (models.replication.Replay.waiting_for_wal).
    received: int | None = None
    caught_up: bool = False

    def has(self, position: int) -> bool:
        """Whether it had replayed a write whose commit ended by *position*."""
        if self.replayed is not None and self.replayed >= position:
            return True
        return self.caught_up and self.received is not None and self.received >= position


@dataclass
class Route:
    """Where one request reads: ``source`` "primary" or "replica";
    ``reason`` why not the replica when there is one ("pinned": it has
    not replayed this reader's last write yet; or the replica's state:
    lagging, unreachable, not_standby); ``lag`` the replica's seconds
    behind when known; ``after`` the reader's last write (an LSN), None
    for none; ``released``: the replica had replayed past it."""

    source: str
    reason: str | None = None
    lag: float | None = None
    after: int | None = None
    released: bool = False


class ReplicaWatch:
    """How far behind the replica is, looked at once per *interval* at
    most, on connections of its own (bounded by *timeout*).

    0 when it had every whole record the primary had flushed at the look
    (_caught_up). Otherwise an upper bound, the smaller of two: the time
    since the last transaction the replica replayed committed on the
    primary; and the time since the oldest look that found the primary's
    WAL at or before the replica's replay position now (the replica shows
    at least the primary as it was then). An idle primary commits
    nothing, so the first bound alone would grow with the quiet
    (docs/replica.md)."""

    # Looks kept for the second bound.
    HISTORY = 4096
    # A look that cannot tell the lag (see _look) asks the replica again
    # this many times, this many seconds apart; still unknown, the
    # replica counts as lagging (pages read the primary) until a look can.
    FIRST_LOOK_TRIES = 5
    FIRST_LOOK_PAUSE = 0.02

    def __init__(
        self,
        primary: Engine,
        replica: Engine,
        *,
        max_lag: float = REPLICA_MAX_LAG,
        interval: float = REPLICA_CHECK_INTERVAL,
        timeout: float = REPLICA_CHECK_TIMEOUT,
    ) -> None:
        self.max_lag = max_lag
        self.interval = interval
        self._probes = tuple(
            create_engine(
                engine.url.render_as_string(hide_password=False), Bounds.health(timeout), pool_size=1, max_overflow=1
            )
            for engine in (primary, replica)
        )
        self._view: ReplicaView | None = None
        self._lock = threading.Lock()
        # (monotonic time, the primary's WAL position then), oldest first.
        self._history: collections.deque[tuple[float, int]] = collections.deque(maxlen=self.HISTORY)

    def view(self, *, fresh: bool = False) -> ReplicaView:
        """The last look when it is younger than the interval; else a new
        one. While one request looks, the others take the last look."""
        view = self._view
        if not fresh and view is not None and time.monotonic() - view.checked_at < self.interval:
            return view
        if not self._lock.acquire(blocking=view is None or fresh):
            return cast(ReplicaView, view)  # not blocking: there is a last look
        try:
            if not fresh and self._view is not None and time.monotonic() - self._view.checked_at < self.interval:
                return self._view
            self._view = self._look()
            return self._view
        finally:
            self._lock.release()

    def unreachable(self) -> None:
        """A page could not connect to the replica: so it is until the next look."""
        self._view = ReplicaView(UNREACHABLE_STATE, None, None, time.monotonic())

    def _look(self) -> ReplicaView:
        primary_probe, replica_probe = self._probes
        # The primary first: a replica at or past where the primary was
        # has replayed everything committed before the look.
        try:
            with primary_probe.connect() as conn:
                flushed = replication.flushed(conn)
        except UNREACHABLE:
            flushed = None
        now = time.monotonic()
        if flushed is not None:
            self._history.append((now, flushed))
        try:
            with replica_probe.connect() as conn:
                replay = replication.replay(conn)
                lag = self._lag(replay, flushed, now)
                # Not known yet: a first look at a standby that has replayed
                # no transaction since it started (an idle primary) and no
                # earlier look to compare with. Streaming, it replays what
                # the primary had at this look within milliseconds.
                for _ in range(self.FIRST_LOOK_TRIES):
                    if lag is not None:
                        break
                    time.sleep(self.FIRST_LOOK_PAUSE)
                    replay = replication.replay(conn)
                    lag = self._lag(replay, flushed, now)
        except UNREACHABLE:
            return ReplicaView(UNREACHABLE_STATE, None, None, now)
        if not replay.in_recovery or replay.replayed is None:
            return ReplicaView(NOT_STANDBY, None, None, now)
        state = STREAMING if lag is not None and lag <= self.max_lag else LAGGING
        return ReplicaView(state, lag, replay.replayed, now, replay.received, self._caught_up(replay, flushed))

    @staticmethod
    def _caught_up(replay: replication.Replay, flushed: int | None) -> bool:
        """Whether the replica had every whole record the primary had
        flushed at the look: replayed past it, or received it and waiting
        for more (the last record may be one the primary has flushed only
        part of: an idle primary leaves it so)."""
        if flushed is None or replay.replayed is None:
            return False
        if replay.replayed >= flushed:
            return True
        return bool(replay.waiting_for_wal) and replay.received is not None and replay.received >= flushed

    def _lag(self, replay: replication.Replay, flushed: int | None, now: float) -> float | None:
        if not replay.in_recovery or replay.replayed is None:
            return 0.0  # no standby: nothing to wait for (the caller says so)
        if self._caught_up(replay, flushed):
            return 0.0
        bounds = [replay.since_last_commit] if replay.since_last_commit is not None else []
        for seen_at, position in reversed(self._history):
            if position <= replay.replayed:
                bounds.append(now - seen_at)
                break
        return min(bounds) if bounds else None

    def dispose(self) -> None:
        for probe in self._probes:
            probe.dispose()


class SchemaProblem(RuntimeError):
    """The database answers but lacks this release's schema."""


@dataclass
class Database:
    """The primary (reads and writes) and an optional replica (reads only)."""

    primary: Engine
    replica: Engine | None = None
    # Seconds the replica may be behind and still serve pages.
    replica_max_lag: float = REPLICA_MAX_LAG
    _watch: ReplicaWatch | None = field(default=None, init=False, repr=False, compare=False)
    # One engine per health bound, made on first use (see check).
    _health: dict[float, Engine] = field(default_factory=dict, init=False, repr=False, compare=False)
    _health_lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # A host's own engines too: a page must not fail on a stored value.
        for engine in (self.primary, self.replica):
            if engine is not None:
                values.install(engine)
        if self.replica is not None:
            _PINGED_ALWAYS.add(self.replica)
            self._watch = ReplicaWatch(self.primary, self.replica, max_lag=self.replica_max_lag)

    @classmethod
    def from_urls(
        cls,
        url: str | None,
        replica_url: str | None = None,
        bounds: Bounds | None = None,
        replica_max_lag: float = REPLICA_MAX_LAG,
    ) -> Database:
        primary = create_engine(url, bounds)
        replica = create_engine(replica_url, bounds) if replica_url else None
        return cls(primary, replica, replica_max_lag)

    def replica_view(self, *, fresh: bool = False) -> ReplicaView | None:
        """The replica's last look (a new one with *fresh*); None without a replica."""
        return None if self._watch is None else self._watch.view(fresh=fresh)

    def route(self, after: int | None = None) -> Route:
        """Where a reader whose last write ended at WAL position *after*
        (None: none known) reads: the replica while it is within the lag
        bound and has replayed past *after*; the primary otherwise."""
        view = self.replica_view()
        if view is None:
            return Route("primary", after=after)
        if view.state != STREAMING:
            return Route("primary", view.state, view.lag, after)
        if after is not None and not view.has(after):
            return Route("primary", "pinned", view.lag, after)
        return Route("replica", None, view.lag, after, released=after is not None)

    def written(self) -> int:
        """The primary's WAL position now: read after a commit, a position
        a replica must replay past to show it (read-your-writes)."""
        with self.primary.connect() as conn:
            return replication.written(conn)

    @contextmanager
    def read(self, route: Route | None = None) -> Iterator[Connection]:
        """A connection for pages, where *route* says (``route()`` when
        None). A replica that cannot be connected to sends the read to
        the primary, and *route* says so."""
        route = route or self.route()
        engine = self.primary
        conn = None
        if route.source == "replica" and self.replica is not None and self._watch is not None:
            try:
                conn = self.replica.connect()
            except UNREACHABLE:
                self._watch.unreachable()
                route.source, route.reason, route.released = "primary", UNREACHABLE_STATE, False
        if conn is None:
            conn = engine.connect()
        with conn:
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
        """One ``SELECT 1`` on the primary, within *timeout* seconds, on
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
                # The primary's URL (its connect_args are ours); no pool:
                # each check opens and closes its connection. The replica's
                # state is replica_view's: pages read the primary without it.
                url = self.primary.url.render_as_string(hide_password=False)
                engine = create_engine(url, Bounds.health(timeout), poolclass=NullPool)
                self._health[timeout] = engine
            return engine

    def dispose(self) -> None:
        self.primary.dispose()
        if self.replica is not None:
            self.replica.dispose()
        if self._watch is not None:
            self._watch.dispose()
        with self._health_lock:
            for engine in self._health.values():
                engine.dispose()
            self._health.clear()
