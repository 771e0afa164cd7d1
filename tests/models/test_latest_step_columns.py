"""The latest_* columns of pgbus_workflows: the steps trigger keeps them equal
to each run's latest step row through everything the runtime does, and
through SQL written by hand; the stuck queries read them and not the steps."""

from __future__ import annotations

import re
from datetime import timedelta

import sqlalchemy as sa
from support.latest_steps import LATEST, add_run, add_step, assert_columns_match, row_versions, run_columns, sql
from support.runtime_support import T0, Driver

from pgbus_web import defaults
from pgbus_web.demo import workflows as demo
from pgbus_web.models import workflow_attention, workflow_index, workflow_rows
from pgbus_web.rules import states
from pgbus_web.runtime import verbs


def test_the_runtime_transitions_keep_them_equal_to_the_latest_step(engine, driver: Driver):
    # fail + retry, then paused after the last attempt failed
    paused = driver.start(demo.ORDER, {"order_id": 1, "fail_capture": True, "vendors": 2})
    driver.drain()
    latest = assert_columns_match(engine)[paused]
    assert (latest["step_name"], latest["step_status"]) == ("capture_payment", states.STEP_SCHEDULED)
    driver.later(seconds=10)
    driver.drain()
    driver.later(seconds=20)
    driver.drain()
    assert driver.status(paused) == states.PAUSED
    latest = assert_columns_match(engine)[paused]
    assert (latest["step_name"], latest["step_status"], latest["error_class"]) == (
        "capture_payment",
        states.STEP_FAILED,
        "TimeoutError",
    )

    # a signal wait, then a pause, a signal and a resume
    waiting = driver.waiting_for_shipment()
    latest = assert_columns_match(engine)[waiting]
    assert (latest["step_name"], latest["step_status"]) == ("await_shipment", states.STEP_WAITING)
    assert latest["waiting_since"] is not None
    verbs.pause(engine, waiting, now=driver.now)
    verbs.signal(engine, waiting, demo.SHIPMENT_SIGNAL, {"tracking": "T1"}, now=driver.now)
    assert_columns_match(engine)
    verbs.resume(engine, waiting, registry=demo.REGISTRY, now=driver.now)
    assert_columns_match(engine)
    driver.drain()
    assert_columns_match(engine)

    # a skip of a timer step, then a cancel of a run waiting on its signal
    timer = driver.ready_with_timer()
    assert assert_columns_match(engine)[timer]["scheduled_at"] > driver.now
    verbs.skip(engine, timer, registry=demo.REGISTRY, now=driver.now)
    latest = assert_columns_match(engine)[timer]
    assert latest["step_name"] != "send_tips"
    verbs.cancel(engine, timer, now=driver.now)
    latest = assert_columns_match(engine)[timer]
    assert latest["step_status"] == states.STEP_CANCELLED

    # the retry of the paused run, through to the end
    verbs.resume(engine, paused, registry=demo.REGISTRY, now=driver.now)
    assert_columns_match(engine)
    driver.drain()
    latest = assert_columns_match(engine)

    completed = driver.completed()
    latest = assert_columns_match(engine)
    assert latest[completed]["step_status"] == states.STEP_COMPLETED
    assert all(values["step_id"] is not None for values in latest.values())


