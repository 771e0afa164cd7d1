"""A step whose stored attempt number is the column's end (an integer:
2,147,483,647) cannot be attempted again: resume (a retry) and skip (a
skipped row) would need the next number. Every door (the run page, the
API, the command line, MCP) refuses with the refusal table's sentence,
not a 500 or the database's "integer out of range", and nothing is
written. The control, one number lower, is taken at each door: the new
attempt is the highest number that fits.
"""

from __future__ import annotations

import json

import pytest
import sqlalchemy as sa
from click.testing import CliRunner
from support.action_support import message, paused_on_capture
from support.api_support import Api, token_for
from support.refusals import everything

from pgbus_web.core.settings import Settings
from pgbus_web.core.words import verb_labels
from pgbus_web.demo import workflows as demo
from pgbus_web.i18n import t
from pgbus_web.launch import main_group
from pgbus_web.mcp.server import Tools
from pgbus_web.rules.limits import ATTEMPT_MAX

DOORS = ("page", "api", "cli", "mcp")
VERBS = ("resume", "skip")


def at_attempt(runs, engine, attempt: int) -> str:
    """A run paused on capture_payment's failure, that failure stored as
    attempt *attempt*."""
    workflow_id = paused_on_capture(runs)
    with engine.begin() as conn:
        conn.execute(
            sa.text(
                "UPDATE pgbus_workflow_steps SET attempt = :attempt "
                "WHERE workflow_id = :id AND step_name = 'capture_payment'"
            ),
            {"attempt": attempt, "id": workflow_id},
        )
    return workflow_id


def by_page(browser, verb: str, workflow_id: str) -> tuple[int, str]:
    response = browser.post(f"/workflows/{workflow_id}/{verb}", {"reason": "gateway is back"})
    return response.status_code, message(response) if response.status_code >= 400 else ""


def by_api(api: Api, verb: str, workflow_id: str) -> tuple[int, str]:
    response = api.client.post(
        f"/api/v1/runs/{workflow_id}/{verb}",
        data=json.dumps({"reason": "gateway is back"}),
        content_type="application/json",
        headers=api.headers(),
    )
    return response.status_code, response.get_json().get("detail", "") if response.status_code >= 400 else ""


def by_cli(database_url: str, verb: str, workflow_id: str) -> tuple[int, str]:
    result = CliRunner().invoke(
        main_group,
        [
            "runs",
            verb,
            "--database-url",
            database_url,
            workflow_id,
            "--reason",
            "gateway is back",
            "--definitions",
            "pgbus_web.demo.workflows",
        ],
    )
    return result.exit_code, result.output if result.exit_code else ""


def by_mcp(tools: Tools, verb: str, workflow_id: str) -> tuple[int, str]:
    from mcp.server.mcpserver.exceptions import ToolError

    try:
        tools.act_on_run(workflow_id, verb, "gateway is back")
    except ToolError as problem:
        return 1, str(problem)
    return 0, ""


@pytest.fixture
def doors(browser, app, engine, database_url):
    api = Api(app.test_client(), token_for(engine, "deploy-bot", "operator"))
    tools = Tools(engine, Settings(registry=demo.REGISTRY))
    return {
        "page": lambda verb, run: by_page(browser, verb, run),
        "api": lambda verb, run: by_api(api, verb, run),
        "cli": lambda verb, run: by_cli(database_url, verb, run),
        "mcp": lambda verb, run: by_mcp(tools, verb, run),
    }


@pytest.mark.parametrize("verb", VERBS)
@pytest.mark.parametrize("door", DOORS)
def test_an_attempt_at_the_columns_end_is_refused_with_a_sentence_and_nothing_changes(verb, door, doors, runs, engine):
    sentence = t(
        "pgbus.workflows.forms.errors.attempts_used_up", step="capture_payment", action=verb_labels.verb_label(verb)
    )
    full = at_attempt(runs, engine, ATTEMPT_MAX)
    before = everything(engine)
    status, said = doors[door](verb, full)
    assert everything(engine) == before, (door, verb)
    # A refusal of the run's state: 409 at the pages and the API, exit 1.
    assert status == {"page": 409, "api": 409, "cli": 1, "mcp": 1}[door], (door, said)
    assert sentence in " ".join(said.split()), (door, said)
    assert "out of range" not in said and "Traceback" not in said
    # The control: one number lower, the new attempt is the last that fits.
    room = at_attempt(runs, engine, ATTEMPT_MAX - 1)
    status, said = doors[door](verb, room)
    assert status in (200, 303, 0), (door, said)  # the page redirects to the run after acting
    with engine.connect() as conn:
        newest = conn.execute(
            sa.text(
                "SELECT max(attempt) FROM pgbus_workflow_steps "
                "WHERE workflow_id = :id AND step_name = 'capture_payment'"
            ),
            {"id": room},
        ).scalar_one()
    assert newest == ATTEMPT_MAX


def test_an_operation_refuses_the_run_at_the_columns_end_and_moves_the_others(runs, engine):
    # A chunk writes its runs in one statement: the overflow rolls it back
    # whole, and each run is then done on its own, with its own answer.
    from pgbus_web import defaults
    from pgbus_web.rules import run_filters
    from pgbus_web.runtime import operation_policy, operation_runner

    full = at_attempt(runs, engine, ATTEMPT_MAX)
    others = [at_attempt(runs, engine, 3) for _ in range(2)]
    operation = operation_policy.create(
        engine,
        run_filters.parse({"workflow_class": demo.ORDER}),
        "resume",
        None,
        reason="gateway back",
        actor="dashboard:alice",
        expected=None,
        registry=demo.REGISTRY,
        thresholds={"threshold": defaults.STALL_THRESHOLD, "waiting_threshold": defaults.WAITING_THRESHOLD},
    )
    runner = operation_runner.Runner(engine, demo.REGISTRY)
    for _ in range(1000):
        if runner.step() is None:
            break
    with engine.connect() as conn:
        done = conn.execute(
            sa.text("SELECT status, moved, refused FROM pgbus_web_operations WHERE id = :id"), {"id": operation["id"]}
        ).one()
        status = dict(conn.execute(sa.text("SELECT workflow_id, status FROM pgbus_workflows")).all())
        newest = conn.execute(
            sa.text("SELECT max(attempt) FROM pgbus_workflow_steps WHERE workflow_id = :id"), {"id": full}
        ).scalar_one()
    assert tuple(done) == ("done", 2, 1)
    assert status[full] == "paused" and newest == ATTEMPT_MAX
    # The control: the others were resumed by the same operation.
    assert [status[other] for other in others] == ["ready", "ready"]
