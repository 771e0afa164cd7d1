"""`pgbus-web seed --history N`: N finished runs by set-based SQL, each
with its steps and events as the runtime writes them, carrying what the
triggers would have written (latest_* columns, counts, change marker)."""

from __future__ import annotations

import sqlalchemy as sa
from click.testing import CliRunner

from pgbus_web.demo import workflows as demo
from pgbus_web.demo.history import seed_history
from pgbus_web.launch import main_group
from pgbus_web.models import changes, recount, workflow_counts
from pgbus_web.rules import states


def scalar(engine, statement: str):
    with engine.connect() as conn:
        return conn.execute(sa.text(statement)).scalar_one()


def test_history_runs_are_finished_whole_and_consistent(engine, runs, database_url):
    ongoing = runs.make(states.RUNNING)  # a run of the ordinary kind, before
    with engine.connect() as conn:
        marker = changes.marker(conn)
    result = seed_history(engine, runs=2_345, chunk_size=1_000)
    assert (result.runs, scalar(engine, "SELECT count(*) FROM pgbus_workflows")) == (2_345, 2_346)
    assert result.steps == scalar(engine, "SELECT count(*) FROM pgbus_workflow_steps") - 0
    with engine.connect() as conn:
        kept, counted = workflow_counts.status_counts(conn), recount.status_counts(conn)
        assert changes.marker(conn) > marker
    assert kept == counted
    statuses = {status: sum(n for (_, s), n in counted.items() if s == status) for status in states.RUN}
    assert statuses[states.COMPLETED] > 2_000 and statuses[states.FAILED] > 0 and statuses[states.CANCELLED] > 0
    assert set(statuses) - {states.COMPLETED, states.FAILED, states.CANCELLED, states.RUNNING} == {
        s for s in statuses if statuses[s] == 0
    }
    # Every class's runs went through every step of its definition, once.
    for klass in (demo.ORDER, demo.ONBOARDING, demo.REFUND):
        names = list(demo.REGISTRY.get(klass).step_names)
        with engine.connect() as conn:
            seen = (
                conn.execute(
                    sa.text(
                        "SELECT DISTINCT array_agg(s.step_name ORDER BY s.id) FROM pgbus_workflows w "
                        "JOIN pgbus_workflow_steps s USING (workflow_id) WHERE w.workflow_class = :c "
                        "AND w.workflow_id <> :o GROUP BY w.workflow_id"
                    ),
                    {"c": klass, "o": ongoing},
                )
                .scalars()
                .all()
            )
        assert seen == [names]
    # The latest_* columns and the counts need no repair.
    checked = CliRunner().invoke(main_group, ["db", "check", "--database-url", database_url])
    assert checked.exit_code == 0, checked.output
    # Events in the order of time, started first and finished last.
    assert (
        scalar(
            engine,
            """
        SELECT count(*) FROM (
            SELECT workflow_id, array_agg(event ORDER BY id) AS events,
                   bool_and(created_at >= prev) AS ordered
            FROM (SELECT *, lag(created_at, 1, '-infinity') OVER (PARTITION BY workflow_id ORDER BY id) AS prev
                  FROM pgbus_workflow_events) e
            GROUP BY workflow_id
        ) runs
        WHERE NOT ordered OR events[1] <> 'started'
           OR NOT (events[array_length(events, 1)] IN ('finished', 'cancelled'))
    """,
        )
        == 0
    )
    assert (
        scalar(
            engine,
            "SELECT count(*) FROM pgbus_workflow_events WHERE event <> ALL(:e)".replace(
                ":e", "ARRAY[" + ", ".join(f"'{e}'" for e in states.EVENTS) + "]"
            ),
        )
        == 0
    )
    # Finished runs before the last 31 days, and each finished after it began.
    assert (
        scalar(
            engine,
            f"SELECT count(*) FROM pgbus_workflows WHERE workflow_id <> '{ongoing}' AND "
            "(created_at > now() - interval '31 days' OR finished_at < created_at)",
        )
        == 0
    )


def test_the_cli_adds_history(engine, database_url):
    result = CliRunner().invoke(main_group, ["seed", "--history", "50", "--database-url", database_url])
    assert result.exit_code == 0, result.output
    assert result.output.startswith("Added 50 finished runs (")
    assert scalar(engine, "SELECT count(*) FROM pgbus_workflows") == 50
    refused = CliRunner().invoke(main_group, ["seed", "--database-url", database_url])
    assert refused.exit_code == 2 and "Give --runs, --history or both." in refused.output
    assert scalar(engine, "SELECT count(*) FROM pgbus_workflows") == 50


def test_history_without_events_has_steps_and_no_events(engine, database_url):
    """--no-history-events: the runs and their steps as before, no event;
    the default, the control, writes events for the same runs."""
    bare = CliRunner().invoke(
        main_group, ["seed", "--history", "40", "--no-history-events", "--database-url", database_url]
    )
    assert bare.exit_code == 0, bare.output
    steps = scalar(engine, "SELECT count(*) FROM pgbus_workflow_steps")
    assert scalar(engine, "SELECT count(*) FROM pgbus_workflows") == 40 and steps > 40
    assert scalar(engine, "SELECT count(*) FROM pgbus_workflow_events") == 0
    assert f"({steps} steps, 0 events)" in bare.output
    checked = CliRunner().invoke(main_group, ["db", "check", "--database-url", database_url])
    assert checked.exit_code == 0, checked.output
    full = CliRunner().invoke(main_group, ["seed", "--history", "40", "--database-url", database_url])
    assert full.exit_code == 0, full.output
    assert scalar(engine, "SELECT count(*) FROM pgbus_workflow_steps") == 2 * steps
    assert scalar(engine, "SELECT count(*) FROM pgbus_workflow_events") > 3 * steps