def test_a_step_written_by_hand_keeps_them_right(engine, new_id):
    workflow_id, other = new_id(), new_id()
    with engine.begin() as conn:
        for run in (workflow_id, other):
            workflow_rows.insert_run(conn, {"workflow_id": run, "workflow_class": "Hand", "status": "ready"})
    assert run_columns(engine)[workflow_id] == (None,) * 7

    with engine.begin() as conn:
        first = conn.execute(
            sa.text(
                "INSERT INTO pgbus_workflow_steps (workflow_id, step_name, status, scheduled_at) "
                "VALUES (:w, 'one', 'scheduled', now()) RETURNING id"
            ),
            {"w": workflow_id},
        ).scalar_one()
        second = conn.execute(
            sa.text(
                "INSERT INTO pgbus_workflow_steps (workflow_id, step_name, status, waiting_since, timeout_at) "
                "VALUES (:w, 'two', 'waiting', now(), now() + interval '1 hour') RETURNING id"
            ),
            {"w": workflow_id},
        ).scalar_one()
    columns = assert_columns_match(engine)
    assert (columns[workflow_id]["step_id"], columns[workflow_id]["step_name"]) == (second, "two")
    assert columns[other]["step_id"] is None

    # An older attempt changing leaves the run alone; the latest one changing shows.
    with engine.begin() as conn:
        conn.execute(
            sa.text("UPDATE pgbus_workflow_steps SET status = 'failed', error_class = 'Old' WHERE id = :id"),
            {"id": first},
        )
    assert run_columns(engine)[workflow_id][:4] == (second, "two", "waiting", None)
    with engine.begin() as conn:
        conn.execute(
            sa.text(
                "UPDATE pgbus_workflow_steps SET status = 'failed', error_class = 'Boom', timeout_at = NULL "
                "WHERE id = :id"
            ),
            {"id": second},
        )
    columns = assert_columns_match(engine)
    assert columns[workflow_id]["step_status"] == "failed"
    assert columns[workflow_id]["error_class"] == "Boom"
    assert columns[workflow_id]["timeout_at"] is None

    # A row inserted with a lower id than the latest is not the latest.
    with engine.begin() as conn:
        conn.execute(
            sa.text(
                "INSERT INTO pgbus_workflow_steps (id, workflow_id, step_name, status) "
                "VALUES (:id, :w, 'zero', 'completed')"
            ),
            {"id": first - 1000, "w": workflow_id},
        )
    assert assert_columns_match(engine)[workflow_id]["step_id"] == second


def test_the_stuck_queries_read_no_step_rows(engine, driver: Driver):
    driver.paused_on_capture()
    seen: list[tuple[str, dict]] = []

    def before(conn, cursor, statement, parameters, context, executemany):
        seen.append((statement, parameters))

    stuck = {"threshold": defaults.STALL_THRESHOLD, "waiting_threshold": timedelta(days=1)}
    sa.event.listen(engine, "before_cursor_execute", before)
    try:
        with engine.connect() as conn:
            counts = workflow_attention.stuck_reason_counts(conn, **stuck)
            (group,) = workflow_attention.attention_groups(conn, **stuck)
            ids = workflow_attention.attention_ids(conn, group, **stuck)
    finally:
        sa.event.remove(engine, "before_cursor_execute", before)
    assert counts == {(demo.ORDER, states.PAUSED_ERROR): 1}
    assert group["error_message"] and len(ids) == 1

    # The three calls' statements (the pool's ping aside).
    statements = [(s, p) for s, p in seen if "FROM pgbus_workflows" in s]
    assert len(statements) == 3
    with engine.connect() as conn:
        cursor = conn.connection.dbapi_connection.cursor()
        for statement, parameters in statements:
            cursor.execute("EXPLAIN " + statement, parameters)
            plan = "\n".join(line for (line,) in cursor.fetchall())
            if "error_message" in statement:
                # attention_groups reads each group's newest message, once per group
                assert len(re.findall(r" on pgbus_workflow_steps\b", plan)) == 1, plan
            else:
                assert "pgbus_workflow_steps" not in plan, plan


def test_a_groups_message_is_its_newest_runs_ties_to_the_higher_id_and_no_since_as_oldest(engine, new_id):
    paused_at = T0 - timedelta(hours=1)

    def paused_run(workflow_class, at, message):
        workflow_id = new_id()
        with engine.begin() as conn:
            workflow_rows.insert_run(
                conn,
                {"workflow_id": workflow_id, "workflow_class": workflow_class, "status": "paused", "paused_at": at},
            )
            conn.execute(
                sa.text(
                    "INSERT INTO pgbus_workflow_steps (workflow_id, step_name, status, error_class, error_message) "
                    "VALUES (:w, 'charge', 'failed', 'Boom', :m)"
                ),
                {"w": workflow_id, "m": message},
            )

    paused_run("Tie", paused_at, "first")
    paused_run("Tie", paused_at, "second, same moment")
    paused_run("Unknown", paused_at, "has a moment")
    paused_run("Unknown", None, "no moment, written later")
    with engine.connect() as conn:
        groups = workflow_attention.attention_groups(conn, threshold=defaults.STALL_THRESHOLD, now=T0)
    messages = {group["workflow_class"]: group["error_message"] for group in groups}
    assert messages == {"Tie": "second, same moment", "Unknown": "has a moment"}


