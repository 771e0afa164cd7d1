"""API tokens with an expiry and a scope (docs/api.md, Tokens): an expired
token is refused at every door that takes one (the API, the command
line's and the MCP server's --token), a read-only token never acts
whatever its role or the policy's grants, and both are listed."""

from __future__ import annotations

import hashlib

import sqlalchemy as sa
from click.testing import CliRunner
from support.action_support import paused_on_capture
from support.api_support import Api, put
from support.mcp_support import answer, refusal, session  # first: the MCP client binds stderr when imported
from support.policy_support import cli, set_rule
from support.refusals import everything

from pgbus_web.core import permissions, policy, tokens
from pgbus_web.launch import main_group
from pgbus_web.rules import states


def tokens_cli(database_url, *args):
    return CliRunner().invoke(main_group, ["tokens", *args, "--database-url", database_url], catch_exceptions=False)


def added(database_url, *args) -> str:
    made = tokens_cli(database_url, "add", *args)
    assert made.exit_code == 0, made.output
    return made.stdout.strip().splitlines()[-1]


def expire(engine, name):
    # As the clock passing the expiry would: the row's moment moved, not the process's.
    with engine.begin() as conn:
        conn.execute(
            sa.text(
                "UPDATE pgbus_web_api_tokens SET expires_at = now() - interval '1 second'"
                " WHERE name = :name AND revoked_at IS NULL"
            ),
            {"name": name},
        )


def status_of(engine, workflow_id):
    with engine.connect() as conn:
        return conn.execute(
            sa.text("SELECT status FROM pgbus_workflows WHERE workflow_id = :id"), {"id": workflow_id}
        ).scalar_one()


def test_an_expiring_token_is_kept_hashed_listed_and_refused_once_expired_at_every_door(
    database_url, engine, app, runs
):
    order = paused_on_capture(runs)
    token = added(database_url, "ci", "--role", "operator", "--expires-in", "30d")
    with engine.connect() as conn:
        row = conn.execute(
            sa.text("SELECT token_sha256, expires_at - created_at AS life, read_only FROM pgbus_web_api_tokens")
        ).one()
    assert row.token_sha256 == hashlib.sha256(token.encode()).hexdigest() and row.life.days == 30
    assert row.read_only is False
    listed = tokens_cli(database_url, "list").output.splitlines()
    assert listed[0].split("\t")[5:] == ["EXPIRES", "SCOPE", "FROM"]
    assert listed[1].split("\t")[5].endswith("UTC") and listed[1].split("\t")[6] == "grants"

    api = Api(app.test_client(), token)
    # Control: before its expiry the token reads and acts at the API and the command line.
    assert api.get("/runs").status_code == 200
    assert cli(database_url, "policy", "show", token=token).exit_code == 0

    expire(engine, "ci")
    before = everything(engine)
    refused = api.get("/runs")
    assert refused.status_code == 401 and "expired" in refused.json_body["detail"]
    assert api.post(f"/runs/{order}/cancel", {"reason": "r"}).status_code == 401
    by_cli = cli(database_url, "runs", "cancel", order, "--reason", "r", token=token)
    assert by_cli.exit_code == 1 and "expired" in by_cli.output
    by_mcp = CliRunner().invoke(
        main_group, ["mcp", "--allow-actions", "--database-url", database_url], env={"PGBUS_WEB_TOKEN": token}, input=""
    )
    assert by_mcp.exit_code == 1 and "expired" in by_mcp.output
    assert everything(engine) == before and status_of(engine, order) == states.PAUSED
    # An unknown token is told apart from an expired one.
    assert "expired" not in Api(app.test_client(), "pgbw_nothing").get("/runs").json_body["detail"]
    # The expired token gives its name back.
    assert added(database_url, "ci", "--role", "viewer") != token


