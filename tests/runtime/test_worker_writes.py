"""What one worker step costs the database (docs/performance.md, the
worker): its statements, the run row versions it writes, and the
latest_* trigger that the worker's own run UPDATE stands in for, with
every guarantee kept (the rows, the events, their order)."""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from sqlalchemy import event
from support.latest_steps import add_run, add_step, assert_columns_match, run_columns, sql
from support.runtime_support import T0

from pgbus_web import db, schema
from pgbus_web.models import events, steps, workflow_rows
from pgbus_web.runtime import system
from pgbus_web.runtime.definitions import Registry, Step, Workflow
from pgbus_web.runtime.worker import Worker

REGISTRY = Registry([Workflow("Noop", [Step(f"s{n}", lambda ctx: None) for n in range(4)])])


@pytest.fixture
def counted(engine):
    """(an engine of its own, the list of its transactions as
    {"statements": n, "run_versions": n, "step_versions": n, "events": n}), counted as they commit."""
    own = db.create_engine(engine.url.render_as_string(hide_password=False), pool_pre_ping=False)
    transactions: list[dict[str, int]] = []
    current = {"statements": 0}

    @event.listens_for(own, "before_cursor_execute")
    def count(*_args):  # noqa: ANN002
        current["statements"] += 1

    def tally(conn) -> dict[str, tuple[int, int]]:  # noqa: ANN001
        with conn.connection.dbapi_connection.cursor() as cursor:
            cursor.execute(
                "SELECT relname, n_tup_upd, n_tup_ins FROM pg_stat_xact_user_tables "
                "WHERE relname IN ('pgbus_workflows', 'pgbus_workflow_steps', 'pgbus_workflow_events')"
            )
            return {name: (upd, ins) for name, upd, ins in cursor.fetchall()}

    @event.listens_for(own, "begin")
    def at_begin(conn):  # noqa: ANN001
        current["at_begin"] = tally(conn)

    @event.listens_for(own, "commit")
    def before_commit(conn):  # noqa: ANN001
        # This transaction's own row counts, trigger writes included.
        now, then = tally(conn), current.pop("at_begin")

        def grown(table, column):
            return now.get(table, (0, 0))[column] - then.get(table, (0, 0))[column]

        transactions.append(
            {
                "statements": current["statements"],
                "run_versions": grown("pgbus_workflows", 0),
                "step_versions": grown("pgbus_workflow_steps", 0),
                "events": grown("pgbus_workflow_events", 1),
            }
        )
        current["statements"] = 0

    yield own, transactions
    own.dispose()


def trail(engine, workflow_id):
    with engine.connect() as conn:
        return [(e["event"], e["step_name"], e["attempt"]) for e in events.for_run(conn, workflow_id)]


def test_a_chained_no_op_step_is_five_statements_one_run_and_one_step_row_version(engine, counted):
    own, transactions = counted
    run = system.start(engine, "Noop", registry=REGISTRY, now=T0)["workflow_id"]
    assert Worker(own, REGISTRY).drain(now=T0).steps == 4

    # The claim and start of s0, then s0..s2 each completed with the next
    # step scheduled and started in the same transaction, then s3 completed.
    writing = [t for t in transactions if t["events"]]
    assert [t["events"] for t in writing] == [1, 3, 3, 3, 2]
    chained = writing[1:4]
    # Lock the run; complete the step; insert the next one started; the
    # run's one UPDATE; the three events' one INSERT.
    assert all(t["statements"] <= 5 for t in chained), chained
    assert all(t["step_versions"] == 1 for t in chained), chained
    assert all(t["run_versions"] == 1 for t in writing), writing
    assert trail(engine, run) == [
        ("started", None, None),
        ("step_scheduled", "s0", 1),
        ("step_started", "s0", 1),
        ("step_completed", "s0", 1),
        ("step_scheduled", "s1", 1),
        ("step_started", "s1", 1),
        ("step_completed", "s1", 1),
        ("step_scheduled", "s2", 1),
        ("step_started", "s2", 1),
        ("step_completed", "s2", 1),
        ("step_scheduled", "s3", 1),
        ("step_started", "s3", 1),
        ("step_completed", "s3", 1),
        ("finished", None, None),
    ]
    assert_columns_match(engine)
    with engine.connect() as conn:
        assert workflow_rows.find(conn, run)["status"] == "completed"


def test_a_transaction_that_sets_latest_itself_skips_the_trigger_and_no_other_does(engine, new_id):
    run = add_run(engine, new_id())
    first = add_step(engine, run, "charge", "failed", error_class="Boom")
    assert run_columns(engine)[run][0] == first  # control: the trigger copies a plain write

    with engine.begin() as conn:
        workflow_rows.lock_for(conn, run, sets_latest=True)
        second = steps.insert_step(
            conn,
            workflow_id=run,
            step_name="charge",
            now=T0,
            status="scheduled",
            attempt=steps.NEXT_ATTEMPT,
            scheduled_at=T0,
        )["id"]
        # Skipped: the run still names the step before, until the writer syncs it.
        assert (
            conn.execute(
                sa.text("SELECT latest_step_id FROM pgbus_workflows WHERE workflow_id = :w"), {"w": run}
            ).scalar_one()
            == first
        )
        workflow_rows.sync_latest(conn, run)
    assert run_columns(engine)[run][0] == second
    assert_columns_match(engine)

    # The declaration ended with its transaction: the next writer has the trigger.
    third = add_step(engine, run, "charge", "failed", error_class="Again")
    assert run_columns(engine)[run][0] == third
    assert_columns_match(engine)


def test_next_attempt_counted_in_the_insert(engine, new_id):
    run = add_run(engine, new_id())
    add_step(engine, run, "charge", "failed", error_class="Boom")
    add_step(engine, run, "other", "failed", error_class="Boom")
    with engine.begin() as conn:
        row = steps.insert_step(
            conn,
            workflow_id=run,
            step_name="charge",
            now=T0,
            status="scheduled",
            attempt=steps.NEXT_ATTEMPT,
            scheduled_at=T0,
        )
        fresh = steps.insert_step(
            conn,
            workflow_id=run,
            step_name="new",
            now=T0,
            status="scheduled",
            attempt=steps.NEXT_ATTEMPT,
            scheduled_at=T0,
        )
    assert (row["attempt"], fresh["attempt"]) == (2, 1)


def test_a_version_2_database_upgrades_and_the_worker_keeps_latest_right(scratch):  # noqa: F811
    _, engine = scratch
    schema.install(engine, target=2)
    run = add_run(engine, "before")
    add_step(engine, run, "charge", "failed", error_class="Boom")
    result = schema.install(engine)
    assert (result.upgraded_from, result.version) == (2, schema.SCHEMA_VERSION)
    assert_columns_match(engine)

    started = system.start(engine, "Noop", registry=REGISTRY, now=T0)["workflow_id"]
    assert Worker(engine, REGISTRY).drain(now=T0).steps == 4
    facts = assert_columns_match(engine)
    assert (facts[started]["step_name"], facts[started]["step_status"]) == ("s3", "completed")
    # A hand-written step after the upgrade still moves its run (the trigger).
    sql(engine, "UPDATE pgbus_workflow_steps SET status = 'skipped' WHERE workflow_id = :w", w="before")
    assert assert_columns_match(engine)["before"]["step_status"] == "skipped"
