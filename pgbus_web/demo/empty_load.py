"""Loading the seeder's tables while they are empty, as pg_restore does:
in one transaction that holds them alone and truncates them (so COPY may
write the rows frozen), with their indexes dropped first and built again
at the end, each from its own definition as the database reports it
(pg_get_indexdef, pg_get_constraintdef), so none drifts from schema/*.sql.

Everything happens in the caller's one transaction: a failure or a crash
at any point rolls the drops back with the rows, so the database is never
left without its indexes. The price: the tables are locked for the whole
load, and nobody sees a run until it commits.
"""

from __future__ import annotations

from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.engine import Connection

# The tables the seeder writes, parents first (pgbus_batches has no
# foreign keys; the other three name pgbus_workflows).
TABLES = (
    "pgbus_workflows",
    "pgbus_batches",
    "pgbus_workflow_steps",
    "pgbus_workflow_signals",
    "pgbus_workflow_events",
)

# The sorts of the rebuilt indexes get this much memory at least (the
# events' (workflow_id, id) index holds about 1 GB of keys at 1M runs).
SORT_MEMORY_KB = 1024 * 1024

# The indexes dropped for the load, and the statements that drop and build
# each again, all from the catalog: every index of the tables but those a
# foreign key points at (pgbus_workflows' workflow_id, which stays and is
# written as rows go in). A primary key or unique constraint goes and comes
# back as the constraint it is, under its own name. Only indexes whose
# definition alone recreates them: valid, in the default tablespace,
# without a comment, a clustering mark, a replica identity or a statistics
# target of their own; anything else stays and is maintained row by row,
# slower but never lost.
_DROPPABLE = """
    SELECT
        CASE WHEN k.oid IS NULL THEN format('DROP INDEX %s', i.indexrelid::regclass)
             ELSE format('ALTER TABLE %s DROP CONSTRAINT %I', k.conrelid::regclass, k.conname) END,
        CASE WHEN k.oid IS NULL THEN pg_get_indexdef(i.indexrelid)
             ELSE format('ALTER TABLE %s ADD CONSTRAINT %I %s', k.conrelid::regclass, k.conname,
                         pg_get_constraintdef(k.oid)) END
    FROM pg_index i
    JOIN pg_class c ON c.oid = i.indexrelid
    LEFT JOIN pg_constraint k
      ON k.conindid = i.indexrelid AND k.conrelid = i.indrelid AND k.contype IN ('p', 'u')
    WHERE i.indrelid = ANY(CAST(:tables AS regclass[]))
      AND i.indisvalid AND NOT i.indisclustered AND NOT i.indisreplident
      AND c.reltablespace = 0
      AND obj_description(i.indexrelid, 'pg_class') IS NULL
      AND NOT EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = i.indexrelid AND a.attstattarget >= 0)
      AND NOT EXISTS (SELECT 1 FROM pg_constraint f
                      WHERE f.conindid = i.indexrelid AND f.oid IS DISTINCT FROM k.oid)
      AND (k.oid IS NULL OR (k.coninhcount = 0 AND obj_description(k.oid, 'pg_constraint') IS NULL))
    ORDER BY i.indrelid, c.relname
"""


@dataclass(frozen=True)
class Index:
    drop: str
    build: str


def any_rows(conn: Connection) -> bool:
    """Whether any of the tables holds a row (visible to this transaction)."""
    probes = " OR ".join(f"EXISTS (SELECT 1 FROM {table})" for table in TABLES)
    return conn.execute(sa.text(f"SELECT {probes}")).scalar_one()


def claim(conn: Connection) -> bool:
    """Lock the tables for this transaction and, when all are empty,
    truncate them (their rows may then be copied frozen) and say True;
    False, having changed nothing, when any holds a row."""
    conn.exec_driver_sql(f"LOCK TABLE {', '.join(TABLES)} IN ACCESS EXCLUSIVE MODE")
    if any_rows(conn):
        return False
    # Empty already: only their files are new. Its triggers do not fire
    # under the caller's session_replication_role = replica.
    conn.exec_driver_sql(f"TRUNCATE {', '.join(TABLES)}")
    return True


def drop_indexes(conn: Connection) -> list[Index]:
    """Drop the droppable indexes of the tables; return what builds them again."""
    indexes = [Index(drop, build) for drop, build in conn.execute(sa.text(_DROPPABLE), {"tables": list(TABLES)}).all()]
    for index in indexes:
        conn.exec_driver_sql(index.drop)
    return indexes


def build_indexes(conn: Connection, indexes: list[Index]) -> None:
    """Build the dropped indexes again, each in one sort of the loaded rows
    (with the server's parallel maintenance workers where it allows)."""
    memory = conn.execute(
        sa.text("SELECT setting::bigint FROM pg_settings WHERE name = 'maintenance_work_mem'")
    ).scalar_one()
    if memory < SORT_MEMORY_KB:
        conn.execute(sa.text("SELECT set_config('maintenance_work_mem', :kb, true)"), {"kb": f"{SORT_MEMORY_KB}kB"})
    for index in indexes:
        conn.exec_driver_sql(index.build)


class HeldIds:
    """Ids of a table this transaction holds alone (claim()): counted here
    from its sequence's next value, without reserving blocks from another
    connection (which would wait for the lock), and the sequence set past
    the last one taken at the end. The same ids as seed._Ids would give."""

    def __init__(self, conn: Connection, table: str):
        self.sequence = conn.execute(
            sa.text("SELECT pg_get_serial_sequence(:table, 'id')"), {"table": table}
        ).scalar_one()
        # The sequence's name is the catalog's own.
        last, called = conn.execute(sa.text(f"SELECT last_value, is_called FROM {self.sequence}")).one()
        self.next = last + 1 if called else last
        self.last_taken: int | None = None

    def take(self) -> int:
        taken = self.next
        self.next += 1
        self.last_taken = taken
        return taken

    def finish(self, conn: Connection) -> None:
        if self.last_taken is not None:
            conn.execute(sa.text("SELECT setval(:seq, :v)"), {"seq": self.sequence, "v": self.last_taken})
