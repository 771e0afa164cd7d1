"""pgbus-web runs list/show/VERB/signal and pgbus-web attention: the real
command (click's runner) against the real database; tables for people cut
to the terminal, JSON Lines for scripts, exit codes 0 / 1 refused / 2 usage,
and every refusal leaves every table as it was."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from support.refusals import everything

from pgbus_web.launch import main_group

DEFINITIONS = ("--definitions", "pgbus_web.demo.workflows")


@pytest.fixture
def cli(database_url, engine):
    def invoke(*args, columns: int = 200):
        # --database-url after the command's name: runs VERB ..., attention ...
        head = 2 if args[0] == "runs" else 1
        return CliRunner().invoke(
            main_group, [*args[:head], "--database-url", database_url, *args[head:]], env={"COLUMNS": str(columns)}
        )

    return invoke


def json_lines(result) -> list[dict]:
    return [json.loads(line) for line in result.output.splitlines() if line.strip()]


def test_runs_list_as_a_table_and_as_json_lines_with_the_index_filters(cli, driver):
    paused = driver.paused_on_capture()
    done = driver.completed()
    table = cli("runs", "list")
    assert table.exit_code == 0, table.output
    header, *rows = table.output.splitlines()
    assert header.split()[:5] == ["ID", "CLASS", "STATUS", "STUCK", "STEP"]
    assert len(rows) == 2
    # Aligned: every row's status starts under the STATUS header.
    at = header.index("STATUS")
    assert sorted(row[at:].split()[0] for row in rows) == ["completed", "paused"]

    found = json_lines(cli("runs", "list", "--status", "paused", "--json"))
    assert [run["workflow_id"] for run in found] == [paused]
    assert found[0]["stuck_reason"] == "paused_error"
    assert found[0]["latest_step"]["step_name"] == "capture_payment"
    # A control: the other filter finds the other run, not this one.
    assert [run["workflow_id"] for run in json_lines(cli("runs", "list", "--status", "completed", "--json"))] == [done]
    assert (
        json_lines(cli("runs", "list", "--reason", "paused_error", "--class", "OrderWorkflow", "--json"))[0][
            "workflow_id"
        ]
        == paused
    )
    # The search box's q: a run by the prefix the table shows, in any case.
    assert [run["workflow_id"] for run in json_lines(cli("runs", "list", "--q", paused[:8].upper(), "--json"))] == [
        paused
    ]
    assert [run["workflow_id"] for run in json_lines(cli("runs", "list", "--q", done[:8], "--json"))] == [done]


def test_runs_list_pages_with_a_cursor_on_stderr(cli, driver):
    ids = [driver.completed() for _ in range(3)]
    first = cli("runs", "list", "--limit", "2", "--json")
    assert first.exit_code == 0
    assert [run["workflow_id"] for run in json_lines_of(first.stdout)] == ids[::-1][:2]
    cursor = first.stderr.strip().split()[-1]
    second = cli("runs", "list", "--limit", "2", "--before", cursor, "--json")
    assert [run["workflow_id"] for run in json_lines_of(second.stdout)] == [ids[0]]
    assert second.stderr == ""


def json_lines_of(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def test_a_table_is_cut_to_the_terminal_width(cli, runs, engine):
    from support.web_helpers import step

    runs.make("paused", step("capture_payment", "failed", error_class="E" * 50), workflow_class="A" * 80)
    narrow = cli("runs", "list", columns=70)
    assert narrow.exit_code == 0, narrow.output
    assert all(len(line) <= 70 for line in narrow.output.splitlines())
    assert "…" in narrow.output
    # A control: a wide terminal shows the whole class name.
    wide = cli("runs", "list", columns=400)
    assert "A" * 80 in wide.output and "…" not in wide.output


def test_bad_filters_and_usage_exit_2_and_change_nothing(cli, driver, engine):
    driver.paused_on_capture()
    before = everything(engine)
    for args in (
        ("runs", "list", "--status", "sleeping"),
        ("runs", "list", "--since", "3y"),
        ("runs", "list", "--from", "yesterday"),
        ("runs", "list", "--limit", "0"),
    ):
        result = cli(*args)
        assert result.exit_code == 2, (args, result.output)
        assert "Error" in result.output
    assert everything(engine) == before


def test_runs_show_as_text_and_json(cli, driver):
    workflow_id = driver.paused_on_capture()
    text = cli("runs", "show", workflow_id, *DEFINITIONS)
    assert text.exit_code == 0, text.output
    assert workflow_id in text.output
    assert "paused (stuck: paused_error)" in text.output
    assert "resume, resume_at, skip, cancel" in text.output
    [detail] = json_lines(cli("runs", "show", workflow_id, "--json", *DEFINITIONS))
    assert detail["run"]["workflow_id"] == workflow_id
    assert detail["available_actions"] == ["resume", "resume_at", "skip", "cancel", "signal"]
    assert [group["name"] for group in detail["steps"]][:2] == ["reserve_stock", "capture_payment"]
    # Without the definitions, the verbs that need them are not offered.
    [bare] = json_lines(cli("runs", "show", workflow_id, "--json"))
    assert bare["available_actions"] == ["cancel", "signal"]
    missing = cli("runs", "show", "no-such-run")
    # The refusal table's sentence, as the pages, the API and MCP say it.
    assert missing.exit_code == 1 and "No workflow run has the id no-such-run." in missing.output


def test_runs_resume_without_a_token_acts_as_break_glass_with_the_reason(cli, driver, engine):
    workflow_id = driver.paused_on_capture()
    # Without the definitions, the refusal names the option that fixes it,
    # and the run stays as it was.
    bare = cli("runs", "resume", workflow_id, "--reason", "gateway is back")
    assert bare.exit_code == 1 and "--definitions MODULE" in bare.output
    assert driver.status(workflow_id) == "paused"
    result = cli("runs", "resume", workflow_id, "--reason", "gateway is back", *DEFINITIONS)
    assert result.exit_code == 0, result.output
    # The sentence every door says once the verb went through, then the run as it is now.
    assert "Resumed: capture_payment goes on." in result.output
    assert f"resume: run {workflow_id} is ready now" in result.output
    assert driver.status(workflow_id) == "ready"
    resumed = [event for event in driver.event_rows(workflow_id) if event["event"] == "resumed"]
    assert [(event["actor"], event["reason"]) for event in resumed] == [("cli:break-glass", "gateway is back")]


def test_refused_verbs_exit_1_and_write_nothing(cli, driver, engine):
    paused = driver.paused_on_capture()
    done = driver.completed()
    before = everything(engine)
    refusals = [
        (("runs", "run_now", paused, "--reason", "r"), "it is paused"),  # wrong status
        (("runs", "resume", done, "--reason", "r", *DEFINITIONS), "it is completed"),
        (("runs", "resume", paused, "--reason", "r"), "OrderWorkflow"),  # definition not loaded here
        (("runs", "cancel", "no-such-run", "--reason", "r"), "no workflow run"),
    ]
    for args, said in refusals:
        result = cli(*args)
        assert result.exit_code == 1, (args, result.output)
        assert said in result.output, (args, result.output)
    assert everything(engine) == before


def test_bad_verb_input_exits_2_and_writes_nothing(cli, driver, engine):
    paused = driver.paused_on_capture()
    done = driver.completed()
    waiting = driver.waiting_for_shipment(order_id=5)
    before = everything(engine)
    for args in (
        ("runs", "resume", paused),  # no --reason
        ("runs", "resume_at", paused, "--reason", "r", "--at", "tomorrow", *DEFINITIONS),
        ("runs", "resume_at", paused, "--reason", "r", "--at", "2001-01-01T00:00:00Z", *DEFINITIONS),
        ("runs", "rerun", done, "--reason", "r", "--step", "no_such_step", *DEFINITIONS),
        ("runs", "signal", waiting, "shipment_confirmed", "--payload", "[1"),
        ("runs", "signal", waiting, "shipment_confirmed", "--payload", "[1, 2]"),
        ("runs", "explode", paused, "--reason", "r"),
    ):
        result = cli(*args)
        assert result.exit_code == 2, (args, result.output)
    assert everything(engine) == before


def test_runs_signal_delivers_and_the_run_goes_on(cli, driver):
    waiting = driver.waiting_for_shipment()
    result = cli("runs", "signal", waiting, "shipment_confirmed", "--payload", '{"tracking": "T1"}', "--json")
    assert result.exit_code == 0, result.output
    [answer] = json_lines(result)
    assert answer["duplicate"] is False
    assert answer["signal"]["payload"] == {"tracking": "T1"}
    assert answer["run"]["run"]["status"] == "ready"
    [signal] = driver.signals(waiting)
    assert signal["name"] == "shipment_confirmed"
    finished = cli("runs", "signal", driver.completed(), "shipment_confirmed")
    assert finished.exit_code == 1


def test_attention_lists_the_groups(cli, driver):
    assert cli("attention").output.strip() == "No run needs attention."
    driver.paused_on_capture()
    driver.paused_on_capture(order_id=7)
    table = cli("attention")
    assert table.exit_code == 0, table.output
    header, row = table.output.splitlines()
    assert header.split()[:4] == ["RUNS", "CLASS", "STEP", "REASON"]
    assert row.split()[:4] == ["2", "OrderWorkflow", "capture_payment", "paused_error"]
    assert "--class OrderWorkflow --step capture_payment --reason paused_error" in row
    [group] = json_lines(cli("attention", "--json", *DEFINITIONS))
    assert group["count"] == 2
    assert group["filters"]["reason"] == "paused_error"
    assert "resume" in group["actions"]


def test_odd_stored_values_never_break_a_table_or_json(cli, driver, engine):
    """Timestamps at ±infinity, JSON Python cannot read, a line break and a
    control character in a stored error: listed, shown and in JSON alike."""
    from support.web_helpers import set_column

    workflow_id = driver.paused_on_capture()
    set_column(engine, "pgbus_workflows", "updated_at", "infinity", workflow_id)
    set_column(engine, "pgbus_workflows", "created_at", "-infinity", workflow_id)
    set_column(engine, "pgbus_workflow_steps", "finished_at", "infinity", workflow_id)
    with engine.begin() as conn:
        conn.exec_driver_sql(
            "UPDATE pgbus_workflow_steps SET error_message = E'line one\\nline two\\x07' WHERE workflow_id = %s",
            (workflow_id,),
        )
        conn.exec_driver_sql(
            "UPDATE pgbus_workflows SET arguments = '{\"n\": 1e-400}'::jsonb WHERE workflow_id = %s", (workflow_id,)
        )
    listed = cli("runs", "list")
    assert listed.exit_code == 0, listed.output
    assert "infinity" in listed.output
    shown = cli("runs", "show", workflow_id)
    assert shown.exit_code == 0, shown.output
    assert "line one line two" in shown.output and "\x07" not in shown.output
    [detail] = json_lines(cli("runs", "show", workflow_id, "--json"))
    assert detail["run"]["updated_at"] == "infinity" and detail["run"]["created_at"] == "-infinity"
    assert detail["run"]["raw_json"] == ["arguments"]
    [row] = json_lines(cli("runs", "list", "--json"))
    assert row["updated_at"] == "infinity"
