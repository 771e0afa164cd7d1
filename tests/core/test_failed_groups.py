"""Failed runs have a place beside the needs-attention groups: grouped by
class, step and error class of their latest step, with counts, a link
whose filter lists exactly that group's runs (checked against the
database), and "Run all again": an operation on that filter."""

from __future__ import annotations

from urllib.parse import parse_qsl, urlsplit

import pytest
import sqlalchemy as sa
from support.action_support import Browser, operator_app
from support.web_helpers import Runs, soup, step, text_of, utcnow

from pgbus_web.demo.workflows import REGISTRY
from pgbus_web.models import operation_rows
from pgbus_web.rules import states
from pgbus_web.runtime import operation_runner

URL = "/workflows/operations"


@pytest.fixture
def runs(engine) -> Runs:
    return Runs(engine)


def failed(runs, workflow_class, *attempts):
    return runs.make(states.FAILED, *attempts, workflow_class=workflow_class, finished_at=utcnow())


@pytest.fixture
def made(runs):
    refund_value = [
        failed(runs, "RefundWorkflow", step("issue_refund", "failed", error_class="ValueError")) for _ in range(3)
    ]
    refund_key = [failed(runs, "RefundWorkflow", step("issue_refund", "failed", error_class="KeyError"))]
    # Failed on its last attempt without an error class; an earlier attempt had one.
    no_error = [
        failed(
            runs,
            "OrderWorkflow",
            step("capture_payment", "failed", error_class="ValueError"),
            step("capture_payment", "failed", attempt=2),
        )
        for _ in range(2)
    ]
    # Near misses: the same class, step and error, but paused (a needs-attention
    # group's) or failed earlier on another step and last on this one.
    runs.make(
        states.PAUSED,
        step("issue_refund", "failed", error_class="ValueError"),
        workflow_class="RefundWorkflow",
        paused_at=utcnow(),
    )
    moved_on = failed(
        runs,
        "RefundWorkflow",
        step("issue_refund", "failed", error_class="ValueError"),
        step("notify_customer", "failed", error_class="ValueError"),
    )
    return {"refund_value": refund_value, "refund_key": refund_key, "no_error": no_error, "moved_on": [moved_on]}


def truth(engine, workflow_class, step_name, error_class) -> set[str]:
    """The group's runs as the database says, from the steps themselves
    (not the runs' latest_* columns the page reads)."""
    with engine.connect() as conn:
        return set(
            conn.execute(
                sa.text(
                    """
            SELECT w.workflow_id FROM pgbus_workflows w
            JOIN LATERAL (SELECT step_name, error_class FROM pgbus_workflow_steps
                          WHERE workflow_id = w.workflow_id ORDER BY id DESC LIMIT 1) s ON TRUE
            WHERE w.status = 'failed' AND w.workflow_class = :c AND s.step_name = :s
              AND s.error_class IS NOT DISTINCT FROM CAST(:e AS text)
            """
                ),
                {"c": workflow_class, "s": step_name, "e": error_class},
            ).scalars()
        )


def groups_of(page):
    found = {}
    for row in page.select("tr.pgbus-failed-group"):
        codes = [text_of(code) for code in row.select("code")]
        key = (text_of(row.select_one(".pgbus-class")), codes[0], codes[1] if len(codes) > 1 else None)
        found[key] = row
    return found


@pytest.fixture
def browser(database):
    return Browser(operator_app(database).test_client())


def test_failed_runs_are_grouped_beside_the_needs_attention_groups(browser, made):
    page = soup(browser.load("/workflows"))
    groups = groups_of(page)
    assert {key: text_of(row.select_one(".pgbus-group-link")) for key, row in groups.items()} == {
        ("RefundWorkflow", "issue_refund", "ValueError"): "3 runs",
        ("RefundWorkflow", "issue_refund", "KeyError"): "1 run",
        ("OrderWorkflow", "capture_payment", None): "2 runs",
        ("RefundWorkflow", "notify_customer", "ValueError"): "1 run",
    }
    # Biggest first, and none of them is a needs-attention group.
    assert list(groups)[0] == ("RefundWorkflow", "issue_refund", "ValueError")
    attention = page.select("tr.pgbus-attention-group")
    assert len(attention) == 1 and attention[0]["data-reason"] == states.PAUSED_ERROR


def test_each_groups_link_lists_exactly_its_runs(browser, engine, made):
    groups = groups_of(soup(browser.load("/workflows")))
    assert groups
    for (workflow_class, step_name, error_class), row in groups.items():
        href = row.select_one(".pgbus-group-link")["href"]
        expected = truth(engine, workflow_class, step_name, error_class)
        listed = soup(browser.client.get(href)).select("tr.pgbus-run-row")
        assert {node["data-workflow-id"] for node in listed} == expected, href
        assert len(expected) == int(text_of(row.select_one(".pgbus-group-link")).split()[0])
    # Control: the truth tells the groups apart (a near miss is not in them).
    assert truth(engine, "RefundWorkflow", "issue_refund", "ValueError") == set(made["refund_value"])
    assert truth(engine, "OrderWorkflow", "capture_payment", None) == set(made["no_error"])


def test_run_all_again_is_an_operation_on_the_groups_filter(browser, engine, made):
    row = groups_of(soup(browser.load("/workflows")))[("RefundWorkflow", "issue_refund", "ValueError")]
    form = row.select_one('form[data-verb="rerun"]')
    fields = {node["name"]: node.get("value", "") for node in form.select("input")}
    link_query = dict(parse_qsl(urlsplit(row.select_one(".pgbus-group-link")["href"]).query))
    assert dict(parse_qsl(fields["query"])) == link_query
    preview = browser.post(form["action"], fields)
    assert preview.status_code == 200
    assert soup(preview).select_one('input[name="expected"]')["value"] == "3"
    confirmed = browser.post(URL, {**fields, "expected": "3", "confirmed": "1", "reason": "gateway fixed"})
    assert confirmed.status_code == 303
    with engine.connect() as conn:
        (operation,) = operation_rows.recent(conn)
    assert operation["filters"] == link_query and operation["total"] == 3
    runner = operation_runner.Runner(engine, REGISTRY)
    while runner.step() is not None:
        pass
    with engine.connect() as conn:
        statuses = dict(conn.execute(sa.text("SELECT workflow_id, status FROM pgbus_workflows")).all())
    assert {statuses[run] for run in made["refund_value"]} == {states.READY}
    others = made["refund_key"] + made["no_error"] + made["moved_on"]
    assert {statuses[run] for run in others} == {states.FAILED}


def test_no_buttons_for_a_viewer_and_a_note_when_nothing_failed(database, runs):
    from support.web_helpers import make_app

    failed(runs, "RefundWorkflow", step("issue_refund", "failed", error_class="ValueError"))
    viewer = make_app(database, can_act=lambda request: False).test_client()
    page = soup(viewer.get("/workflows"))
    assert page.select("tr.pgbus-failed-group") and not page.select('form[data-verb="rerun"]')


def test_nothing_failed(browser):
    page = soup(browser.load("/workflows"))
    assert page.select("tr.pgbus-failed-group") == []
    assert page.select_one(".pgbus-failed .pgbus-empty") is not None
