"""pgbus-web mcp: a real MCP client session (the official SDK's Client over
stdio) with the real command, spawned as operators' MCP hosts spawn it,
against the real database. Read-only unless started with --allow-actions;
every act needs a reason and is recorded as the actor ``mcp``; every refusal
is a tool error that writes nothing."""

from __future__ import annotations

import pytest
from support.mcp_support import answer, refusal, session
from support.refusals import everything

from pgbus_web.i18n import t
from pgbus_web.mcp.server import ACT_TOOLS, READ_TOOLS


def test_a_read_only_session_lists_groups_finds_and_shows_runs(database_url, driver, engine):
    first = driver.paused_on_capture()
    driver.paused_on_capture(order_id=7)
    done = driver.completed()
    before = everything(engine)

    async def calls(client):
        tools = await client.list_tools()
        return (
            sorted(tool.name for tool in tools.tools),
            answer(await client.call_tool("needs_attention", {})),
            answer(await client.call_tool("find_runs", {"status": "paused"})),
            answer(await client.call_tool("find_runs", {"status": "completed"})),
            answer(await client.call_tool("show_run", {"workflow_id": first})),
            refusal(await client.call_tool("show_run", {"workflow_id": "no-such-run"})),
            refusal(await client.call_tool("find_runs", {"status": "sleeping"})),
            # Not offered: a read-only session has no acting tool.
            (await client.call_tool("act_on_run", {"workflow_id": first, "verb": "cancel", "reason": "r"})).is_error,
        )

    names, attention, paused, completed, shown, missing, bad_filter, act_refused = session(database_url, calls=calls)
    assert names == sorted(READ_TOOLS)
    [group] = attention["groups"]
    assert (group["count"], group["reason"], group["step_name"]) == (2, "paused_error", "capture_payment")
    assert "resume" in group["actions"]
    assert len(paused["runs"]) == 2 and {run["status"] for run in paused["runs"]} == {"paused"}
    assert [run["workflow_id"] for run in completed["runs"]] == [done]
    assert shown["run"]["workflow_id"] == first
    assert "resume" in shown["available_actions"]
    assert t("pgbus.workflows.show.not_found", workflow_id="no-such-run") in missing  # the pages' sentence
    assert "sleeping" in bad_filter or "status" in bad_filter
    assert act_refused
    assert everything(engine) == before


def test_acting_needs_allow_actions_and_a_reason_and_records_mcp(database_url, driver, engine):
    paused = driver.paused_on_capture()
    done = driver.completed()
    before = everything(engine)

    async def refusals(client):
        return (
            sorted(tool.name for tool in (await client.list_tools()).tools),
            refusal(await client.call_tool("act_on_run", {"workflow_id": paused, "verb": "resume", "reason": "  "})),
            refusal(await client.call_tool("act_on_run", {"workflow_id": done, "verb": "resume", "reason": "r"})),
            refusal(await client.call_tool("act_on_run", {"workflow_id": paused, "verb": "run_now", "reason": "r"})),
            refusal(await client.call_tool("act_on_run", {"workflow_id": paused, "verb": "explode", "reason": "r"})),
            refusal(await client.call_tool("act_on_run", {"workflow_id": "gone", "verb": "cancel", "reason": "r"})),
        )

    names, no_reason, finished, wrong_status, unknown, missing = session(
        database_url, "--allow-actions", calls=refusals
    )
    assert names == sorted(READ_TOOLS + ACT_TOOLS)
    assert "Give a reason" in no_reason  # the refusal table's sentence, as the pages say it
    assert "completed" in finished and "paused" in wrong_status
    assert t("pgbus.workflows.forms.errors.unknown_verb", verb="explode") in unknown
    assert "no workflow run" in missing
    assert everything(engine) == before

    async def resume(client):
        return answer(
            await client.call_tool("act_on_run", {"workflow_id": paused, "verb": "resume", "reason": "gateway is back"})
        )

    after = session(database_url, "--allow-actions", calls=resume)
    assert after["run"]["status"] == "ready"
    assert driver.status(paused) == "ready"
    resumed = [event for event in driver.event_rows(paused) if event["event"] == "resumed"]
    assert [(event["actor"], event["reason"]) for event in resumed] == [("mcp:break-glass", "gateway is back")]


def test_an_operation_is_previewed_then_done_with_the_expected_count(database_url, driver, engine):
    driver.paused_on_capture()
    driver.paused_on_capture(order_id=7)
    group_filters = {"workflow_class": "OrderWorkflow", "step": "capture_payment", "reason": "paused_error"}

    async def calls(client):
        shown = answer(await client.call_tool("preview_operation", {"verb": "cancel", "filters": group_filters}))
        stale = refusal(
            await client.call_tool(
                "start_operation",
                {"verb": "cancel", "filters": group_filters, "reason": "drop them", "expected_runs": 5},
            )
        )
        done = answer(
            await client.call_tool(
                "start_operation",
                {"verb": "cancel", "filters": group_filters, "reason": "drop them", "expected_runs": shown["total"]},
            )
        )
        return shown, stale, done

    shown, stale, done = session(database_url, "--allow-actions", calls=calls)
    assert (shown["total"], shown["fits"]) == (2, 2)
    # The refusal table's sentence, as the pages, the API and the command line say it.
    assert t("pgbus.operations.errors.count_changed", expected=5, total=2) in stale
    operation = done["operation"]
    assert (operation["status"], operation["moved"], operation["actor"], operation["reason"]) == (
        "done",
        2,
        "mcp:break-glass",
        "drop them",
    )
    assert sorted(status for (status,) in _statuses(engine)) == ["cancelled", "cancelled"]


