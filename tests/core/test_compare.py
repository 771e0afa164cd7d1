"""Comparing two runs (core/compare.py, /workflows/compare): the
arguments' structural diff, the rule for where two runs part, the page,
"Compare with…" on the run page, and every refusal: a clear 4xx with its
sentence, nothing stored changed."""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from flask import url_for
from support.web_helpers import make_pair, soup, step, text_of

from pgbus_web.core import compare
from pgbus_web.core.compare import ADDED, CHANGED, EQUAL, REMOVED, CompareRefused, Side
from pgbus_web.models.values import RawJson
from pgbus_web.rules import states

# --- the diff ----------------------------------------------------------------


def kinds(a, b) -> dict[str, str]:
    return {row.path: row.kind for row in compare.diff(a, b)}


def test_equal_values_are_one_equal_row():
    assert kinds({"x": 1, "y": [1, {"z": None}]}, {"y": [1, {"z": None}], "x": 1}) == {"": EQUAL}


def test_nested_keys_are_named_by_their_path():
    a = {"customer": {"id": 42, "tier": "gold"}, "amount": 10}
    b = {"customer": {"id": 43, "tier": "gold", "vip": True}, "amount": 10}
    assert kinds(a, b) == {"customer.id": CHANGED, "customer.tier": EQUAL, "customer.vip": ADDED, "amount": EQUAL}


def test_removed_and_added_keys():
    rows = {row.path: row for row in compare.diff({"gone": 1, "kept": 2}, {"kept": 2, "new": 3})}
    assert rows["gone"].kind == REMOVED and rows["gone"].a == 1
    assert rows["new"].kind == ADDED and rows["new"].b == 3
    assert rows["kept"].kind == EQUAL


def test_arrays_compare_index_by_index():
    assert kinds({"items": [1, 2, 3]}, {"items": [1, 5]}) == {
        "items[0]": EQUAL,
        "items[1]": CHANGED,
        "items[2]": REMOVED,
    }
    assert kinds([{"sku": "a"}], [{"sku": "a"}, {"sku": "b"}]) == {"[0]": EQUAL, "[1]": ADDED}


@pytest.mark.parametrize("a, b", [(1, "1"), (True, 1), (0, False), (None, 0), ("", None), ([], {}), (1, [1])])
def test_a_change_of_type_is_a_change_even_when_python_calls_them_equal(a, b):
    (row,) = compare.diff({"k": a}, {"k": b})
    assert row.kind == CHANGED and row.type_changed, (a, b)


def test_an_int_and_a_float_of_one_value_are_equal_as_json_numbers():
    # jsonb stores 1 and 1.0 as one number; a control: 1 and 1.5 differ.
    assert kinds({"k": 1}, {"k": 1.0}) == {"": EQUAL}
    (row,) = compare.diff({"k": 1}, {"k": 1.5})
    assert row.kind == CHANGED and not row.type_changed


def test_odd_keys_are_quoted_in_the_path():
    assert kinds({"a b": 1, "é": 1}, {"a b": 2, "é": 2}) == {'["a b"]': CHANGED, '["é"]': CHANGED}


def test_stored_values_python_cannot_read_compare_as_their_text():
    assert kinds(RawJson("[1e999]"), RawJson("[1e999]")) == {"": EQUAL}
    assert kinds(RawJson("[1e999]"), {"a": 1}) == {"": CHANGED}
    assert kinds(None, {"a": 1}) == {"": CHANGED}


def test_huge_arguments_are_cut_to_the_row_limit():
    a = {f"k{i}": i for i in range(compare.DIFF_ROWS_LIMIT * 2)}
    b = {key: value + 1 for key, value in a.items()}
    shaped = compare.arguments_diff(a, b)
    assert len(shaped["changes"]) == compare.DIFF_ROWS_LIMIT
    assert shaped["left_out"] == compare.DIFF_ROWS_LIMIT


def test_deep_nesting_stops_at_the_depth_limit():
    a = b = 0
    for _ in range(compare.DIFF_DEPTH_LIMIT + 10):
        a, b = {"n": a}, {"n": b}
    b_deep = b
    for _ in range(compare.DIFF_DEPTH_LIMIT + 10):
        b_deep = b_deep["n"] if isinstance(b_deep["n"], dict) else b_deep
    b_deep["n"] = 1
    (row,) = compare.diff(a, b)
    assert row.kind == CHANGED and row.path.count(".") == compare.DIFF_DEPTH_LIMIT - 1


