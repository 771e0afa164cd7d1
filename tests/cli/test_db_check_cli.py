"""`pgbus-web db check` and `pgbus-web db repair`: runs whose latest_*
columns were written with the triggers off (a bulk load, a restore with
session_replication_role = replica) are found, named and fixed in batches;
a consistent database is reported clean and left unwritten."""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from click.testing import CliRunner
from support.latest_steps import add_run, add_step, assert_columns_match, row_versions

from pgbus_web.launch import main_group

# The last line of a check: every stored policy rule reads (docs/policy.md).
POLICY_CLEAN = "Every stored policy rule is one the dashboard can read."


def db(database_url: str, *args: str):
    return CliRunner().invoke(main_group, ["db", *args, "--database-url", database_url])


def table_rows(engine) -> list[tuple]:
    with engine.connect() as conn:
        return [tuple(row) for row in conn.execute(sa.text("SELECT * FROM pgbus_workflows ORDER BY id"))]


def counts_rows(engine) -> list[tuple]:
    """The kept counts' rows (totals, deltas, hours) with their row versions:
    unchanged means unwritten."""
    with engine.connect() as conn:
        return [
            tuple(row)
            for row in conn.execute(
                sa.text(
                    "SELECT 'total', ctid, workflow_class, status, NULL::timestamptz, runs FROM pgbus_workflow_counts "
                    "UNION ALL SELECT 'delta', ctid, workflow_class, "
                    "status, hour, runs FROM pgbus_workflow_count_deltas "
                    "UNION ALL SELECT 'hour', ctid, workflow_class, status, hour, runs FROM pgbus_workflow_hour_counts "
                    "ORDER BY 1, 2"
                )
            )
        ]


@pytest.fixture
def consistent(engine):
    """Seven runs, each with up to three steps, written with the triggers on."""
    made = []
    for n in range(7):
        run = add_run(engine, f"run-{n}")
        for attempt in range(n % 4):
            add_step(engine, run, f"step{attempt}", "failed", error_class=f"E{attempt}")
        made.append(run)
    assert_columns_match(engine)
    return made


def write_without_triggers(engine, runs: list[str]) -> list[str]:
    """Step writes and run rows the triggers never see; the runs they leave
    wrong, lowest id first."""
    with engine.begin() as conn:
        conn.execute(sa.text("SET LOCAL session_replication_role = replica"))

        def run_sql(statement, **binds):
            return conn.execute(sa.text(statement), binds)

        latest = lambda run: run_sql(  # noqa: E731
            "SELECT max(id) FROM pgbus_workflow_steps WHERE workflow_id = :w", w=run
        ).scalar_one()
        # runs[1] loses its only step, runs[2] its latest of two.
        run_sql("DELETE FROM pgbus_workflow_steps WHERE id = :id", id=latest(runs[1]))
        run_sql("DELETE FROM pgbus_workflow_steps WHERE id = :id", id=latest(runs[2]))
        # runs[3]'s latest step moves to runs[0], which had none.
        run_sql("UPDATE pgbus_workflow_steps SET workflow_id = :to WHERE id = :id", to=runs[0], id=latest(runs[3]))
        # runs[4] gets a step; runs[5]'s own columns are written by hand.
        run_sql(
            "INSERT INTO pgbus_workflow_steps (workflow_id, step_name, status) VALUES (:w, 'more', 'scheduled')",
            w=runs[4],
        )
        run_sql("UPDATE pgbus_workflows SET latest_error_class = 'Wrong' WHERE workflow_id = :w", w=runs[5])
        # A run restored with the columns of a step that is not there.
        run_sql(
            "INSERT INTO pgbus_workflows (workflow_id, workflow_class, status, latest_step_id, latest_step_status) "
            "VALUES ('restored', 'Hand', 'paused', 424242, 'failed')"
        )
    return [*runs[:6], "restored"]


