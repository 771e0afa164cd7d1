"""The README's first command, as a newcomer runs it: ``pgbus-web demo``."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest
import sqlalchemy as sa

from pgbus_web.db import create_engine
from pgbus_web.defaults import STALL_THRESHOLD, WAITING_THRESHOLD
from pgbus_web.models import workflow_attention, workflow_counts
from pgbus_web.rules import states

# Generous: the demo initialises a server and seeds it, which on a loaded
# two-core machine has taken over two minutes.
STARTUP_SECONDS = 300


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _read_lines_until(process, prefix_set, deadline):
    found = {}
    while set(found) != prefix_set:
        if time.monotonic() > deadline or process.poll() is not None:
            raise AssertionError(f"demo did not print {prefix_set - set(found)}; got {found}")
        line = process.stdout.readline().strip()
        for prefix in prefix_set:
            if line.startswith(prefix):
                found[prefix] = line[len(prefix) :].strip()
    return found


@pytest.fixture
def demo(tmp_path):
    port = _free_port()
    process = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "from pgbus_web.launch import main; main()",
            "demo",
            "--port",
            str(port),
            "--data-dir",
            str(tmp_path / "demo"),
            "--runs",
            "300",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        lines = _read_lines_until(process, {"Dashboard:", "Database:", "Worker:"}, time.monotonic() + STARTUP_SECONDS)
        yield process, lines
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()


def test_demo_serves_every_status_and_stuck_reason_and_stops_cleanly(demo):
    process, lines = demo
    dashboard = lines["Dashboard:"]
    assert dashboard.endswith("/workflows")
    try:
        with urllib.request.urlopen(dashboard, timeout=60) as response:
            assert response.status == 200
            assert "OrderWorkflow" in response.read().decode()
    except urllib.error.HTTPError as problem:
        # What the demo logged (its traceback) says why, not the status alone.
        process.send_signal(signal.SIGINT)
        raise AssertionError(f"{problem}; the demo printed:\n{process.communicate(timeout=30)[0]}") from None

    engine = create_engine(lines["Database:"])
    try:
        with engine.connect() as conn:
            statuses = {status for (_, status) in workflow_counts.status_counts(conn)}
            reasons = {
                reason
                for (_, reason) in workflow_attention.stuck_reason_counts(
                    conn, threshold=STALL_THRESHOLD, waiting_threshold=WAITING_THRESHOLD
                )
            }
            locks = conn.execute(sa.text("SELECT count(*) FROM pgbus_uniqueness_keys")).scalar_one()
            # Its own database, collated as demo/embedded_server.py makes it.
            name, provider, version = conn.execute(
                sa.text(
                    "SELECT datname, datlocprovider, current_setting('server_version_num')::int"
                    " FROM pg_database WHERE datname = current_database()"
                )
            ).one()
    finally:
        engine.dispose()
    # running may be brief in a live demo; every other status stays on screen.
    assert set(states.RUN) - {states.RUNNING} <= statuses
    assert set(states.STUCK_REASONS) <= reasons
    assert locks > 0
    assert name == "pgbus_demo"
    assert provider == ("b" if version >= 170000 else "c")

    process.send_signal(signal.SIGINT)
    assert process.wait(timeout=90) == 0
    rest = process.stdout.read()
    assert "Stopped." in rest
    assert "Traceback" not in rest


def _run_demo_until_up(data_dir, *extra) -> str:
    """Start the demo, wait for its dashboard, stop it with SIGTERM; all it printed."""
    port = _free_port()
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pgbus_web",
            "demo",
            "--port",
            str(port),
            "--data-dir",
            str(data_dir),
            "--runs",
            "40",
            *extra,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    lines = []
    try:
        deadline = time.monotonic() + STARTUP_SECONDS
        while not any(line.startswith("Dashboard:") for line in lines):
            assert time.monotonic() < deadline and process.poll() is None, lines
            lines.append(process.stdout.readline())
        process.send_signal(signal.SIGTERM)
        rest, _ = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 0, lines
    return "".join(lines) + rest


@pytest.mark.scale
def test_a_second_demo_says_it_reuses_the_data_and_reset_starts_afresh(tmp_path):
    data_dir = tmp_path / "demo"
    first = _run_demo_until_up(data_dir)
    assert "Seeding 40 runs" in first and "Reusing" not in first
    # Not a terminal: no progress bar in the output.
    assert "Seeding:" not in first and "run/s" not in first
    second = _run_demo_until_up(data_dir)
    assert "Reusing the earlier demo's runs" in second and "Seeding" not in second
    third = _run_demo_until_up(data_dir, "--reset")
    assert "Deleting the earlier demo database" in third and "Seeding 40 runs" in third


def test_the_demo_refuses_a_public_host(tmp_path):
    process = subprocess.run(
        [
            sys.executable,
            "-m",
            "pgbus_web",
            "demo",
            "--port",
            str(_free_port()),
            "--data-dir",
            str(tmp_path / "demo"),
            "--host",
            "0.0.0.0",
        ],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert process.returncode == 1
    assert (
        process.stderr.strip() == "Error: refusing to serve the demo on 0.0.0.0: it has no sign-in; "
        "use a loopback --host, or --no-auth"
    )
    assert not (tmp_path / "demo").exists()


def test_kill_usr1_stops_the_demos_worker_as_a_crash_would_and_the_dashboard_flags_it(demo):
    """The demo's worker is a thread of its process: SIGUSR1 ends it without
    marking its row stopped, the dashboard and the new runs staying up; its
    row then goes silent, and the index flags it once silent past
    worker_gone_after (asked at that later moment; not before)."""
    from datetime import timedelta

    from pgbus_web.core import worker_reads
    from pgbus_web.core.settings import Settings

    process, lines = demo
    engine = create_engine(lines["Database:"])
    assert "kill -USR1" in lines["Worker:"]

    def demo_worker():
        with engine.connect() as conn:
            return (
                conn.execute(
                    sa.text(
                        "SELECT id, heartbeat_at, stopped_at FROM pgbus_web_workers WHERE kind = 'worker'"
                        " ORDER BY id DESC LIMIT 1"
                    )
                )
                .mappings()
                .one()
            )

    try:
        assert demo_worker()["stopped_at"] is None
        process.send_signal(signal.SIGUSR1)
        said = _read_lines_until(process, {"The demo's worker stopped"}, time.monotonic() + 60)
        assert "flags it within 30 s" in said["The demo's worker stopped"]
        time.sleep(12)  # past two heartbeat intervals: a live worker would have beaten
        silent = demo_worker()
        time.sleep(6)  # the behaviour: six more seconds without a heartbeat
        again = demo_worker()
        assert again["stopped_at"] is None  # not a clean stop: never marked stopped
        assert again["heartbeat_at"] == silent["heartbeat_at"]  # and silent
        with urllib.request.urlopen(lines["Dashboard:"], timeout=60) as response:
            assert response.status == 200  # the dashboard still answers
        settings = Settings()
        with engine.connect() as conn:
            flagged_now = worker_reads.gone_holding(conn, settings, now=again["heartbeat_at"] + timedelta(seconds=1))
            later = again["heartbeat_at"] + settings.worker_gone_after + timedelta(seconds=1)
            flagged_later = worker_reads.gone_holding(conn, settings, now=later)
        assert again["id"] not in {row["id"] for row in flagged_now}
        assert again["id"] in {row["id"] for row in flagged_later}
    finally:
        engine.dispose()
    process.send_signal(signal.SIGINT)
    assert process.wait(timeout=90) == 0