# --- where they part -------------------------------------------------------------


def side(status, error_class=None, attempts=1):
    return Side(attempts=attempts, status=status, error_class=error_class)


def test_the_parting_rule():
    assert not compare.parts_at(side("completed"), side("completed"))
    # More attempts to the same end is not parting.
    assert not compare.parts_at(side("completed", attempts=3), side("completed"))
    assert compare.parts_at(side("failed", "Timeout"), side("completed"))
    assert compare.parts_at(side("failed", "Timeout"), side("failed", "Declined"))
    assert compare.parts_at(Side(), side("completed"))
    assert not compare.parts_at(Side(), Side())


def test_the_step_order_is_the_definitions_then_first_attempts():
    named = lambda *names: [{"name": name} for name in names]  # noqa: E731
    assert compare.step_order(named("b", "x"), named("y", "b"), ("a", "b")) == ["a", "b", "x", "y"]
    assert compare.step_order(named("b", "x"), named("y", "b")) == ["b", "x", "y"]


def test_two_runs_part_at_the_first_step_that_ended_differently(engine, app, runs):
    failed, done = make_pair(runs)
    with engine.connect() as conn:
        found = compare.compare(conn, app.extensions["pgbus_web"].settings, failed, done)
    assert found.divergence.name == "issue_refund"
    assert (found.divergence.a.status, found.divergence.a.error_class, found.divergence.a.attempts) == (
        "failed",
        "GatewayTimeout",
        2,
    )
    assert found.divergence.a.error_line == "gateway did not answer"
    assert found.divergence.b.status == "completed"
    assert [row.name for row in found.steps] == ["validate_refund", "issue_refund", "notify_customer"]
    assert not found.digest_changed and found.same_class


def test_two_runs_that_ended_alike_do_not_diverge(engine, app, runs):
    a = runs.make(
        states.COMPLETED,
        step("validate_refund", "completed"),
        step("issue_refund", "completed"),
        workflow_class="RefundWorkflow",
        arguments={"customer_id": 1},
    )
    b = runs.make(
        states.COMPLETED,
        step("validate_refund", "completed"),
        step("issue_refund", "completed"),
        workflow_class="RefundWorkflow",
        arguments={"customer_id": 1},
    )
    with engine.connect() as conn:
        found = compare.compare(conn, app.extensions["pgbus_web"].settings, a, b)
    assert found.divergence is None and not found.diverges
    assert found.arguments["identical"]


def test_no_step_parting_but_another_status_is_said(engine, app, runs):
    a = runs.make(states.COMPLETED, step("validate_refund", "completed"), workflow_class="RefundWorkflow")
    b = runs.make(states.CANCELLED, step("validate_refund", "completed"), workflow_class="RefundWorkflow")
    with engine.connect() as conn:
        found = compare.compare(conn, app.extensions["pgbus_web"].settings, a, b)
    assert found.divergence is None and found.status_differs and found.diverges


# --- the page ---------------------------------------------------------------------


def test_the_page_names_where_they_part_in_words(client, runs):
    failed, done = make_pair(runs)
    response = client.get(f"/workflows/compare?a={failed}&b={done}")
    assert response.status_code == 200
    page = soup(response)
    verdict = page.select_one(".pgbus-compare-verdict")
    assert verdict["data-step"] == "issue_refund" and verdict["role"] == "status"
    said = text_of(verdict)
    assert "issue_refund" in said and "GatewayTimeout" in said and "Completed" in said, said
    marked = page.select("tr.pgbus-compare-parts")
    assert [row["data-step"] for row in marked] == ["issue_refund"]
    assert "They part here" in text_of(marked[0])
    changes = {text_of(row.th): row["data-kind"] for row in page.select("tr.pgbus-compare-change")}
    assert changes == {"amount": "changed", "items[1]": "added"}
    equal = text_of(page.select_one(".pgbus-compare-equal"))
    assert "customer_id" in equal and "items[0]" in equal
    for table in page.select("table.pgbus-compare-arguments, table.pgbus-compare-steps, table.pgbus-compare-runs"):
        assert table.caption is not None and table.select("th[scope=col]")
    assert page.select_one(".pgbus-compare-digest")["data-digest-changed"] == "no"


