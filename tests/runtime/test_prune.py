"""``pgbus-web prune``: only finished runs older than the cutoff go, with
their steps, events and signals; ongoing runs, recent runs and every other
row stay; a dry run changes nothing."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa
from click.testing import CliRunner
from support.refusals import everything

from pgbus_web.demo.seed import seed
from pgbus_web.launch import main_group
from pgbus_web.rules import states
from pgbus_web.runtime import retention

CHILDREN = ("pgbus_workflow_steps", "pgbus_workflow_events", "pgbus_workflow_signals")
FINISHED = (states.COMPLETED, states.FAILED, states.CANCELLED)


@pytest.fixture
def aged(engine):
    """Seeded runs in every status, every other one last updated 40 days
    ago and the rest a day ago; returns the ids prune at 30 days must take."""
    seed(engine, runs=240, seed=11)
    with engine.begin() as conn:
        conn.execute(
            sa.text(
                "UPDATE pgbus_workflows SET updated_at = now() - "
                "CASE WHEN id % 2 = 0 THEN interval '40 days' ELSE interval '1 day' END"
            )
        )
        rows = conn.execute(sa.text("SELECT workflow_id, status, id FROM pgbus_workflows")).all()
    doomed = {workflow_id for workflow_id, status, id_ in rows if id_ % 2 == 0 and status in FINISHED}
    # Controls: old ongoing runs and recent finished ones exist, and doomed ones have children.
    assert any(id_ % 2 == 0 and status not in FINISHED for _, status, id_ in rows)
    assert any(id_ % 2 == 1 and status in FINISHED for _, status, id_ in rows)
    with engine.connect() as conn:
        for table in CHILDREN:
            owners = set(conn.execute(sa.text(f"SELECT DISTINCT workflow_id FROM {table}")).scalars())
            assert owners & doomed, table
    return doomed


def without(snapshot, doomed):
    """The snapshot with the doomed runs' rows taken out (their id is in the row)."""
    return {
        table: [row for row in rows if not any(repr(workflow_id) in row for workflow_id in doomed)]
        for table, rows in snapshot.items()
    }


def test_prune_takes_only_old_finished_runs_with_their_rows(engine, aged):
    before = everything(engine)
    result = retention.prune(engine, before=datetime.now(UTC) - timedelta(days=30), batch=7)
    assert result.found == result.deleted == len(aged)
    after = everything(engine)
    assert after == without(before, aged)
    with engine.connect() as conn:
        left = set(conn.execute(sa.text("SELECT workflow_id FROM pgbus_workflows")).scalars())
        assert not left & aged
        for table in CHILDREN:
            owners = set(conn.execute(sa.text(f"SELECT DISTINCT workflow_id FROM {table}")).scalars())
            assert not owners & aged, table


def test_the_command_and_its_dry_run(engine, database_url, aged):
    before = everything(engine)
    runner = CliRunner()
    result = runner.invoke(main_group, ["prune", "--database-url", database_url, "--older-than", "30d", "--dry-run"])
    assert result.exit_code == 0, result.output
    assert f"Dry run: would delete {len(aged)} finished run(s)" in result.output
    assert everything(engine) == before

    result = runner.invoke(
        main_group, ["prune", "--database-url", database_url, "--older-than", "30d", "--batch", "50"]
    )
    assert result.exit_code == 0, result.output
    assert f"Deleted {len(aged)} finished run(s)" in result.output
    # Not a terminal: no progress bar.
    assert "Pruning" not in result.output
    assert everything(engine) == without(before, aged)


@pytest.mark.parametrize("value", ["30", "0d", "-3d", "3 months", "1e3s", ""])
def test_a_bad_duration_is_refused_and_changes_nothing(engine, database_url, aged, value):
    before = everything(engine)
    result = CliRunner().invoke(main_group, ["prune", "--database-url", database_url, "--older-than", value])
    assert result.exit_code == 2
    assert "--older-than" in result.output
    assert everything(engine) == before
