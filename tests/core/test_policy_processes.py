"""The policy across real processes (docs/policy.md): two `pgbus-web serve`
processes, a worker, the command line and an MCP server on one database.
A policy "cancel over 1,000 runs needs approval" makes a 1,500-run cancel
wait at every door, whatever option or environment the command line has;
its requester cannot approve it anywhere, an approver whose grant misses
the class cannot either; the operation says who asked, approved and
cancelled, and why. The stall threshold changed through one process moves
the other's groups, the command line's preview, MCP's preview and the
worker's sweep within seconds.

Every wait is for a state with a generous deadline; nothing asserts how
long anything took."""

from __future__ import annotations

import http.client
import json
import os
import sys
from contextlib import ExitStack

import pytest
import sqlalchemy as sa
from click.testing import CliRunner
from support.action_support import ago
from support.api_support import token_for
from support.auth_support import CHEAP
from support.instances import Client, _free_port, csrf_token, eventually, process, sign_in, up
from support.mcp_support import answer, session
from support.operation_support import seed_paused
from support.web_helpers import step

from pgbus_web.auth import User, passwords, users
from pgbus_web.launch import main_group
from pgbus_web.plumbing import csrf
from pgbus_web.rules import states

DEFINITIONS = "pgbus_web.demo.workflows"
RUNS = 1_500
ADMIN = ("ada", "ada's password")
THRESHOLD = 1_000