def test_the_page_of_runs_that_do_not_diverge_says_so(client, runs):
    a = runs.make(states.COMPLETED, step("validate_refund", "completed"), workflow_class="RefundWorkflow")
    b = runs.make(states.COMPLETED, step("validate_refund", "completed"), workflow_class="RefundWorkflow")
    page = soup(client.get(f"/workflows/compare?a={a}&b={b}"))
    assert page.select_one(".pgbus-compare-verdict")["data-diverges"] == "none"
    assert not page.select("tr.pgbus-compare-parts")
    assert page.select_one(".pgbus-compare-identical") is not None


def test_a_changed_definition_is_shown(client, runs):
    failed, done = make_pair(runs, definition_digest="0123456789abcdef")
    page = soup(client.get(f"/workflows/compare?a={failed}&b={done}"))
    assert page.select_one(".pgbus-compare-digest")["data-digest-changed"] == "yes"
    assert "0123456789abcdef" in text_of(page.select_one("table.pgbus-compare-runs"))


def test_short_ids_are_taken_as_the_run_page_takes_them(client, runs):
    failed, done = make_pair(runs)
    response = client.get(f"/workflows/compare?a={failed[:8]}&b={done[:8]}")
    assert response.status_code == 200
    assert soup(response).select_one(".pgbus-compare-verdict")["data-step"] == "issue_refund"


def test_the_page_in_german(client, runs):
    failed, done = make_pair(runs)
    page = soup(client.get(f"/workflows/compare?a={failed}&b={done}", headers={"Accept-Language": "de"}))
    assert "Sie gehen bei Schritt" in text_of(page.select_one(".pgbus-compare-verdict"))


def test_odd_stored_values_do_not_break_the_page(engine, client, runs):
    a = runs.make(
        states.FAILED,
        step("validate_refund", "failed", error_class=None, error_message=None),
        workflow_class="RefundWorkflow",
        arguments={"x": 1},
    )
    b = runs.make(
        states.COMPLETED,
        step("validate_refund", "completed"),
        workflow_class="NoSuchClass",
        arguments={"x": "y" * 200_000, "nested": {"deep": [None, {"k": [1, 2, 3]}]}},
    )
    c = runs.make(states.COMPLETED, workflow_class="RefundWorkflow")
    with engine.begin() as conn:
        conn.execute(
            sa.text(
                "UPDATE pgbus_workflows SET arguments = CAST(:odd AS jsonb), definition_digest = NULL,"
                " finished_at = 'infinity' WHERE workflow_id = :id"
            ),
            {"odd": "[1e999, null]", "id": a},
        )
        conn.execute(sa.text("UPDATE pgbus_workflows SET arguments = 'null' WHERE workflow_id = :id"), {"id": c})
    for x, y in ((a, b), (b, a), (a, c), (c, b)):
        response = client.get(f"/workflows/compare?a={x}&b={y}")
        assert response.status_code == 200, (x, y)
        assert len(response.get_data()) < 1_000_000
    page = soup(client.get(f"/workflows/compare?a={a}&b={b}"))
    assert page.select_one(".pgbus-compare-classes") is not None


# --- "Compare with…" on the run page ---------------------------------------------


def test_the_run_page_offers_the_last_completed_run_of_its_class(app, client, runs):
    failed, older = make_pair(runs)
    _, newer = make_pair(runs)
    # Completed but of another class, and a newer run not completed: neither is offered.
    runs.make(states.COMPLETED, workflow_class="OrderWorkflow")
    runs.make(states.FAILED, workflow_class="RefundWorkflow")
    page = soup(client.get(f"/workflows/{failed}"))
    form = page.select_one("form.pgbus-compare-with")
    with app.test_request_context():
        assert form["action"] == url_for("pgbus_web.compare")
        assert page.select_one("a.pgbus-compare-last")["href"] == url_for("pgbus_web.compare", a=failed, b=newer)
    assert form.select_one("input[name=a]")["value"] == failed
    field = form.select_one("input[name=b]")
    assert form.select_one(f"label[for={field['id']}]") is not None
    # The newest completed run itself is offered the one before it.
    page = soup(client.get(f"/workflows/{newer}"))
    with app.test_request_context():
        assert page.select_one("a.pgbus-compare-last")["href"] == url_for("pgbus_web.compare", a=newer, b=older)


def test_a_class_with_no_other_completed_run_offers_only_the_field(client, runs):
    only = runs.make(states.COMPLETED, workflow_class="RefundWorkflow")
    page = soup(client.get(f"/workflows/{only}"))
    assert page.select_one("a.pgbus-compare-last") is None
    assert page.select_one("form.pgbus-compare-with input[name=b]") is not None


