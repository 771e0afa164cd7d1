"""The seeder into empty tables (demo/empty_load.py): one transaction,
indexes built after the rows. It must leave the very indexes and
constraints `db install` makes, write the same rows as chunk by chunk, and
leave the database as it was when it fails; tables with rows are written
chunk by chunk."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import psycopg
import pytest
import sqlalchemy as sa
from click.testing import CliRunner

from pgbus_web import db, schema
from pgbus_web.demo import empty_load
from pgbus_web.demo import seed as seeding
from pgbus_web.launch import main_group
from pgbus_web.models import changes, recount, workflow_counts

NOW = datetime(2026, 3, 10, 12, 0, tzinfo=UTC)
SEQUENCES = (
    "pgbus_workflows_id_seq",
    "pgbus_batches_id_seq",
    "pgbus_workflow_steps_id_seq",
    "pgbus_workflow_signals_id_seq",
    "pgbus_workflow_events_id_seq",
)


def catalog(engine) -> dict[str, list[tuple]]:
    """The seeded tables' indexes and constraints, as the catalog defines them."""
    with engine.connect() as conn:
        binds = {"tables": list(empty_load.TABLES)}
        return {
            "indexes": sorted(
                tuple(row)
                for row in conn.execute(
                    sa.text("""
                SELECT c.relname, pg_get_indexdef(i.indexrelid), i.indisvalid, i.indisready, i.indisunique,
                       i.indisprimary, obj_description(i.indexrelid, 'pg_class')
                FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
                WHERE i.indrelid = ANY(CAST(:tables AS regclass[]))
            """),
                    binds,
                )
            ),
            "constraints": sorted(
                tuple(row)
                for row in conn.execute(
                    sa.text("""
                SELECT conrelid::regclass::text, conname, contype, pg_get_constraintdef(oid), convalidated,
                       conindid::regclass::text
                FROM pg_constraint WHERE conrelid = ANY(CAST(:tables AS regclass[]))
            """),
                    binds,
                )
            ),
        }


def table_rows(engine) -> dict[str, list[tuple]]:
    with engine.connect() as conn:
        found = {
            table: [tuple(row) for row in conn.execute(sa.text(f"SELECT * FROM {table} ORDER BY id"))]
            for table in empty_load.TABLES
        }
        found["sequences"] = [
            tuple(conn.execute(sa.text(f"SELECT last_value, is_called FROM {sequence}")).one())
            for sequence in SEQUENCES
        ]
        found["counts"] = sorted(workflow_counts.status_counts(conn).items())
        # The rollups, summed with their deltas (both ways fill them).
        found["activity"] = [
            tuple(row)
            for row in conn.execute(
                sa.text(
                    "SELECT workflow_class, hour, sum(started), sum(completed), sum(failed) FROM"
                    " (SELECT workflow_class, hour, started, completed, failed FROM pgbus_workflow_activity"
                    "  UNION ALL SELECT workflow_class, hour, started, completed, failed"
                    "  FROM pgbus_workflow_activity_deltas) AS a GROUP BY 1, 2 ORDER BY 1, 2"
                )
            )
        ]
        found["step_durations"] = [
            tuple(row)
            for row in conn.execute(
                sa.text(
                    "SELECT workflow_class, step_name, day, bucket, sum(attempts) FROM"
                    " (SELECT workflow_class, step_name, day, bucket, attempts FROM pgbus_workflow_step_durations"
                    "  UNION ALL SELECT workflow_class, step_name, day, bucket, attempts"
                    "  FROM pgbus_workflow_step_duration_deltas) AS d GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4"
                )
            )
        ]
    return found


def reset(engine) -> None:
    """Empty the tables and restart their ids, as the engine fixture does."""
    with engine.begin() as conn:
        conn.execute(sa.text(f"TRUNCATE {', '.join(schema.TABLES + schema.DERIVED_TABLES)} RESTART IDENTITY CASCADE"))