def call(port: int, method: str, path: str, token: str, body=None):
    """(status, JSON body) of an API request to the process at *port*."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    headers = {"Authorization": f"Bearer {token}", "Accept": "application/json"}
    data = None
    if body is not None:
        data = json.dumps(body)
        headers["Content-Type"] = "application/json"
    try:
        connection.request(method, "/api/v1" + path, body=data, headers=headers)
        response = connection.getresponse()
        text = response.read().decode()
    finally:
        connection.close()
    return response.status, (json.loads(text) if text else None)


def cli(database_url, *args, env=None):
    return CliRunner().invoke(
        main_group, [*args, "--database-url", database_url], env=env or {}, catch_exceptions=False
    )


@pytest.fixture
def deployment(engine, database_url, tmp_path):
    """(port of A, port of B): two serve processes and a worker, signed in
    through a users file with an admin."""
    users_file = tmp_path / "users"
    users.write(users_file, {ADMIN[0]: User(ADMIN[0], "admin", passwords.hash_password(ADMIN[1], CHEAP))})
    env = {**os.environ, "PGBUS_DATABASE_URL": database_url, "PGBUS_WEB_SECRET_KEY": "one key"}
    env.pop("PGBUS_WEB_APPROVAL_THRESHOLD", None)
    ports = [_free_port(), _free_port()]
    with ExitStack() as stack:
        for label, port in zip("ab", ports, strict=True):
            log_path = tmp_path / f"serve-{label}.log"
            started = stack.enter_context(
                process(
                    [
                        sys.executable,
                        "-m",
                        "pgbus_web",
                        "serve",
                        "--port",
                        str(port),
                        "--users-file",
                        str(users_file),
                        "--definitions",
                        DEFINITIONS,
                        "--no-access-log",
                    ],
                    env,
                    log_path,
                )
            )
            eventually(lambda p=port, s=started, log=log_path: up(p, s, log), f"serve {label} answers /health")
        stack.enter_context(
            process(
                [
                    sys.executable,
                    "-m",
                    "pgbus_web",
                    "worker",
                    "--definitions",
                    DEFINITIONS,
                    "--poll-interval",
                    "0.2",
                    "--sweep-interval",
                    "0.5",
                ],
                env,
                tmp_path / "worker.log",
            )
        )
        yield ports[0], ports[1]


def operation(engine, operation_id):
    with engine.connect() as conn:
        return dict(
            conn.execute(sa.text("SELECT * FROM pgbus_web_operations WHERE id = :id"), {"id": operation_id})
            .mappings()
            .one()
        )


def test_the_approval_holds_at_every_door_of_a_deployment(deployment, engine, database_url):
    a, b = deployment
    admin, asker = token_for(engine, "root", "admin"), token_for(engine, "deploy-bot", "approver")
    approver, narrow = token_for(engine, "on-call", "approver"), token_for(engine, "refunds-lead", "viewer")
    seed_paused(engine, RUNS)
    status, body = call(
        a,
        "PUT",
        "/policy/approval",
        admin,
        {"value": {"threshold": THRESHOLD, "verbs": ["cancel"]}, "reason": "two pairs of eyes"},
    )
    assert status == 200, body
    status, _ = call(
        a,
        "PUT",
        "/policy/grants",
        admin,
        {
            "value": [{"to": "token:refunds-lead", "role": "approver", "classes": ["RefundWorkflow"]}],
            "reason": "refunds",
        },
    )
    assert status == 200
    cancel = {"verb": "cancel", "filters": {"status": "paused"}, "reason": "gateway gone", "confirmed": True}

    # Every door: B's API (A changed the policy), the command line with
    # an environment that says otherwise, MCP.
    status, by_api = call(b, "POST", "/operations", asker, cancel)
    assert status == 201 and by_api["operation"]["status"] == states.OPERATION_AWAITING_APPROVAL
    by_cli = cli(
        database_url,
        "bulk",
        "cancel",
        "--filter",
        "status=paused",
        "--reason",
        "gateway gone",
        "--yes",
        env={"PGBUS_WEB_TOKEN": asker, "PGBUS_WEB_APPROVAL_THRESHOLD": "999999999"},
    )
    assert by_cli.exit_code == 1 and "waits for another operator’s approval" in by_cli.output

    async def start(client):
        return answer(
            await client.call_tool(
                "start_operation",
                {"verb": "cancel", "filters": {"status": "paused"}, "reason": "gateway gone", "expected_runs": RUNS},
            )
        )

    by_mcp = session(database_url, "--allow-actions", "--token", asker, calls=start)
    assert by_mcp["operation"]["status"] == states.OPERATION_AWAITING_APPROVAL
    with engine.connect() as conn:
        made = conn.execute(
            sa.text("SELECT id, status, actor, requested_by FROM pgbus_web_operations ORDER BY id")
        ).all()
    assert [(row.status, row.actor, row.requested_by) for row in made] == [
        ("awaiting_approval", "api:deploy-bot", "token:deploy-bot"),
        ("awaiting_approval", "cli:deploy-bot", "token:deploy-bot"),
        ("awaiting_approval", "mcp:deploy-bot", "token:deploy-bot"),
    ]
    first = made[0].id

    # Its requester cannot approve it anywhere, whatever login name the shell claims;
    # break-glass never; an approver whose grant misses OrderWorkflow neither.
    assert call(a, "POST", f"/operations/{first}/approve", asker)[0] == 403
    assert (
        cli(
            database_url,
            "operations",
            "approve",
            str(first),
            env={"PGBUS_WEB_TOKEN": asker, "LOGNAME": "someoneelse", "USER": "someoneelse"},
        ).exit_code
        == 1
    )
    assert cli(database_url, "operations", "approve", str(first), env={"LOGNAME": "root"}).exit_code == 1
    status, refused = call(b, "POST", f"/operations/{first}/approve", narrow)
    assert status == 403 and "OrderWorkflow" in refused["detail"]
    assert operation(engine, first)["status"] == states.OPERATION_AWAITING_APPROVAL

    # Another approver, through A; the worker or either process does it.
    status, approved = call(a, "POST", f"/operations/{first}/approve", approver, {"reason": "filter checked"})
    assert status == 200 and approved["operation"]["approved_by"] == "api:on-call"
    for other in (made[1].id, made[2].id):
        status, body = call(b, "POST", f"/operations/{other}/cancel", asker, {"reason": "a duplicate"})
        assert status == 200
    done = eventually(
        lambda: operation(engine, first)["status"] == states.OPERATION_DONE and operation(engine, first),
        "the approved operation is done",
    )
    assert (done["moved"], done["actor"], done["reason"], done["approved_by"], done["approve_reason"]) == (
        RUNS,
        "api:deploy-bot",
        "gateway gone",
        "api:on-call",
        "filter checked",
    )
    assert [
        (operation(engine, other)["cancelled_by"], operation(engine, other)["cancel_reason"])
        for other in (made[1].id, made[2].id)
    ] == [("api:deploy-bot", "a duplicate")] * 2


def test_one_set_of_thresholds_for_both_processes_the_command_line_mcp_and_the_worker(
    deployment, engine, database_url, runs
):
    a, b = deployment
    viewer = token_for(engine, "grafana", "viewer")
    # A run waiting five minutes on a wait without a deadline (the worker
    # leaves it alone), and a step in progress for five minutes: neither
    # needs a person at the default thresholds (a day, ten minutes).
    waiting = runs.make(
        states.WAITING, step("await_shipment", "waiting", wait_for="shipment_confirmed", waiting_since=ago(minutes=5))
    )
    stalling = runs.make(states.RUNNING, step("reserve_stock", "in_progress", started_at=ago(minutes=5)))

    def waiting_groups(port) -> int:
        status, body = call(port, "GET", "/attention", viewer)
        assert status == 200, body
        return sum(group["count"] for group in body["groups"] if group["reason"] == states.WAITING_OVERDUE)

    def cli_matches() -> str:
        shown = cli(
            database_url, "bulk", "cancel", "--filter", f"reason={states.WAITING_OVERDUE}", "--reason", "r", "--dry-run"
        )
        assert shown.exit_code == 0, shown.output
        return shown.output.split(" runs match", 1)[0]

    async def mcp_preview(client):
        return answer(
            await client.call_tool(
                "preview_operation", {"verb": "cancel", "filters": {"reason": states.WAITING_OVERDUE}}
            )
        )

    assert (waiting_groups(a), waiting_groups(b), cli_matches()) == (0, 0, "0")
    assert session(database_url, calls=mcp_preview)["total"] == 0

    # Changed on A's Policy page by a signed-in admin: everything else follows within seconds.
    ada = Client()
    assert sign_in(ada, a, *ADMIN) == 303
    for key in ("waiting_threshold", "stall_threshold"):
        status, _, text = ada.get(a, "/policy")
        assert status == 200
        status, _, text = ada.post(
            a,
            f"/policy/{key}",
            {csrf.FIELD_NAME: csrf_token(text), "value": "120", "reason": "flag them sooner", "version": "0"},
        )
        assert status == 303, text
    eventually(lambda: waiting_groups(a) == 1 and waiting_groups(b) == 1, "both processes group the waiting run")
    assert cli_matches() == "1"
    assert session(database_url, calls=mcp_preview)["total"] == 1
    with engine.connect() as conn:
        listed = conn.execute(sa.text("SELECT workflow_id FROM pgbus_workflows WHERE status = 'waiting'")).scalars()
        assert list(listed) == [waiting]

    # The worker's sweep stalls the step at the policy's threshold too.
    def paused() -> bool:
        with engine.connect() as conn:
            return (
                conn.execute(
                    sa.text("SELECT status FROM pgbus_workflows WHERE workflow_id = :id"), {"id": stalling}
                ).scalar_one()
                == states.PAUSED
            )

    eventually(paused, "the worker's sweep stalls the five-minute step at a two-minute threshold")