def test_the_last_completed_read_walks_the_class_index(engine, runs):
    runs.make(states.COMPLETED, workflow_class="RefundWorkflow")
    # This table's statistics, not those an earlier test's big table left.
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.exec_driver_sql("ANALYZE pgbus_workflows")
    statement = (
        "SELECT workflow_id FROM pgbus_workflows WHERE workflow_class = 'RefundWorkflow'"
        " AND status = 'completed' AND workflow_id <> 'x' ORDER BY id DESC LIMIT 1"
    )

    def plan(*dropped: str) -> str:
        # On a table this small the planner may take any index and sort one
        # row; with scans and sorts priced out, it shows the walk it would take
        # on a big one: an index range on the class (or the status) in id order.
        with engine.connect() as conn, conn.begin():
            conn.execute(sa.text("SET LOCAL enable_seqscan = off"))
            conn.execute(sa.text("SET LOCAL enable_sort = off"))
            for index in dropped:
                conn.execute(sa.text(f"DROP INDEX {index}"))
            text = "\n".join(row[0] for row in conn.execute(sa.text("EXPLAIN " + statement)))
            conn.rollback()
        return text

    def bounded(text: str) -> bool:
        conds = [line for line in text.splitlines() if "Index Cond" in line]
        return "Sort" not in text and any("workflow_class" in c or "status" in c for c in conds)

    assert bounded(plan()), plan()
    # The control: without the indexes that lead with the class or the status,
    # the only way left in id order is the whole primary key, unbounded.
    bare = plan("pgbus_workflows_class_id", "pgbus_workflows_status_id", "pgbus_workflows_class_status")
    assert not bounded(bare), bare


# --- refusals ---------------------------------------------------------------------


def tables(engine) -> dict[str, list]:
    with engine.connect() as conn:
        return {
            name: [tuple(row) for row in conn.execute(sa.text(f"SELECT * FROM {name} ORDER BY 1"))]
            for name in ("pgbus_workflows", "pgbus_workflow_steps", "pgbus_workflow_events")
        }


def test_every_bad_query_is_a_clear_refusal_that_changes_nothing(engine, client, runs):
    failed, done = make_pair(runs)
    runs.make(states.COMPLETED, workflow_id="abcdef01-1", workflow_class="RefundWorkflow")
    runs.make(states.COMPLETED, workflow_id="abcdef01-2", workflow_class="RefundWorkflow")
    before = tables(engine)
    cases = {
        f"a={failed}&b={failed}": (422, "same run"),
        f"a={failed}&b={failed[:8]}": (422, "same run"),
        f"a={failed}&b=no-such-run-at-all": (404, "no-such-run-at-all"),
        f"a={failed}&b=%00x": (400, "not a run id"),
        f"a={failed}&b=" + "x" * (compare.ID_LIMIT + 1): (400, "not a run id"),
        f"a={failed}": (400, "b is missing"),
        f"b={done}": (400, "a is missing"),
        f"a={failed}&b=": (400, "b is missing"),
        "": (400, "a is missing"),
        f"a={failed}&b={done}&c=1": (400, "c is not a parameter"),
        f"a={failed}&b={done}&b={done}": (400, "more than once"),
        f"a={failed}&b=abcdef01": (400, "more than one run"),
    }
    for query, (status, words) in cases.items():
        response = client.get(f"/workflows/compare?{query}")
        assert response.status_code == status, query
        assert words in text_of(soup(response).select_one("main") or soup(response)), query
    assert tables(engine) == before
    # The control: the same two runs, asked well, are compared; the
    # language every page takes is no unknown parameter.
    assert client.get(f"/workflows/compare?a={failed}&b={done}").status_code == 200
    assert client.get(f"/workflows/compare?a={failed}&b={done}&locale=ja").status_code == 200


def test_refusals_come_from_the_refusal_table():
    from pgbus_web.core import problems

    for reason, status in (
        (CompareRefused.MISSING, 400),
        (CompareRefused.UNKNOWN, 400),
        (CompareRefused.REPEATED, 400),
        (CompareRefused.MALFORMED, 400),
        (CompareRefused.AMBIGUOUS, 400),
        (CompareRefused.SAME, 422),
        (CompareRefused.NOT_FOUND, 404),
    ):
        assert problems.refusal(CompareRefused(reason, "a", "x")).status == status