# --- Every write to the steps, deletes and moves included (schema/v2.sql) ------

STUCK = {"threshold": timedelta(minutes=10), "now": T0}


def reasons(engine) -> dict[tuple[str, str], int]:
    with engine.connect() as conn:
        return workflow_attention.stuck_reason_counts(conn, **STUCK)


def test_deleting_the_latest_step_falls_back_to_the_one_before_then_to_none(engine, new_id):
    run = add_run(engine, new_id())
    first = add_step(engine, run, "charge", "failed", error_class="Boom")
    stalled = add_step(engine, run, "charge", "failed", error_class=states.STEP_STALLED_ERROR)
    assert assert_columns_match(engine)[run]["step_id"] == stalled
    assert reasons(engine) == {("Hand", states.STALLED): 1}

    sql(engine, "DELETE FROM pgbus_workflow_steps WHERE id = :id", id=stalled)
    latest = assert_columns_match(engine)[run]
    assert (latest["step_id"], latest["error_class"]) == (first, "Boom")
    assert reasons(engine) == {("Hand", states.PAUSED_ERROR): 1}

    sql(engine, "DELETE FROM pgbus_workflow_steps WHERE id = :id", id=first)
    assert assert_columns_match(engine)[run] == dict.fromkeys(LATEST)
    assert reasons(engine) == {("Hand", states.PAUSED_MANUAL): 1}


def test_a_ready_run_whose_overdue_step_is_deleted_is_no_longer_overdue(engine, new_id):
    run = add_run(engine, new_id(), status="ready", paused_at=None)
    step = add_step(engine, run, "send", "scheduled", scheduled_at=T0 - timedelta(hours=1))
    assert reasons(engine) == {("Hand", states.OVERDUE): 1}
    sql(engine, "DELETE FROM pgbus_workflow_steps WHERE id = :id", id=step)
    assert_columns_match(engine)
    assert reasons(engine) == {}


def test_deleting_an_older_step_leaves_the_run_row_unwritten(engine, new_id):
    run = add_run(engine, new_id())
    older = add_step(engine, run, "one", "completed")
    add_step(engine, run, "two", "failed", error_class="Boom")
    before = row_versions(engine)
    sql(engine, "DELETE FROM pgbus_workflow_steps WHERE id = :id", id=older)
    assert row_versions(engine) == before
    assert_columns_match(engine)


def test_moving_a_latest_step_to_another_run_where_it_is_or_is_not_the_latest(engine, new_id):
    source, behind, ahead = (add_run(engine, new_id()) for _ in range(3))
    behind_step = add_step(engine, behind, "old", "completed")
    kept = add_step(engine, source, "one", "completed")
    moved = add_step(engine, source, "two", "failed", error_class=states.STEP_STALLED_ERROR)
    add_step(engine, ahead, "three", "completed")  # a higher id than moved
    again = add_step(engine, source, "four", "failed", error_class="Boom")

    # moved is not source's latest: source keeps its latest, behind gets moved.
    sql(engine, "UPDATE pgbus_workflow_steps SET workflow_id = :w WHERE id = :id", w=behind, id=moved)
    columns = assert_columns_match(engine)
    assert (columns[source]["step_id"], columns[behind]["step_id"]) == (again, moved)

    # source's latest goes to ahead, where a higher id is the latest.
    sql(engine, "UPDATE pgbus_workflow_steps SET workflow_id = :w WHERE id = :id", w=ahead, id=again)
    columns = assert_columns_match(engine)
    assert columns[source]["step_id"] == kept
    assert columns[ahead]["step_id"] == again

    # Every step of behind to source in one statement: behind has none left.
    sql(
        engine,
        "UPDATE pgbus_workflow_steps SET workflow_id = :w WHERE workflow_id = :from",
        w=source,
        **{"from": behind},
    )
    columns = assert_columns_match(engine)
    assert columns[behind] == dict.fromkeys(LATEST)
    assert columns[source]["step_id"] == moved
    assert behind_step < moved


