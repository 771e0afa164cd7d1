"""Every statement an operation sends over the runs (the preview's count
and sample, each chunk's walk) reads one window of ids at most, however
thin a slice of the table the filter matches: measured by EXPLAIN
(ANALYZE, BUFFERS) of exactly the statements sent, on a table where the
matching runs are a few percent bunched at one end of the ids (the failed
runs of the last hour among many). Control: the same statements as one
window spanning the table (the walks before they were bounded) read
nearly all of it."""

from __future__ import annotations

import json

import pytest
import sqlalchemy as sa

from pgbus_web import defaults
from pgbus_web.demo.workflows import REGISTRY
from pgbus_web.rules import run_filters as filters
from pgbus_web.runtime import operation_policy, operation_preview, operation_runner

THRESHOLDS = {"threshold": defaults.STALL_THRESHOLD, "waiting_threshold": defaults.WAITING_THRESHOLD}
EARLY, BULK, LATE = 2_000, 90_000, 8_000
WINDOW = 5_000
WHOLE = 10**12


pytestmark = pytest.mark.scale


@pytest.fixture
def thin_slice(engine):
    """EARLY paused RefundWorkflow runs at the low ids, BULK completed,
    LATE failed OrderWorkflow runs at the high ids; analyzed."""
    with engine.begin() as conn:
        conn.exec_driver_sql("SET LOCAL statement_timeout = 0")  # seeding, on a busy machine
        for prefix, count, klass, status, step in (
            ("early", EARLY, "RefundWorkflow", "paused", "refund"),
            ("bulk", BULK, "OrderWorkflow", "completed", "send_receipt"),
            ("late", LATE, "OrderWorkflow", "failed", "capture_payment"),
        ):
            for first in range(1, count + 1, 10_000):  # each statement well within the client's wait
                conn.execute(
                    sa.text(
                        "INSERT INTO pgbus_workflows (workflow_id, workflow_class, status, current_step, paused_at,"
                        " finished_at, created_at, updated_at)"
                        " SELECT :prefix || '-' || g, :klass, :status, :step,"
                        " CASE WHEN :status = 'paused' THEN now() END, CASE WHEN :status <> 'paused' THEN now() END,"
                        " now(), now() FROM generate_series(CAST(:first AS int), CAST(:last AS int)) g"
                    ),
                    {
                        "prefix": prefix,
                        "first": first,
                        "last": min(first + 9_999, count),
                        "klass": klass,
                        "status": status,
                        "step": step,
                    },
                )
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.exec_driver_sql("ANALYZE pgbus_workflows")
    return engine


def _rows_read(node: dict) -> float:
    """Entries the scans of pgbus_workflows in a plan read: rows out plus
    rows their filters removed, times loops."""
    here = 0.0
    if node.get("Relation Name") == "pgbus_workflows" and "Scan" in node["Node Type"]:
        here = (
            node.get("Actual Rows", 0)
            + node.get("Rows Removed by Filter", 0)
            + node.get("Rows Removed by Index Recheck", 0)
        ) * node.get("Actual Loops", 1)
    return here + sum(_rows_read(child) for child in node.get("Plans", []))