def _statuses(engine):
    import sqlalchemy as sa

    with engine.connect() as conn:
        return conn.execute(sa.text("SELECT status FROM pgbus_workflows")).all()


@pytest.mark.parametrize("option", ["--allow-actions", None])
def test_the_command_needs_a_database(option):
    from click.testing import CliRunner

    from pgbus_web.launch import main_group

    result = CliRunner().invoke(
        main_group,
        ["mcp", "--database-url", "mysql://nope/x", *([option] if option else [])],
        env={"PGBUS_DATABASE_URL": ""},
    )
    assert result.exit_code == 1
    assert "Error" in result.output


def test_a_signal_operation_reaches_every_waiting_run(database_url, driver):
    first = driver.waiting_for_shipment()
    second = driver.waiting_for_shipment(order_id=8)
    filters = {"workflow_class": "OrderWorkflow", "status": "waiting"}

    async def calls(client):
        nameless = refusal(await client.call_tool("preview_operation", {"verb": "signal", "filters": filters}))
        shown = answer(
            await client.call_tool(
                "preview_operation", {"verb": "signal", "filters": filters, "signal_name": "shipment_confirmed"}
            )
        )
        done = answer(
            await client.call_tool(
                "start_operation",
                {
                    "verb": "signal",
                    "filters": filters,
                    "signal_name": "shipment_confirmed",
                    "payload": {"carrier": "x"},
                    "reason": "the carrier confirmed by mail",
                    "expected_runs": shown["total"],
                },
            )
        )
        return nameless, shown, done

    nameless, shown, done = session(database_url, "--allow-actions", calls=calls)
    assert "signal" in nameless.lower()
    assert shown["total"] == 2
    assert (done["operation"]["status"], done["operation"]["moved"]) == ("done", 2)
    for workflow_id in (first, second):
        assert driver.status(workflow_id) == "ready"
        assert [signal["payload"] for signal in driver.signals(workflow_id)] == [{"carrier": "x"}]


def test_send_signal_records_its_reason_on_the_audit_trail(database_url, driver):
    waiting = driver.waiting_for_shipment()

    async def calls(client):
        return answer(
            await client.call_tool(
                "send_signal",
                {
                    "workflow_id": waiting,
                    "name": "shipment_confirmed",
                    "payload": {"carrier": "x"},
                    "reason": "the carrier confirmed by mail",
                },
            )
        )

    sent = session(database_url, "--allow-actions", calls=calls)
    assert sent["duplicate"] is False and driver.status(waiting) == "ready"
    received = [event for event in driver.event_rows(waiting) if event["event"] == "signal_received"]
    assert [(event["actor"], event["reason"]) for event in received] == [
        ("mcp:break-glass", "the carrier confirmed by mail")
    ]


def test_with_a_token_mcp_acts_as_its_principal_under_the_policy(database_url, driver, engine):
    """The server acts as the principal of the token it is given: its
    actor, its grants (a refused verb is the pages' 403 sentence, nothing
    changed), and the policy's approval, which it cannot skip."""
    from support.api_support import token_for

    from pgbus_web.core import permissions, policy, problems
    from pgbus_web.i18n import force_locale

    policy.change(
        engine,
        "grants",
        [{"to": "token:assistant", "role": "operator", "classes": ["OrderWorkflow"], "verbs": ["resume", "cancel"]}],
        actor="test",
        reason="r",
    )
    policy.change(engine, "approval", {"threshold": 0, "verbs": ["cancel"]}, actor="test", reason="r")
    token = token_for(engine, "assistant", "viewer")
    first, second = driver.paused_on_capture(), driver.paused_on_capture(order_id=8)

    async def skip(client):
        return refusal(await client.call_tool("act_on_run", {"workflow_id": first, "verb": "skip", "reason": "r"}))

    before = everything(engine)
    skipped = session(database_url, "--allow-actions", "--token", token, calls=skip)
    with force_locale("en"):
        assert skipped.endswith(
            problems.refusal(
                permissions.NotPermitted(permissions.token("assistant", "viewer", door="mcp"), "skip", "OrderWorkflow")
            ).message
        )
    after = everything(engine)
    assert {k: v for k, v in after.items() if k != "pgbus_web_api_tokens"} == {
        k: v for k, v in before.items() if k != "pgbus_web_api_tokens"
    }

    async def calls(client):
        resumed = answer(
            await client.call_tool("act_on_run", {"workflow_id": first, "verb": "resume", "reason": "gateway back"})
        )
        waits = answer(
            await client.call_tool(
                "start_operation",
                {"verb": "cancel", "filters": {"status": "paused"}, "reason": "drop", "expected_runs": 1},
            )
        )
        return resumed, waits

    resumed, waits = session(database_url, "--allow-actions", "--token", token, calls=calls)
    assert resumed["run"]["status"] == "ready"
    assert [(e["actor"], e["reason"]) for e in driver.event_rows(first) if e["event"] == "resumed"] == [
        ("mcp:assistant", "gateway back")
    ]
    # Over the policy's threshold (0 runs) the cancel waits, whatever the door.
    assert waits["operation"]["status"] == "awaiting_approval"
    assert waits["operation"]["requested_by"] == "token:assistant"
    assert driver.status(second) == "paused"