def test_changing_a_step_id_moves_the_latest(engine, new_id):
    run = add_run(engine, new_id())
    low = add_step(engine, run, "one", "completed")
    high = add_step(engine, run, "two", "failed", error_class="Boom")
    sql(engine, "UPDATE pgbus_workflow_steps SET id = :new WHERE id = :id", new=low - 100, id=high)
    assert assert_columns_match(engine)[run]["step_id"] == low
    sql(engine, "UPDATE pgbus_workflow_steps SET id = :new WHERE id = :id", new=high + 100, id=low - 100)
    assert assert_columns_match(engine)[run]["step_id"] == high + 100


def test_a_many_row_delete_and_a_run_delete(engine, new_id):
    runs = [add_run(engine, new_id()) for _ in range(4)]
    for n, run in enumerate(runs):
        for attempt in range(n + 1):
            add_step(engine, run, f"step{attempt}", "failed", error_class=f"E{attempt}")
    # The two highest ids of every run, in one statement.
    sql(
        engine,
        """
        DELETE FROM pgbus_workflow_steps WHERE id IN (
            SELECT id FROM (SELECT id, row_number() OVER (PARTITION BY workflow_id ORDER BY id DESC) AS n
                            FROM pgbus_workflow_steps) ranked WHERE n <= 2)
    """,
    )
    columns = assert_columns_match(engine)
    assert [columns[run]["step_name"] for run in runs] == [None, None, "step0", "step1"]
    sql(engine, "DELETE FROM pgbus_workflows WHERE workflow_id = :w", w=runs[3])
    assert set(assert_columns_match(engine)) == set(runs[:3])


def test_truncating_the_steps_leaves_every_run_without_a_step(engine, new_id):
    runs = [add_run(engine, new_id()) for _ in range(2)]
    for run in runs:
        add_step(engine, run, "charge", "failed", error_class="Boom")
    sql(engine, "TRUNCATE pgbus_workflow_steps")
    assert assert_columns_match(engine) == {run: dict.fromkeys(LATEST) for run in runs}
    assert reasons(engine) == {("Hand", states.PAUSED_MANUAL): 2}


def test_a_run_row_inserted_with_latest_values_of_its_own_gets_its_true_ones(engine, new_id):
    run = add_run(engine, new_id())
    add_step(engine, run, "charge", "failed", error_class=states.STEP_STALLED_ERROR)
    # Put back from a copy: the copy carries the old latest_* values, the steps went with the run.
    with engine.begin() as conn:
        conn.execute(
            sa.text(
                "CREATE TEMPORARY TABLE saved ON COMMIT DROP AS SELECT * FROM pgbus_workflows WHERE workflow_id = :w"
            ),
            {"w": run},
        )
        conn.execute(sa.text("DELETE FROM pgbus_workflows WHERE workflow_id = :w"), {"w": run})
        conn.execute(sa.text("INSERT INTO pgbus_workflows SELECT * FROM saved"))
        conn.execute(
            sa.text(
                "INSERT INTO pgbus_workflows (workflow_id, workflow_class, status, latest_step_id, "
                "latest_step_status, latest_error_class) VALUES (:w, 'Hand', 'paused', 99, 'failed', 'Boom')"
            ),
            {"w": new_id()},
        )
    columns = assert_columns_match(engine)
    assert list(columns.values()) == [dict.fromkeys(LATEST)] * 2
    assert reasons(engine) == {("Hand", states.PAUSED_MANUAL): 2}


