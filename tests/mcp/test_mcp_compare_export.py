"""pgbus-web mcp's compare_runs and export_runs, through a real MCP client
session over stdio (tests/test_mcp.py's): the same comparison and the same
export rows as the API gives, and the same refusals in the same words,
with nothing written."""

from __future__ import annotations

import csv
import io
import json

import pytest
from support.api_support import Api, token_for
from support.mcp_support import answer, refusal, session
from support.refusals import everything
from support.web_helpers import make_pair

from pgbus_web.models import workflow_export
from pgbus_web.rules import states


@pytest.fixture
def viewer(app, engine):
    return Api(app.test_client(), token_for(engine, "reader", "viewer"))


def _api(viewer, path, query):
    response = viewer.client.get(f"/api/v1{path}", query_string=query, headers=viewer.headers())
    return response


def _without_tokens(engine):
    # An API token records its own last use; every other row stays.
    return {table: rows for table, rows in everything(engine).items() if table != "pgbus_web_api_tokens"}


def test_compare_runs_answers_what_the_api_answers(database_url, runs, viewer):
    failed, done = make_pair(runs)

    async def calls(client):
        return (
            answer(await client.call_tool("compare_runs", {"a": failed[:8], "b": done})),
            answer(await client.call_tool("compare_runs", {"a": done, "b": failed})),
        )

    found, reversed_ = session(database_url, calls=calls)
    assert found["a"]["workflow_id"] == failed and found["b"]["workflow_id"] == done
    assert found["divergence"]["step_name"] == "issue_refund"
    assert found["divergence"]["a"]["error_class"] == "GatewayTimeout"
    assert {row["path"]: row["kind"] for row in found["arguments"]["changes"]} == {
        "amount": "changed",
        "items[1]": "added",
    }
    # The API's answer for the same two runs, whole.
    by_api = _api(viewer, "/runs/compare", {"a": failed[:8], "b": done})
    assert by_api.status_code == 200
    assert found == by_api.get_json()
    # Control: the other way round, B's side is the failed one.
    assert reversed_["b"]["workflow_id"] == failed and reversed_["divergence"]["b"]["status"] == "failed"


def test_compare_runs_refuses_as_the_api_does_and_writes_nothing(database_url, engine, runs, viewer):
    failed, done = make_pair(runs)
    asked = {
        "same": {"a": failed, "b": failed},
        "missing": {"a": failed, "b": "nope-nope-nope"},
        "blank": {"a": failed, "b": "  "},
        "nul": {"a": failed, "b": "ab\x00cd"},
        "too_long": {"a": failed, "b": "x" * 1001},
    }
    api_said = {}
    for case, query in asked.items():
        response = _api(viewer, "/runs/compare", query)
        assert response.status_code in (400, 404, 422), (case, response.status_code)
        api_said[case] = response.get_json()["detail"]
    before = _without_tokens(engine)

    async def calls(client):
        said = {case: refusal(await client.call_tool("compare_runs", query)) for case, query in asked.items()}
        said["unknown_argument"] = refusal(await client.call_tool("compare_runs", {"a": failed, "b": done, "c": "x"}))
        said["control"] = answer(await client.call_tool("compare_runs", {"a": failed, "b": done}))
        return said

    said = session(database_url, calls=calls)
    for case, sentence in api_said.items():
        assert said[case].endswith(sentence), (case, said[case], sentence)  # after the SDK's "Error executing tool"
    assert "same run" in said["same"] and "nope-nope-nope" in said["missing"]
    assert "'c'" in said["unknown_argument"] or "c" in said["unknown_argument"].split()
    assert said["control"]["divergence"]["step_name"] == "issue_refund"
    assert _without_tokens(engine) == before


@pytest.fixture
def made(runs):
    return {
        "paused": runs.make(
            states.PAUSED, arguments={"customer_id": 42, "note": '=HYPERLINK("x")'}, subject=("Order", "=1+1")
        ),
        "completed": runs.make(states.COMPLETED, arguments={"customer_id": 42}),
        "other": runs.make(states.FAILED, arguments={"customer_id": 7}),
    }


