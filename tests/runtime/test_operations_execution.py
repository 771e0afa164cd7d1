"""Who does operations: any worker's tick, the serving process's thread,
and `pgbus-web bulk` itself (preview, dry run, progress, Ctrl-C)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import sqlalchemy as sa
from click.testing import CliRunner
from support.operation_support import create, seed_paused
from support.refusals import everything
from support.waiting import wait_until

from pgbus_web.demo.workflows import REGISTRY
from pgbus_web.launch import main_group
from pgbus_web.models import operation_rows
from pgbus_web.runtime import operation_policy
from pgbus_web.runtime.worker import Worker


def _find(engine, op_id):
    with engine.connect() as conn:
        return operation_rows.find(conn, op_id)


def _wait_for(predicate, timeout=30.0):
    return wait_until(predicate, timeout=timeout, what="the operation's state")


def test_a_worker_tick_does_an_operation_chunk_by_chunk(engine):
    seed_paused(engine, 450)
    operation = create(engine, status="paused")
    # No steps: this test is about the operation, not the runs it resumes.
    worker = Worker(engine, REGISTRY, steps_per_tick=0)
    worker.operations.chunk = 200
    first = worker.tick(sweep=False)
    assert first.operation_runs == 200 and first.busy
    assert _find(engine, operation["id"])["moved"] == 200
    worker.drain()
    done = _find(engine, operation["id"])
    assert (done["status"], done["moved"], done["skipped"], done["refused"]) == ("done", 450, 0, 0)


def test_the_serving_process_does_operations_unless_turned_off(engine, database):
    from support.web_helpers import make_app

    seed_paused(engine, 30)
    off = make_app(database)  # run_operations=False
    assert off.extensions["pgbus_web"] is not None
    operation = create(engine, status="paused")
    # Nothing to wait on: the control is that in this while nobody does it.
    time.sleep(0.3)
    assert _find(engine, operation["id"])["status"] == "queued"  # control: nobody does it
    from flask import Flask

    from pgbus_web.extension import PgbusWeb

    host = Flask(__name__)
    web = PgbusWeb(host, database=database, registry=REGISTRY)  # the default: on
    try:
        assert _wait_for(lambda: _find(engine, operation["id"])["status"] == "done")
        assert _find(engine, operation["id"])["moved"] == 30
    finally:
        web.operations.stop()


def _cli(engine, *args, input=None):
    url = engine.url.render_as_string(hide_password=False)
    return CliRunner().invoke(main_group, ["bulk", *args, "--database-url", url], input=input)


def test_bulk_dry_run_prints_the_preview_and_changes_nothing(engine):
    seed_paused(engine, 5)
    before = everything(engine)
    result = _cli(
        engine,
        "resume",
        "--filter",
        "status=paused",
        "--reason",
        "gateway back",
        "--definitions",
        "pgbus_web.demo.workflows",
        "--dry-run",
    )
    assert result.exit_code == 0, result.output
    assert "5 runs match" in result.output and "resume fits 5; skips 0." in result.output
    assert "Dry run: nothing changed." in result.output
    assert everything(engine) == before


def test_bulk_without_definitions_says_why_resume_skips(engine):
    seed_paused(engine, 2)
    before = everything(engine)
    result = _cli(engine, "resume", "--filter", "status=paused", "--reason", "r", "--yes")
    assert result.exit_code == 1
    assert "definition not loaded" in result.output and "fits none" in result.output
    assert everything(engine) == before


def test_bulk_yes_runs_it_to_the_end(engine):
    seed_paused(engine, 120)
    result = _cli(
        engine,
        "resume",
        "--filter",
        "status=paused",
        "--filter",
        "workflow_class=OrderWorkflow",
        "--reason",
        "gateway back",
        "--definitions",
        "pgbus_web.demo.workflows",
        "--yes",
    )
    assert result.exit_code == 0, result.output
    assert "moved 120, skipped 0, refused 0 of 120" in result.output
    with engine.connect() as conn:
        [operation] = operation_rows.recent(conn)
    assert operation["status"] == "done" and operation["actor"].startswith("cli:")


def test_bulk_asks_and_a_no_changes_nothing(engine):
    seed_paused(engine, 3)
    before = everything(engine)
    result = _cli(engine, "cancel", "--filter", "status=paused", "--reason", "r", input="n\n")
    assert result.exit_code == 1 and "Nothing changed." in result.output
    assert everything(engine) == before


def test_bulk_refuses_bad_usage_with_exit_code_two(engine):
    seed_paused(engine, 1)
    before = everything(engine)
    for args in (
        ["resume", "--filter", "colour=red", "--reason", "r"],
        ["resume", "--filter", "status=sleeping", "--reason", "r"],
        ["explode", "--filter", "status=paused", "--reason", "r"],
        ["resume", "--filter", "status=paused"],
    ):
        result = _cli(engine, *args)
        assert result.exit_code == 2, (args, result.output)
    result = _cli(
        engine, "resume_at", "--at", "2001-01-01T00:00:00Z", "--filter", "status=paused", "--reason", "r", "--yes"
    )
    assert result.exit_code == 2 and "not in the future" in result.output  # the caller's input
    assert everything(engine) == before


RUNS_FOR_CTRL_C = 4000
# About ten seconds of it.
RATE_FOR_CTRL_C = 400


def test_ctrl_c_leaves_it_for_the_workers_and_says_so(engine):
    # Paced to several seconds, whatever the chunk size: on a loaded machine
    # the interrupt may land several chunks after the first one is seen,
    # and must still find the operation open.
    seed_paused(engine, RUNS_FOR_CTRL_C)
    url = engine.url.render_as_string(hide_password=False)
    process = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "from pgbus_web.launch import main; main()",
            "bulk",
            "resume",
            "--filter",
            "status=paused",
            "--reason",
            "gateway back",
            "--definitions",
            "pgbus_web.demo.workflows",
            "--yes",
            "--rate",
            str(RATE_FOR_CTRL_C),
            "--database-url",
            url,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:

        def started():
            with engine.connect() as conn:
                rows = operation_rows.recent(conn)
            return bool(rows) and rows[0]["moved"] > 0

        assert _wait_for(started)
        os.kill(process.pid, signal.SIGINT)
        out, err = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 1
    assert "left queued" in err and "pgbus-web worker" in err
    with engine.connect() as conn:
        [operation] = operation_rows.recent(conn)
    assert operation["status"] == "queued" and 0 < operation["moved"] < RUNS_FOR_CTRL_C
    # A worker finishes it, every run resumed once (unpaced: a drain stops
    # at a spent budget).
    operation_policy.set_pace(engine, operation["id"], {"rate": None})
    Worker(engine, REGISTRY, steps_per_tick=0).drain()
    with engine.connect() as conn:
        done = operation_rows.find(conn, operation["id"])
        resumed = conn.execute(
            sa.text("SELECT count(*), count(DISTINCT workflow_id) FROM pgbus_workflow_events WHERE event = 'resumed'")
        ).one()
    assert (done["status"], done["moved"]) == ("done", RUNS_FOR_CTRL_C)
    assert tuple(resumed) == (RUNS_FOR_CTRL_C, RUNS_FOR_CTRL_C)
