"""``pgbus-web worker`` as an operator runs it: a real process on the test
database, advancing demo runs, stopped cleanly by SIGTERM or SIGINT."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest
from click.testing import CliRunner
from support.waiting import wait_until

from pgbus_web.demo import workflows as demo
from pgbus_web.launch import main_group
from pgbus_web.models import workflow_rows
from pgbus_web.runtime import system


def _status(engine, workflow_id):
    with engine.connect() as conn:
        return workflow_rows.find(conn, workflow_id)["status"]


def _wait_for(predicate, timeout=60.0):
    return wait_until(predicate, timeout=timeout, what="the run's status")


@pytest.mark.parametrize("stop_with", [signal.SIGTERM, signal.SIGINT])
def test_worker_runs_steps_and_stops_cleanly_on_a_signal(engine, database_url, stop_with):
    run = system.start(engine, demo.REFUND, {"refund_id": 1}, registry=demo.REGISTRY)
    process = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "from pgbus_web.launch import main; main()",
            "worker",
            "--definitions",
            "pgbus_web.demo.workflows",
            "--poll-interval",
            "0.05",
        ],
        env={**os.environ, "PGBUS_DATABASE_URL": database_url},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert _wait_for(lambda: _status(engine, run["workflow_id"]) == "completed")
        process.send_signal(stop_with)
        stdout, stderr = process.communicate(timeout=20)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 0, stderr
    assert "Worker running OrderWorkflow, OnboardingWorkflow, RefundWorkflow" in stdout
    assert "Worker stopped after 3 steps." in stdout


def test_a_module_without_a_registry_is_a_one_line_error(database_url):
    result = CliRunner().invoke(
        main_group, ["worker", "--database-url", database_url, "--definitions", "pgbus_web.rules.states"]
    )
    assert result.exit_code == 2  # a setting the worker cannot use (core/settings_loader.py)
    assert "pgbus_web.rules.states has no REGISTRY" in result.output


def test_a_module_that_does_not_import_is_a_one_line_error(database_url):
    result = CliRunner().invoke(
        main_group, ["worker", "--database-url", database_url, "--definitions", "no_such_module_here"]
    )
    assert result.exit_code == 2
    assert "cannot import definitions module 'no_such_module_here'" in result.output