def test_an_expiry_outside_its_bounds_is_refused_and_nothing_is_made(database_url, engine):
    for wrong in ("0d", "soon", "-1d", "99999w"):
        refused = tokens_cli(database_url, "add", "ci", "--role", "viewer", "--expires-in", wrong)
        assert refused.exit_code == 2, (wrong, refused.output)
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT count(*) FROM pgbus_web_api_tokens")).scalar_one() == 0
    # An unknown option is refused, not ignored.
    assert tokens_cli(database_url, "add", "ci", "--role", "viewer", "--scope", "all").exit_code == 2


def test_a_read_only_token_never_acts_whatever_its_role_or_grants(database_url, engine, app, runs):
    order = paused_on_capture(runs)
    set_rule(engine, "grants", [{"to": "token:ro-admin", "role": "admin", "classes": ["*"]}])
    read_only = added(database_url, "ro-admin", "--role", "admin", "--read-only")
    acting = added(database_url, "admin-bot", "--role", "admin")
    assert tokens_cli(database_url, "list").output.splitlines()[2].split("\t")[6] == "read-only"

    ro, control = Api(app.test_client(), read_only), Api(app.test_client(), acting)
    assert ro.get("/runs").status_code == 200  # it reads
    before = everything(engine)
    assert ro.post(f"/runs/{order}/cancel", {"reason": "r"}).status_code == 403
    current = ro.get("/policy").json_body
    version = next(rule["version"] for rule in current["rules"] if rule["key"] == "max_rate")
    assert put(ro, "/policy/max_rate", {"value": 10, "reason": "r", "version": version}).status_code == 403
    by_cli = cli(database_url, "runs", "cancel", order, "--reason", "r", token=read_only)
    assert by_cli.exit_code == 1
    refused_policy = cli(database_url, "policy", "set", "max_rate", "10", "--reason", "r", token=read_only)
    assert refused_policy.exit_code == 1
    assert everything(engine) == before and status_of(engine, order) == states.PAUSED
    # The core's answer, whatever door asks.
    kept = policy.current(engine)
    who = tokens.check(engine, read_only).principal(permissions.MCP)
    assert who.read_only and not permissions.acts_at_all(who, kept)
    assert not any(permissions.may(who, power, "OrderWorkflow", kept) for power in ("cancel", "policy", "reveal"))

    # Control: the same role without --read-only acts.
    assert control.post(f"/runs/{order}/cancel", {"reason": "r"}).status_code == 200
    assert status_of(engine, order) == states.CANCELLED


def test_a_running_mcp_server_refuses_its_token_once_revoked_or_expired(database_url, engine, runs):
    order = paused_on_capture(runs)
    revoked = added(database_url, "mcp-bot", "--role", "operator")
    expiring = added(database_url, "mcp-later", "--role", "operator", "--expires-in", "1d")

    def calls_then(change):
        async def calls(client):
            # Control: the token answers while it is live.
            found = answer(await client.call_tool("find_runs", {"status": "paused"}))
            change()
            return (
                found,
                refusal(await client.call_tool("find_runs", {"status": "paused"})),
                refusal(await client.call_tool("act_on_run", {"workflow_id": order, "verb": "cancel", "reason": "r"})),
            )

        return calls

    before = everything(engine)
    found, read, act = session(
        database_url, "--allow-actions", "--token", revoked, calls=calls_then(lambda: tokens.revoke(engine, "mcp-bot"))
    )
    assert [run["workflow_id"] for run in found["runs"]] == [order]
    assert "unknown or revoked" in read and "unknown or revoked" in act
    _, read, act = session(
        database_url, "--allow-actions", "--token", expiring, calls=calls_then(lambda: expire(engine, "mcp-later"))
    )
    assert "expired" in read and "expired" in act
    assert status_of(engine, order) == states.PAUSED
    assert {table: rows for table, rows in everything(engine).items() if table != "pgbus_web_api_tokens"} == {
        table: rows for table, rows in before.items() if table != "pgbus_web_api_tokens"
    }