def test_check_names_the_runs_repair_fixes_them_then_check_is_clean(engine, database_url, consistent):
    wrong = write_without_triggers(engine, consistent)
    with pytest.raises(AssertionError):
        assert_columns_match(engine)

    checked = db(database_url, "check")
    assert checked.exit_code == 1, checked.output
    lines = checked.output.splitlines()
    assert lines[0].startswith("7 of 8 runs carry latest-step columns that disagree with their latest step;")
    assert "pgbus-web db repair" in lines[0]
    assert [line.strip() for line in lines[1:8]] == wrong
    # The restored run was inserted without the count triggers too: its
    # class and status, and the hour of its created_at.
    assert lines[8].startswith("2 run counts by class and status disagree with the runs;")
    assert lines[9].strip() == "Hand paused: 7 kept, 8 runs"
    assert lines[10].strip().startswith("Hand paused at ") and lines[10].strip().endswith(" runs")
    assert " UTC: " in lines[10]

    repaired = db(database_url, "repair", "--batch-size", "3")
    assert repaired.exit_code == 0, repaired.output
    assert repaired.output.splitlines() == [
        "Repaired the latest-step columns of 7 of 8 runs.",
        "Refilled 2 run counts by class and status.",
        # The restored paused run is counted in its needs-attention group too.
        repaired.output.splitlines()[2],
    ]
    assert repaired.output.splitlines()[2].startswith("Refilled ")
    assert repaired.output.splitlines()[2].endswith(" needs-attention counts by group.")
    assert repaired.output.splitlines()[2] != "Refilled 0 needs-attention counts by group."
    columns = assert_columns_match(engine)
    assert columns["restored"]["step_id"] is None

    clean = db(database_url, "check")
    assert (clean.exit_code, clean.output.splitlines()) == (
        0,
        [
            "All 8 runs agree with their latest step.",
            "The run counts agree with the runs.",
            "The needs-attention counts agree with the runs.",
            POLICY_CLEAN,
        ],
    )

    # Again: nothing to fix, and no run row written.
    versions = row_versions(engine)
    again = db(database_url, "repair")
    assert (again.exit_code, again.output.splitlines()[0]) == (0, "Repaired the latest-step columns of 0 of 8 runs.")
    assert again.output.splitlines()[1:] == [
        "Refilled 0 run counts by class and status.",
        "Refilled 0 needs-attention counts by group.",
    ]
    assert row_versions(engine) == versions


def test_check_names_at_most_the_examples_asked_for_across_batches(engine, database_url, consistent):
    wrong = write_without_triggers(engine, consistent)
    checked = db(database_url, "check", "--examples", "3", "--batch-size", "2")
    assert checked.exit_code == 1
    lines = checked.output.splitlines()
    assert lines[0].startswith("7 of 8 runs")
    assert [line.strip() for line in lines[1:4]] == wrong[:3]


def test_a_consistent_database_checks_clean_and_repair_writes_nothing(engine, database_url, consistent):
    before, versions = table_rows(engine), row_versions(engine)
    checked = db(database_url, "check", "--batch-size", "2")
    assert (checked.exit_code, checked.output.splitlines()) == (
        0,
        [
            "All 7 runs agree with their latest step.",
            "The run counts agree with the runs.",
            "The needs-attention counts agree with the runs.",
            POLICY_CLEAN,
        ],
    )
    counts = counts_rows(engine)
    repaired = db(database_url, "repair", "--batch-size", "2")
    assert (repaired.exit_code, repaired.output.splitlines()) == (
        0,
        [
            "Repaired the latest-step columns of 0 of 7 runs.",
            "Refilled 0 run counts by class and status.",
            "Refilled 0 needs-attention counts by group.",
        ],
    )
    assert counts_rows(engine) == counts
    assert table_rows(engine) == before
    assert row_versions(engine) == versions


def test_an_empty_database_checks_clean(engine, database_url):
    checked = db(database_url, "check")
    assert (checked.exit_code, checked.output.splitlines()) == (
        0,
        [
            "All 0 runs agree with their latest step.",
            "The run counts agree with the runs.",
            "The needs-attention counts agree with the runs.",
            POLICY_CLEAN,
        ],
    )


@pytest.mark.parametrize("command", ["check", "repair"])
def test_an_unreachable_database_fails_in_one_line(command):
    result = db("postgresql://u@127.0.0.1:1/nowhere", command)
    assert result.exit_code == 1
    assert "cannot reach the database" in result.output
    assert len(result.output.strip().splitlines()) == 1
