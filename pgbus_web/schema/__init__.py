"""Installing the schema: PGMQ (from the SQL the ``pgmq`` package ships, no
extension needed) and pgbus's tables, under a recorded version.

Each version is one script, ``v<N>.sql``, applied after the ones before it:
a fresh install runs them all, a database at an older version runs the ones
it lacks (a migration), each recorded in ``pgbus_web_schema``, all in one
transaction. ``install`` is idempotent: on a database already at this
version it changes nothing; on a database at a version this release does
not know (a newer one) it refuses and changes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib.resources import files
from typing import Any, cast

import sqlalchemy as sa
from pgmq.install import get_embedded_install_sql
from sqlalchemy.engine import Connection, Engine

# The scripts in order: version N is MIGRATIONS[N - 1].
MIGRATIONS = (
    "v1.sql",
    "v2.sql",
    "v3.sql",
    "v4.sql",
    "v5.sql",
    "v6.sql",
    "v7.sql",
    "v8.sql",
    "v9.sql",
    "v10.sql",
    "v11.sql",
    "v12.sql",
    "v13.sql",
    "v14.sql",
    "v15.sql",
    "v16.sql",
    "v17.sql",
)
SCHEMA_VERSION = len(MIGRATIONS)
VERSION_TABLE = "pgbus_web_schema"

# Serializes concurrent installs (two workers starting at once); any constant
# key of our own works, this one spells "pgbusweb".
INSTALL_LOCK_KEY = 0x7067627573776562


class SchemaVersionError(RuntimeError):
    """The database holds a schema version this release does not install."""


@dataclass(frozen=True)
class InstallResult:
    version: int
    installed: bool  # False when the schema was already there
    pgmq_installed: bool
    # The version a migrated database was at; None for a fresh install or none.
    upgraded_from: int | None = None


def _sql(name: str) -> str:
    return files(__package__).joinpath(name).read_text(encoding="utf-8")


def _run_script(conn: Connection, script: str) -> None:
    """Run a many-statement script as one simple query, inside the open
    transaction. Through the driver's own cursor with no parameters, so the
    script's ``%`` signs are not taken for placeholders."""
    # psycopg's connection: its cursor is a context manager.
    dbapi = cast(Any, conn.connection.dbapi_connection)
    with dbapi.cursor() as cursor:
        cursor.execute(script)


def installed_version(conn: Connection) -> int | None:
    """The version recorded in the database, or None when nothing is installed."""
    exists = conn.execute(sa.text("SELECT to_regclass(:table) IS NOT NULL"), {"table": VERSION_TABLE}).scalar_one()
    if not exists:
        return None
    return conn.execute(sa.text(f"SELECT max(version) FROM {VERSION_TABLE}")).scalar_one_or_none()


def _pgmq_present(conn: Connection) -> bool:
    return conn.execute(sa.text("SELECT to_regclass('pgmq.meta') IS NOT NULL")).scalar_one()


def install(engine: Engine, *, target: int = SCHEMA_VERSION) -> InstallResult:
    """Install PGMQ and the pgbus tables, or bring an older version up to
    *target* (this release's version unless a test asks for an older one),
    in one transaction."""
    if not 1 <= target <= SCHEMA_VERSION:
        raise ValueError(f"no schema version {target}; this release has 1 to {SCHEMA_VERSION}")
    with engine.begin() as conn:
        conn.execute(sa.text("SELECT pg_advisory_xact_lock(:key)"), {"key": INSTALL_LOCK_KEY})
        current = installed_version(conn)
        if current == target:
            return InstallResult(target, installed=False, pgmq_installed=False)
        if current is not None and not 1 <= current < target:
            raise SchemaVersionError(
                f"the database has pgbus-web schema version {current}; this release "
                f"installs version {target} and cannot change it. Nothing was changed."
            )
        pgmq_installed = False
        if current is None:
            if conn.execute(sa.text("SELECT to_regclass('pgbus_workflows') IS NOT NULL")).scalar_one():
                raise SchemaVersionError(
                    "the database already has pgbus tables that pgbus-web did not install "
                    "(no version recorded); nothing was changed."
                )
            if not _pgmq_present(conn):
                _run_script(conn, get_embedded_install_sql())
                pgmq_installed = True
            conn.execute(
                sa.text(
                    f"CREATE TABLE {VERSION_TABLE} ("
                    " version integer PRIMARY KEY,"
                    " installed_at timestamptz NOT NULL DEFAULT now())"
                )
            )
        for version in range((current or 0) + 1, target + 1):
            _run_script(conn, _sql(MIGRATIONS[version - 1]))
            conn.execute(sa.text(f"INSERT INTO {VERSION_TABLE} (version) VALUES (:v)"), {"v": version})
    return InstallResult(target, installed=True, pgmq_installed=pgmq_installed, upgraded_from=current)


# Every table install() creates, children first: what tests truncate.
TABLES = (
    "pgbus_web_policy_history",
    "pgbus_web_policy",
    "pgbus_web_sign_in_throttle",
    "pgbus_web_sign_in_generations",
    "pgbus_web_api_tokens",
    "pgbus_web_operations",
    "pgbus_workflow_events",
    "pgbus_workflow_signals",
    "pgbus_workflow_steps",
    "pgbus_workflows",
    "pgbus_batches",
    "pgbus_uniqueness_keys",
    "pgbus_blocked_executions",
)

# Tables whose rows are kept from the tables above by triggers (v3.sql's run
# counts, the needs-attention counts of the schema version that adds them):
# emptied with them, but not data of their own, so a comparison of the
# tables' rows leaves them out (their rows depend on when deltas were
# folded; their sums are what counts). pgbus_web_workers is with them for
# the same reason: each running process rewrites its own row every few
# seconds (its heartbeat), whatever a request did; and the runs' activity
# per hour (a schema version's rollup, kept by triggers like the counts),
# and the needs-attention counts (kept the same way). The sessions and the
# access log are with them too: a reading request writes them (a session's
# last sight, a token's first use from an address), whatever it did.
DERIVED_TABLES = (
    "pgbus_web_access_log",
    "pgbus_web_sessions",
    "pgbus_workflow_count_deltas",
    "pgbus_workflow_counts",
    "pgbus_web_workers",
    "pgbus_workflow_activity_deltas",
    "pgbus_workflow_activity",
    "pgbus_workflow_attention_deltas",
    "pgbus_workflow_attention_counts",
    "pgbus_workflow_step_duration_deltas",
    "pgbus_workflow_step_durations",
    "pgbus_workflow_hour_counts",
)