def reads(engine, call) -> list[tuple[float, str]]:
    """(rows read, statement) of each read-only statement over the runs
    *call* sends, run again as EXPLAIN (ANALYZE, BUFFERS)."""
    sent = []

    def grab(conn, cursor, statement, parameters, context, executemany):
        text = statement.lstrip().upper()
        if "PGBUS_WORKFLOWS W" in text and text.startswith(("SELECT", "WITH")) and "FOR UPDATE" not in text:
            sent.append((statement, parameters))

    sa.event.listen(engine, "before_cursor_execute", grab)
    try:
        call()
    finally:
        sa.event.remove(engine, "before_cursor_execute", grab)
    found = []
    with engine.connect() as conn:
        cursor = conn.connection.driver_connection.cursor()
        for statement, parameters in sent:
            cursor.execute("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + statement, parameters)
            plan = cursor.fetchone()[0]
            plan = json.loads(plan) if isinstance(plan, str) else plan
            found.append((_rows_read(plan[0]["Plan"]), statement))
    assert found, "no statement over the runs was sent"
    return found


def preview(engine, window, **values):
    return operation_preview.preview(
        engine,
        filters.parse(values),
        "rerun" if values.get("status") == "failed" else "resume",
        registry=REGISTRY,
        thresholds=THRESHOLDS,
        window=window,
    )


@pytest.mark.parametrize(
    "values, whole_reads_the_table",
    [
        # The thin slice at the top of the ids: the (status, id) index counts
        # it and the sample is the newest, so one walk read no more either.
        ({"status": "failed"}, False),
        # At the bottom, read newest first by the (status, id) index.
        ({"status": "paused", "workflow_class": "RefundWorkflow"}, False),
        # No index fits: the count read every run, and the newest-first sample
        # of runs at the bottom walked down the whole table.
        ({"step": "capture_payment"}, True),
        ({"step": "refund"}, True),
    ],
)
def test_the_preview_reads_one_window_per_statement_and_counts_the_same(thin_slice, values, whole_reads_the_table):
    engine = thin_slice
    shown = {}
    bounded = reads(engine, lambda: shown.update(now=preview(engine, WINDOW, **values)))
    assert max(rows for rows, _ in bounded) <= WINDOW
    whole = reads(engine, lambda: shown.update(before=preview(engine, WHOLE, **values)))
    # Control: one window spanning the table reads most of it in one statement.
    assert (max(rows for rows, _ in whole) > (EARLY + BULK + LATE) * 0.8) is whole_reads_the_table
    now, before = shown["now"], shown["before"]
    assert (now.total, now.by_status, now.fits) == (before.total, before.by_status, before.fits)
    assert now.total == (EARLY if "paused" in values.values() or "refund" in values.values() else LATE)
    assert [run["workflow_id"] for run in now.sample] == [run["workflow_id"] for run in before.sample]
    assert len(now.sample) == operation_preview.SAMPLE_SIZE


@pytest.mark.parametrize("values", [{"step": "capture_payment"}, {"status": "failed"}])
def test_a_chunk_walk_reads_one_window_per_statement_where_one_walk_read_the_table(thin_slice, values):
    # With a step alone no index fits: one walk read the completed runs
    # along the primary key to reach the failed ones. With the status the
    # planner may pick either; each window is bounded whichever it picks.
    engine = thin_slice
    operation = operation_policy.create(
        engine,
        filters.parse(values),
        "rerun",
        None,
        reason="fixed",
        actor="dashboard:alice",
        expected=LATE,
        registry=REGISTRY,
        thresholds=THRESHOLDS,
    )
    bounded = operation_runner.Runner(engine, REGISTRY, chunk=20, window=WINDOW, parallel=1)
    chunks = []
    walked = reads(engine, lambda: [chunks.append(bounded.step()) for _ in range(3)])
    assert max(rows for rows, _ in walked) <= WINDOW
    # Thin slice: the first chunk crosses the completed runs window by
    # window (WINDOWS_PER_CHUNK of them), acting on nothing and moving the
    # cursor; the next ones reach the failed runs.
    with engine.connect() as conn:
        cursor = conn.execute(
            sa.text("SELECT cursor, moved FROM pgbus_web_operations WHERE id = :id"), {"id": operation["id"]}
        ).one()
    assert operation_runner.WINDOWS_PER_CHUNK * WINDOW < EARLY + BULK < 2 * operation_runner.WINDOWS_PER_CHUNK * WINDOW
    assert [chunk.moved for chunk in chunks] == [0, 20, 20] and cursor.moved == 40
    assert cursor.cursor == EARLY + BULK + 40
    bounded.release()
    # Control: one window over the table (the walk before) reads the
    # completed runs along the primary key in one statement.
    whole = operation_runner.Runner(engine, REGISTRY, chunk=20, window=WHOLE, parallel=1)
    with engine.begin() as conn:
        conn.execute(sa.text("UPDATE pgbus_web_operations SET cursor = 0 WHERE id = :id"), {"id": operation["id"]})
    walked = reads(engine, lambda: whole.step())
    if "step" in values:
        assert max(rows for rows, _ in walked) > BULK
    whole.release()


def _scans(node: dict) -> list[dict]:
    here = [node] if node.get("Relation Name") == "pgbus_workflows" and "Scan" in node["Node Type"] else []
    return here + [scan for child in node.get("Plans", []) for scan in _scans(child)]


def _count_scans(engine, values) -> list[dict]:
    """The scans of the preview's count statements (one a window), run
    again as EXPLAIN ANALYZE."""
    sent = []

    def grab(conn, cursor, statement, parameters, context, executemany):
        if "GROUP BY W.WORKFLOW_CLASS, W.STATUS" in " ".join(statement.upper().split()):
            sent.append((statement, parameters))

    sa.event.listen(engine, "before_cursor_execute", grab)
    try:
        preview(engine, WINDOW, **values)
    finally:
        sa.event.remove(engine, "before_cursor_execute", grab)
    assert sent, "the preview sent no count"
    found = []
    with engine.connect() as conn:
        cursor = conn.connection.driver_connection.cursor()
        for statement, parameters in sent:
            cursor.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + statement, parameters)
            plan = cursor.fetchone()[0]
            plan = json.loads(plan) if isinstance(plan, str) else plan
            found += _scans(plan[0]["Plan"])
    return found


def test_a_status_with_a_time_range_is_counted_from_the_index_alone(thin_slice):
    """The failed runs of a time range, counted window by window, never
    visit the table: on a cold million runs those visits passed the
    statement timeout (docs/operations.md, "The million-run trial")."""
    engine = thin_slice
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.exec_driver_sql("VACUUM pgbus_workflows")  # the visibility map, as autovacuum keeps it
    scans = _count_scans(engine, {"status": "failed", "from": "2000-01-01T00:00"})
    assert {scan["Node Type"] for scan in scans} == {"Index Only Scan"}
    assert {scan["Index Name"] for scan in scans} == {"pgbus_workflows_status_id"}
    assert sum(scan.get("Heap Fetches", 0) for scan in scans) == 0
    # Control: a column the index does not carry (the step) sends the same
    # count to the table.
    assert "Index Only Scan" not in {
        scan["Node Type"] for scan in _count_scans(engine, {"status": "failed", "step": "capture_payment"})
    }