@pytest.fixture
def installed_url(engine):
    """A database of its own on the test server, installed by `db install`."""
    # A name of its own: other test processes may share the server.
    name = f"pgbus_seed_installed_{uuid.uuid4().hex[:8]}"
    admin = sa.create_engine(engine.url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    url = engine.url.set(database=name).render_as_string(hide_password=False)
    result = CliRunner().invoke(main_group, ["db", "install", "--database-url", url])
    assert result.exit_code == 0, result.output
    yield url
    with admin.connect() as conn:
        conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    admin.dispose()


def test_seeding_empty_tables_leaves_the_indexes_and_constraints_db_install_makes(engine, installed_url):
    installed_engine = db.create_engine(installed_url)
    try:
        installed = catalog(installed_engine)
    finally:
        installed_engine.dispose()
    result = seeding.seed(engine, runs=200, seed=11, now=NOW)
    # Every index but the runs' workflow_id key (the foreign keys point at
    # it) was dropped and built again.
    assert result.indexes_rebuilt == len(installed["indexes"]) - 1
    after = catalog(engine)
    assert after == installed
    names = {row[0] for row in after["indexes"]}
    assert {
        "pgbus_workflow_events_run",
        "pgbus_workflow_events_pkey",
        "pgbus_workflows_attention_moments",
        "pgbus_batches_batch_id_key",
    } <= names
    assert all(valid and ready for _, _, valid, ready, *_ in after["indexes"])


def test_both_ways_write_the_same_rows(engine, database_url):
    chunked = seeding.seed(engine, runs=150, seed=5, now=NOW, chunk_size=40, into_empty=False)
    assert chunked.indexes_rebuilt == 0
    first = table_rows(engine)
    reset(engine)
    fast = seeding.seed(engine, runs=150, seed=5, now=NOW, chunk_size=40)
    assert fast.indexes_rebuilt > 0
    assert fast == seeding.SeedResult(
        **{**vars(chunked), "indexes_rebuilt": fast.indexes_rebuilt, "seconds": fast.seconds}
    )
    second = table_rows(engine)
    assert len(second["pgbus_workflows"]) == 150 and len(second["pgbus_workflow_events"]) == fast.events
    assert second["activity"] and second["step_durations"]  # the control: there are rollups to compare
    assert second == first
    with engine.connect() as conn:
        assert changes.marker(conn) > 0
    check = CliRunner().invoke(main_group, ["db", "check", "--database-url", database_url])
    assert check.exit_code == 0, check.output
    assert "All 150 runs agree with their latest step." in check.output
    assert "The run counts agree with the runs." in check.output
    assert "The needs-attention counts agree with the runs." in check.output


def test_a_seed_into_tables_with_runs_writes_chunk_by_chunk(engine):
    assert seeding.seed(engine, runs=30, seed=1, now=NOW).indexes_rebuilt > 0
    before = catalog(engine)
    again = seeding.seed(engine, runs=30, seed=1, now=NOW)
    assert again.indexes_rebuilt == 0
    assert catalog(engine) == before
    with engine.connect() as conn:
        assert workflow_counts.count_runs(conn) == 60
        assert workflow_counts.status_counts(conn) == recount.status_counts(conn)


def test_one_table_with_a_row_is_enough_to_write_chunk_by_chunk(engine):
    with engine.begin() as conn:
        conn.execute(
            sa.text("INSERT INTO pgbus_batches (batch_id, total_jobs, status) VALUES ('kept-batch', 1, 'processing')")
        )
    result = seeding.seed(engine, runs=20, seed=2, now=NOW)
    assert result.indexes_rebuilt == 0
    with engine.connect() as conn:
        assert (
            conn.execute(sa.text("SELECT count(*) FROM pgbus_batches WHERE batch_id = 'kept-batch'")).scalar_one() == 1
        )
        assert workflow_counts.count_runs(conn) == 20


def test_a_failure_halfway_leaves_the_database_as_it_was(engine):
    before = catalog(engine)
    # A real failure after some chunks are written: the runs' id sequence
    # runs out at the 31st run.
    with engine.begin() as conn:
        conn.execute(sa.text("ALTER SEQUENCE pgbus_workflows_id_seq MAXVALUE 30"))
    try:
        with pytest.raises(psycopg.errors.SequenceGeneratorLimitExceeded):
            seeding.seed(engine, runs=100, seed=3, now=NOW, chunk_size=10)
        with engine.connect() as conn:
            # Three chunks went in before the fourth failed...
            assert conn.execute(sa.text("SELECT last_value FROM pgbus_workflows_id_seq")).scalar_one() == 30
            # ...and all of it was rolled back, the dropped indexes with it.
            for table in empty_load.TABLES:
                assert conn.execute(sa.text(f"SELECT count(*) FROM {table}")).scalar_one() == 0, table
            assert conn.execute(sa.text("SELECT is_called FROM pgbus_workflow_steps_id_seq")).scalar_one() is False
        assert catalog(engine) == before
    finally:
        with engine.begin() as conn:
            conn.execute(sa.text("ALTER SEQUENCE pgbus_workflows_id_seq NO MAXVALUE"))
