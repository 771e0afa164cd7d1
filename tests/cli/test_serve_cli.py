"""``pgbus-web users`` and ``pgbus-web serve`` as an operator runs them:
the users file, the refusals at start (no sign-in off loopback, a port in
use, a database without the schema), /health while the schema is missing,
and SIGTERM stopping a real serve process, also as PID 1."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import urllib.error
import urllib.request
import uuid
from contextlib import contextmanager
from pathlib import Path

import pytest
import sqlalchemy as sa
from click.testing import CliRunner
from support.auth_support import write_users
from support.waiting import wait_until

from pgbus_web import db, schema
from pgbus_web.auth import passwords, users
from pgbus_web.launch import main_group

# A port nothing listens on: any database work would fail with "cannot reach".
DEAD_URL = "postgresql://pgbus:pgbus@127.0.0.1:9/pgbus"


def invoke(*args, input=None):
    return CliRunner().invoke(main_group, list(args), input=input)


# --- users -----------------------------------------------------------------------


def test_users_add_list_remove(tmp_path):
    path = tmp_path / "users"
    result = invoke("users", "add", "alice", "--role", "operator", "--users-file", str(path), input="a long password\n")
    assert result.exit_code == 0, result.output
    assert "Added alice (operator)" in result.output
    assert oct(path.stat().st_mode & 0o777) == "0o600"
    stored = users.read(path)["alice"]
    assert stored.role == "operator" and stored.password_hash.startswith("$argon2id$")
    assert "a long password" not in path.read_text()
    assert passwords.verify(stored.password_hash, "a long password")
    assert not passwords.verify(stored.password_hash, "another password")

    assert (
        invoke("users", "add", "bob", "--role", "viewer", "--users-file", str(path), input="bobs password\n").exit_code
        == 0
    )
    assert invoke("users", "list", "--users-file", str(path)).output == "alice\toperator\nbob\tviewer\n"
    assert invoke("users", "remove", "alice", "--users-file", str(path)).exit_code == 0
    assert invoke("users", "list", "--users-file", str(path)).output == "bob\tviewer\n"


@pytest.mark.parametrize(
    "args, stdin, expected",
    [
        (["users", "add", "bad:name", "--role", "viewer"], "a long password\n", "invalid user name"),
        (["users", "add", "carol", "--role", "viewer"], "short\n", "at least 8 characters"),
        (["users", "add", "carol", "--role", "root"], "a long password\n", "Invalid value for '--role'"),
        (["users", "remove", "nobody"], None, "no user 'nobody'"),
    ],
)
def test_bad_users_input_is_one_line_and_changes_nothing(tmp_path, args, stdin, expected):
    path = write_users(tmp_path / "users")
    before = path.read_bytes()
    result = invoke(*args, "--users-file", str(path), input=stdin)
    assert result.exit_code != 0
    assert expected in result.output
    assert path.read_bytes() == before


# --- serve: refusals at start -----------------------------------------------------------


def test_serve_refuses_a_public_host_without_sign_in_before_any_database_work():
    result = invoke("serve", "--database-url", DEAD_URL, "--host", "0.0.0.0")
    assert result.exit_code == 1
    assert result.output.startswith("Error: refusing to serve on 0.0.0.0 without sign-in")
    assert len(result.output.strip().splitlines()) == 1
    # Control: with --no-auth it goes on, to the database (which is away).
    result = invoke("serve", "--database-url", DEAD_URL, "--host", "0.0.0.0", "--port", "0", "--no-auth")
    assert result.exit_code == 1 and "cannot reach the database" in result.output


def test_serve_with_an_empty_or_missing_users_file_is_refused(tmp_path):
    result = invoke("serve", "--database-url", DEAD_URL, "--users-file", str(tmp_path / "none"))
    assert result.exit_code == 1 and "no users file at" in result.output
    (tmp_path / "empty").write_text("")
    result = invoke("serve", "--database-url", DEAD_URL, "--users-file", str(tmp_path / "empty"))
    assert result.exit_code == 1 and "has no users" in result.output


@pytest.mark.parametrize(
    "bad_line, says",
    [
        ("mallory:root:$argon2id$x", "line 4: invalid role 'root'"),
        ("mallory", "line 4: expected name:role:hash or name:role:groups:hash"),
        ("bad name:viewer:$argon2id$x", "line 4: invalid user name"),
    ],
)
def test_serve_with_a_broken_users_file_names_the_file_and_line(tmp_path, bad_line, says):
    path = write_users(tmp_path / "users")
    path.write_text(path.read_text() + bad_line + "\n")
    result = invoke("serve", "--database-url", DEAD_URL, "--users-file", str(path))
    assert result.exit_code == 1
    assert result.output.startswith(f"Error: {path}, {says}")
    assert len(result.output.strip().splitlines()) == 1


def test_the_trusted_header_needs_trusted_proxies():
    result = invoke("serve", "--database-url", DEAD_URL, "--trusted-header", "X-User")
    assert result.exit_code == 1 and "needs --trusted-proxy" in result.output


@pytest.mark.parametrize("command", [["serve"], ["demo", "--data-dir", "DATA"]])
def test_a_port_in_use_is_one_line_before_any_database_work(command, tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        args = [str(tmp_path / "demo") if a == "DATA" else a for a in command]
        result = (
            invoke(*args, "--database-url", DEAD_URL, "--port", str(port))
            if command == ["serve"]
            else invoke(*args, "--port", str(port))
        )
    assert result.exit_code == 1
    assert result.output.strip() == f"Error: cannot listen on 127.0.0.1:{port}: Address already in use"
    # The demo started no database: nothing was written in its data dir.
    assert not (tmp_path / "demo" / "pgdata").exists()


@pytest.fixture
def empty_database(database_url):
    """A database of its own on the test server, without the schema."""
    name = f"pgbus_empty_{uuid.uuid4().hex[:8]}"
    admin = sa.create_engine(database_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.exec_driver_sql(f'CREATE DATABASE "{name}"')
    url = sa.make_url(database_url).set(database=name).render_as_string(hide_password=False)
    try:
        yield url
    finally:
        with admin.connect() as conn:
            conn.exec_driver_sql(f'DROP DATABASE "{name}" WITH (FORCE)')
        admin.dispose()


def test_serve_without_the_schema_is_one_line_naming_db_install(empty_database):
    result = invoke("serve", "--database-url", empty_database, "--port", "0")
    assert result.exit_code == 1
    assert result.output.strip().splitlines() == [
        "Error: the database has no pgbus-web schema: run `pgbus-web db install` first (or start with --install-schema)"
    ]


def test_serve_with_another_schema_version_is_one_line(empty_database):
    engine = db.create_engine(empty_database)
    with engine.begin() as conn:
        conn.exec_driver_sql(f"CREATE TABLE {schema.VERSION_TABLE} (version integer PRIMARY KEY)")
        conn.exec_driver_sql(f"INSERT INTO {schema.VERSION_TABLE} VALUES ({schema.SCHEMA_VERSION + 7})")
    engine.dispose()
    result = invoke("serve", "--database-url", empty_database, "--port", "0")
    assert result.exit_code == 1
    assert f"schema version {schema.SCHEMA_VERSION + 7}" in result.output
    assert "pgbus-web db install" in result.output and len(result.output.strip().splitlines()) == 1


def test_health_is_503_with_the_reason_while_the_schema_is_missing(empty_database):
    from support.web_helpers import make_app

    database = db.Database.from_urls(empty_database)
    try:
        client = make_app(database).test_client()
        response = client.get("/health")
        assert response.status_code == 503
        assert response.get_json()["schema"].startswith("the database has no pgbus-web schema")
        schema.install(database.primary)
        # Control: once installed, ok.
        response = client.get("/health")
        assert response.status_code == 200 and response.get_json()["status"] == "ok"
    finally:
        database.dispose()


# --- serve: a real process, stopped by SIGTERM -------------------------------------------------


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _get(url, headers=None):
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers or {}), timeout=5) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def _wait_up(port, process, timeout=60.0):
    def answered():
        if process.poll() is not None:
            raise AssertionError(process.communicate()[1])
        return _get(f"http://127.0.0.1:{port}/health")

    return wait_until(answered, timeout=timeout, every=0.1, ignoring=(OSError,), what="serve answering /health")


@contextmanager
def serving(command, env):
    # A session of its own: whatever is left at the end goes with its group.
    process = subprocess.Popen(
        command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        yield process
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.communicate(timeout=10)


def _serve_pid(process, pid_1: bool) -> int:
    """The serve process: unshare's child when it runs as PID 1 of its own
    namespace (a signal from outside reaches it, as `docker stop`'s does,
    only if it handles the signal)."""
    if not pid_1:
        return process.pid
    children = Path(f"/proc/{process.pid}/task/{process.pid}/children").read_text().split()
    assert len(children) == 1, children
    return int(children[0])


SERVE = [sys.executable, "-m", "pgbus_web", "serve"]
# A PID namespace of its own: serve is PID 1 there, as in a container.
AS_PID_1 = ["unshare", "--pid", "--fork", "--mount-proc"]


def _can_unshare() -> bool:
    if not shutil.which("unshare") or os.geteuid() != 0:
        return False
    return subprocess.run([*AS_PID_1, "true"], capture_output=True).returncode == 0


@pytest.mark.parametrize("pid_1", [False, True], ids=["child", "pid 1"])
def test_serve_asks_for_sign_in_and_stops_on_sigterm(engine, database_url, tmp_path, pid_1):
    if pid_1 and not _can_unshare():
        pytest.skip("unshare --pid needs root here")
    users_file = write_users(tmp_path / "users")
    port = _free_port()
    command = [*(AS_PID_1 if pid_1 else []), *SERVE, "--port", str(port), "--users-file", str(users_file)]
    env = {**os.environ, "PGBUS_DATABASE_URL": database_url}
    with serving(command, env) as process:
        status, body = _wait_up(port, process)
        assert status == 200 and json.loads(body)["status"] == "ok"
        assert _get(f"http://127.0.0.1:{port}/workflows")[0] == 401
        import base64

        auth = {"Authorization": "Basic " + base64.b64encode(b"vera:viewer password").decode()}
        assert _get(f"http://127.0.0.1:{port}/workflows", auth)[0] == 200
        os.kill(_serve_pid(process, pid_1), signal.SIGTERM)
        stdout, stderr = process.communicate(timeout=60)
    assert process.returncode == 0, stderr
    assert "Stopped." in stdout
    # The access log: on stdout, in the format of the other log lines, no credentials.
    access = [line for line in stdout.splitlines() if " pgbus_web.access INFO " in line]
    assert any(line.endswith("ms") and '"GET /workflows" 401 ' in line for line in access), stdout
    assert any('"GET /workflows" 200 ' in line for line in access), stdout
    assert "viewer password" not in stdout and "Basic" not in stdout


def test_the_worker_stops_on_sigterm_as_pid_1(engine, database_url):
    if not _can_unshare():
        pytest.skip("unshare --pid needs root here")
    command = [
        *AS_PID_1,
        sys.executable,
        "-m",
        "pgbus_web",
        "worker",
        "--definitions",
        "pgbus_web.demo.workflows",
        "--poll-interval",
        "0.05",
    ]
    with serving(command, {**os.environ, "PGBUS_DATABASE_URL": database_url}) as process:
        assert process.stdout.readline().startswith("Worker running")
        os.kill(_serve_pid(process, True), signal.SIGTERM)
        stdout, stderr = process.communicate(timeout=60)
    assert process.returncode == 0, stderr
    assert "Worker stopped after" in stdout


def test_the_images_command_as_pid_1_on_an_empty_database(empty_database, tmp_path):
    """The Dockerfile's command and environment, as PID 1: the one-line
    schema message first; then with the schema installed at start and a
    users file, sign-in asked, a viewer looks, and SIGTERM stops it."""
    if not _can_unshare():
        pytest.skip("unshare --pid needs root here")
    port = _free_port()
    env = {**os.environ, "PGBUS_DATABASE_URL": empty_database, "PGBUS_WEB_HOST": "0.0.0.0", "PGBUS_WEB_PORT": str(port)}
    command = [*AS_PID_1, sys.executable, "-m", "pgbus_web", "serve"]
    refused = subprocess.run(command, env=env, capture_output=True, text=True, timeout=30)
    assert refused.returncode == 1
    assert refused.stderr.startswith("Error: refusing to serve on 0.0.0.0 without sign-in")

    env["PGBUS_WEB_USERS_FILE"] = str(write_users(tmp_path / "users"))
    missing = subprocess.run(command, env=env, capture_output=True, text=True, timeout=30)
    assert missing.returncode == 1
    assert missing.stderr.strip().splitlines() == [
        "Error: the database has no pgbus-web schema: run `pgbus-web db install` first (or start with --install-schema)"
    ]

    env["PGBUS_WEB_INSTALL_SCHEMA"] = "1"
    with serving(command, env) as process:
        status, _ = _wait_up(port, process)
        assert status == 200
        assert _get(f"http://127.0.0.1:{port}/workflows")[0] == 401
        import base64

        auth = {"Authorization": "Basic " + base64.b64encode(b"vera:viewer password").decode()}
        assert _get(f"http://127.0.0.1:{port}/workflows", auth)[0] == 200
        os.kill(_serve_pid(process, True), signal.SIGTERM)
        stdout, stderr = process.communicate(timeout=60)
    assert process.returncode == 0, stderr
    assert "Installed pgbus-web schema version" in stdout and "Stopped." in stdout


def test_a_stopped_serve_gives_its_operation_back_to_the_queue(engine, database_url):
    # serve runs queued operations in a thread of its own; stopped while
    # it holds one, it must hand it back (status queued), so another
    # process takes it at once rather than after the stale heartbeat.
    from support.operation_support import THRESHOLDS, query, seed_paused

    from pgbus_web.demo.workflows import REGISTRY
    from pgbus_web.models import operation_rows
    from pgbus_web.runtime import operation_policy

    seed_paused(engine, 3000)
    # Paced, so that it lasts ten seconds at least: cancel's chunks do 3,000
    # runs in about one, and a loaded machine could finish it before the stop.
    operation = operation_policy.create(
        engine,
        query(status="paused"),
        "cancel",
        None,
        reason="gateway gone",
        actor="dashboard:alice",
        expected=None,
        registry=REGISTRY,
        thresholds=THRESHOLDS,
        rate=300,
    )

    def current():
        with engine.connect() as conn:
            return operation_rows.find(conn, operation["id"])

    port = _free_port()
    command = [*SERVE, "--port", str(port), "--definitions", "pgbus_web.demo.workflows"]
    with serving(command, {**os.environ, "PGBUS_DATABASE_URL": database_url}) as process:

        def taken():
            assert process.poll() is None, "serve stopped before it took the operation"
            return current()["status"] == "running" and current()["moved"] > 0

        wait_until(taken, timeout=120, what="serve taking the operation")
        process.send_signal(signal.SIGTERM)
        stdout, stderr = process.communicate(timeout=20)
    assert process.returncode == 0, stderr
    assert "Stopped." in stdout
    left = current()
    assert left["moved"] < 3000, "the operation ended before serve was stopped: nothing was tested"
    assert (left["status"], left["heartbeat_at"]) == ("queued", None)