def test_an_update_that_changes_no_fact_the_run_carries_leaves_the_run_row_unwritten(engine, new_id):
    run = add_run(engine, new_id(), status="running", paused_at=None)
    step = add_step(engine, run, "charge", "in_progress")
    before = row_versions(engine)
    sql(
        engine,
        "UPDATE pgbus_workflow_steps SET started_at = now(), result = '{}', status = 'in_progress' WHERE id = :id",
        id=step,
    )
    assert row_versions(engine) == before
    # control: a changed fact does write it
    sql(engine, "UPDATE pgbus_workflow_steps SET status = 'completed' WHERE id = :id", id=step)
    assert row_versions(engine) != before
    assert assert_columns_match(engine)[run]["step_status"] == "completed"


def _plan_nodes(node: dict):
    yield node
    for child in node.get("Plans", ()):
        yield from _plan_nodes(child)


def test_a_page_looks_up_the_latest_step_of_the_runs_it_shows_only(engine):
    """The index's page finds its runs from the run rows, then looks up the
    latest step of the rows it shows, whatever plan finds them: a plan that
    reads the matching runs in another order than the id's (here forced:
    no index scan, so the runs are read whole and sorted) once looked up
    every matching run's latest step before the sort (10,000 lookups for
    a page of 50 at the waiting-overdue filter of a million runs)."""
    limit = 21
    now = T0
    with engine.begin() as conn:
        conn.execute(
            sa.text(
                "INSERT INTO pgbus_workflows (workflow_id, workflow_class, status) "
                "SELECT 'page-' || n, 'Hand', 'waiting' FROM generate_series(1, 300) n"
            )
        )
        conn.execute(
            sa.text(
                "INSERT INTO pgbus_workflow_steps (workflow_id, step_name, status, waiting_since) "
                "SELECT 'page-' || n, 'wait', 'waiting', CAST(:since AS timestamptz) - n * interval '1 minute' "
                "FROM generate_series(1, 300) n"
            ),
            {"since": now - timedelta(days=3)},
        )
    seen: list[tuple[str, dict]] = []

    def before(conn, cursor, statement, parameters, context, executemany):
        seen.append((statement, parameters))

    stuck = {"threshold": defaults.STALL_THRESHOLD, "waiting_threshold": timedelta(days=1), "now": now}
    sa.event.listen(engine, "before_cursor_execute", before)
    try:
        with engine.connect() as conn:
            rows = workflow_index.page(conn, limit=limit, reason=states.WAITING_OVERDUE, fragments=False, **stuck)
    finally:
        sa.event.remove(engine, "before_cursor_execute", before)
    assert len(rows) == limit
    assert [row["id"] for row in rows] == sorted((row["id"] for row in rows), reverse=True)
    assert all(row["step"]["step_name"] == "wait" and row["step"]["status"] == "waiting" for row in rows)
    ((statement, parameters),) = [(s, p) for s, p in seen if "FROM pgbus_workflows" in s]
    for forced in ((), ("enable_indexscan", "enable_indexonlyscan")):
        with engine.begin() as conn:
            for setting in forced:
                conn.exec_driver_sql(f"SET LOCAL {setting} = off")
            cursor = conn.connection.dbapi_connection.cursor()
            cursor.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + statement, parameters)
            (plan,) = cursor.fetchone()
        nodes = list(_plan_nodes(plan[0]["Plan"]))
        steps = [n for n in nodes if n.get("Relation Name") == "pgbus_workflow_steps"]
        runs = [n for n in nodes if n.get("Relation Name") == "pgbus_workflows"]
        assert steps and runs, nodes
        assert all(n["Actual Loops"] <= limit for n in steps), [(n["Node Type"], n["Actual Loops"]) for n in steps]
        if forced:
            # The control: this plan did read every matching run, more than it shows.
            assert max(n["Actual Rows"] * n["Actual Loops"] for n in runs) >= 300, runs