# The stuck index as schema version 14 had it: the id an included
# column, not a key.
V14_STUCK = """
    CREATE INDEX pgbus_workflows_stuck ON pgbus_workflows (workflow_class, status)
    INCLUDE (id, workflow_id, current_step, paused_at, latest_step_name, latest_step_status,
             latest_error_class, latest_scheduled_at, latest_waiting_since, latest_timeout_at)
    WHERE status IN ('paused', 'ready', 'waiting')
"""
V14_CLASS_STATUS = "CREATE INDEX pgbus_workflows_class_status ON pgbus_workflows (workflow_class, status)"
MANY = 20_000
CHUNK = operation_runner.CHUNK_PATH


@pytest.fixture
def one_class_many_windows(engine):
    """MANY paused RefundWorkflow runs, every fourth run over sixteen
    windows of ids, among completed OrderWorkflow runs, written in no
    order of their ids (so a walk along the primary key visits the table
    at random, as on a table years of updates have shuffled); vacuumed
    and analyzed."""
    with engine.begin() as conn:
        conn.exec_driver_sql("SET LOCAL statement_timeout = 0")
        for first in range(1, 4 * MANY + 1, 10_000):
            conn.execute(
                sa.text(
                    "INSERT INTO pgbus_workflows (id, workflow_id, workflow_class, status, current_step, paused_at,"
                    " finished_at, created_at, updated_at)"
                    " SELECT g, 'run-' || g, CASE WHEN g % 4 = 0 THEN 'RefundWorkflow' ELSE 'OrderWorkflow' END,"
                    " CASE WHEN g % 4 = 0 THEN 'paused' ELSE 'completed' END, 'refund',"
                    " CASE WHEN g % 4 = 0 THEN now() END, CASE WHEN g % 4 <> 0 THEN now() END, now(), now()"
                    " FROM generate_series(CAST(:first AS int), CAST(:last AS int)) g ORDER BY random()"
                ),
                {"first": first, "last": min(first + 9_999, 4 * MANY)},
            )
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.exec_driver_sql("VACUUM ANALYZE pgbus_workflows")
    return engine


def _walk_reads(engine) -> float:
    """The most entries one statement over the runs read in an operation's
    first chunk, the operation resuming the paused RefundWorkflow runs
    (cancelled after it)."""
    operation = operation_policy.create(
        engine,
        filters.parse({"workflow_class": "RefundWorkflow", "status": "paused"}),
        "resume",
        None,
        reason="fixed",
        actor="dashboard:alice",
        expected=None,
        registry=REGISTRY,
        thresholds=THRESHOLDS,
    )
    runner = operation_runner.Runner(engine, REGISTRY, chunk=CHUNK, window=WINDOW, parallel=1)
    walked = reads(engine, lambda: runner.step(operation["id"]))
    runner.release()
    with engine.begin() as conn:
        conn.execute(
            sa.text("UPDATE pgbus_web_operations SET status = 'cancelled' WHERE id = :id"), {"id": operation["id"]}
        )
    return max(rows for rows, _ in walked)


def test_a_class_and_status_walk_reads_its_window_as_an_index_range(one_class_many_windows):
    engine = one_class_many_windows
    # A window's statement reads about the chunk's runs, in id order from
    # the class and status index, however many of the class are paused.
    assert _walk_reads(engine) <= 2 * CHUNK
    # Control: with the indexes as they were (their keys ending at the
    # status), no index held the window in id order: the statement read
    # the whole window here (along the primary key), and every paused run
    # of the class for each window at a million runs (docs/operations.md).
    with engine.connect() as conn:
        now_defined = dict(
            conn.execute(
                sa.text(
                    "SELECT indexname, indexdef FROM pg_indexes"
                    " WHERE indexname IN ('pgbus_workflows_stuck', 'pgbus_workflows_class_status')"
                )
            ).all()
        )
    assert len(now_defined) == 2
    try:
        with engine.begin() as conn:
            conn.exec_driver_sql("DROP INDEX pgbus_workflows_stuck")
            conn.exec_driver_sql(V14_STUCK)
            conn.exec_driver_sql("DROP INDEX pgbus_workflows_class_status")
            conn.exec_driver_sql(V14_CLASS_STATUS)
        assert _walk_reads(engine) > 2 * CHUNK
    finally:  # the session's schema, as installed, for the tests after this one
        with engine.begin() as conn:
            for name, definition in now_defined.items():
                conn.exec_driver_sql(f"DROP INDEX IF EXISTS {name}")
                conn.exec_driver_sql(definition)