def test_export_runs_gives_the_apis_rows_and_says_when_it_was_cut(database_url, made, viewer):
    async def calls(client):
        return (
            answer(await client.call_tool("export_runs", {"format": "csv", "filters": {"arg.customer_id": 42}})),
            answer(await client.call_tool("export_runs", {"format": "ndjson", "filters": {"arg.customer_id": "42"}})),
            answer(
                await client.call_tool("export_runs", {"format": "csv", "filters": {"arg.customer_id": 42}, "limit": 1})
            ),
            answer(await client.call_tool("export_runs", {"format": "ndjson"})),
        )

    as_csv, as_ndjson, cut, everything_ = session(database_url, calls=calls)
    by_api = _api(viewer, "/runs/export", {"format": "csv", "arg.customer_id": "42"})
    assert by_api.status_code == 200
    # The same rows, byte for byte, as the API streams them (the ceiling is the same: no run came in between).
    assert as_csv["content"] == by_api.get_data(as_text=True)
    assert as_csv["ceiling_id"] == int(by_api.headers["X-Pgbus-Export-Ceiling-Id"])
    assert (as_csv["runs"], as_csv["complete"], as_csv["content_type"]) == (2, True, "text/csv; charset=utf-8")
    assert as_csv["filename"].startswith("pgbus-runs_arg.customer_id-42_") and as_csv["filename"].endswith(".csv")
    rows = list(csv.DictReader(io.StringIO(as_csv["content"])))
    assert [row["workflow_id"] for row in rows] == [made["paused"], made["completed"]]
    assert rows[0]["subject_id"] == "'=1+1"  # the formula escaped, as in every export
    assert list(rows[0]) == list(workflow_export.EXPORT_COLUMNS)
    lines = [json.loads(line) for line in as_ndjson["content"].splitlines()]
    assert [line["workflow_id"] for line in lines] == [made["paused"], made["completed"]]
    assert lines[0]["subject_id"] == "=1+1" and lines[0]["arguments"]["note"] == '=HYPERLINK("x")'
    # Cut at the limit: the first run only, and the answer says it is not the whole set.
    assert (cut["runs"], cut["complete"]) == (1, False)
    assert [row["workflow_id"] for row in csv.DictReader(io.StringIO(cut["content"]))] == [made["paused"]]
    # Control: no filter, every run.
    assert everything_["complete"] is True
    assert {json.loads(line)["workflow_id"] for line in everything_["content"].splitlines()} == set(made.values())


def test_export_runs_refuses_as_the_api_does_and_writes_nothing(database_url, engine, made, viewer):
    asked = {
        "unknown_filter": ("csv", {"workflw_class": "X"}),
        "format": ("xlsx", {}),
        "malformed_path": ("csv", {"arg.customer..id": "1"}),
        "long_value": ("csv", {"arg.customer_id": "9" * 201}),
        "bad_status": ("ndjson", {"status": "sleeping"}),
        "empty_value": ("csv", {"status": " "}),
    }
    api_said = {}
    for case, (fmt, filters) in asked.items():
        if case == "empty_value":
            continue  # a query string's blank value is no filter; a structured door refuses it (below)
        response = _api(viewer, "/runs/export", {"format": fmt, **filters})
        assert response.status_code == 400, (case, response.get_data(as_text=True))
        api_said[case] = response.get_json()["detail"]
    before = _without_tokens(engine)

    async def calls(client):
        said = {
            case: refusal(await client.call_tool("export_runs", {"format": fmt, "filters": filters}))
            for case, (fmt, filters) in asked.items()
        }
        said["unknown_argument"] = refusal(await client.call_tool("export_runs", {"format": "csv", "status": "failed"}))
        said["control"] = answer(
            await client.call_tool("export_runs", {"format": "csv", "filters": {"status": "failed"}})
        )
        return said

    said = session(database_url, calls=calls)
    for case, sentence in api_said.items():
        assert said[case].endswith(sentence), (case, said[case], sentence)  # after the SDK's "Error executing tool"
    assert "xlsx" in said["format"] and "workflw_class" in said["unknown_filter"]
    assert "status" in said["empty_value"]
    assert "status" in said["unknown_argument"]
    assert said["control"]["runs"] == 1 and made["other"] in said["control"]["content"]
    assert _without_tokens(engine) == before


def test_an_excerpt_stops_before_the_run_that_would_pass_its_characters(database, made):
    from pgbus_web.core import exports
    from pgbus_web.core.settings import Settings
    from pgbus_web.rules import run_filters

    filters = run_filters.parse_query({})
    whole = exports.excerpt(database.read, Settings(), filters, "csv")
    assert (whole.rows, whole.complete) == (3, True)
    header, first, second, third = whole.text.splitlines(keepends=True)
    # Room for the header and two runs, not the third: cut before it, whole lines only.
    cut = exports.excerpt(
        database.read, Settings(), filters, "csv", max_chars=len(header) + len(first) + len(second) + len(third) - 1
    )
    assert (cut.rows, cut.complete, cut.text) == (2, False, header + first + second)
    # Control: exactly enough room takes all three.
    enough = exports.excerpt(
        database.read, Settings(), filters, "csv", max_chars=len(header) + len(first) + len(second) + len(third)
    )
    assert (enough.rows, enough.complete) == (3, True)
