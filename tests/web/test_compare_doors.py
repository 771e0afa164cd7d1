"""Comparing two runs at the API (GET /api/v1/runs/compare) and the
command line (pgbus-web runs compare A B): the same core read as the page,
the same refusals in the same words, nothing written."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from support.api_support import Api, token_for
from support.refusals import everything
from support.web_helpers import make_pair

from pgbus_web.launch import main_group

DEFINITIONS = ("--definitions", "pgbus_web.demo.workflows")


@pytest.fixture
def viewer(app, engine):
    return Api(app.test_client(), token_for(engine, "grafana", "viewer"))


def cli(database_url, *args):
    return CliRunner().invoke(
        main_group, ["runs", "compare", "--database-url", database_url, *args], env={"COLUMNS": "200"}
    )


def test_the_api_answers_where_they_part(viewer, runs):
    failed, done = make_pair(runs)
    response = viewer.get(f"/runs/compare?a={failed[:8]}&b={done}")
    assert response.status_code == 200
    body = response.json_body
    assert body["a"]["workflow_id"] == failed and body["b"]["workflow_id"] == done
    assert body["divergence"]["kind"] == "step" and body["divergence"]["step_name"] == "issue_refund"
    assert body["divergence"]["a"]["error_class"] == "GatewayTimeout"
    assert body["divergence"]["b"]["status"] == "completed"
    assert {row["path"]: row["kind"] for row in body["arguments"]["changes"]} == {
        "amount": "changed",
        "items[1]": "added",
    }
    assert [row["step_name"] for row in body["steps"] if row["diverges"]] == ["issue_refund"]
    assert body["definition_changed"] is False


def test_the_api_refuses_as_the_page_does(viewer, client, engine, runs):
    failed, done = make_pair(runs)
    before = everything(engine)
    for query, status in (
        (f"a={failed}&b={failed}", 422),
        (f"a={failed}&b=nope-nope-nope", 404),
        (f"a={failed}", 400),
        (f"a={failed}&b={done}&x=1", 400),
        (f"a={failed}&b=%00", 400),
    ):
        answer = viewer.get(f"/runs/compare?{query}")
        page = client.get(f"/workflows/compare?{query}")
        assert answer.status_code == page.status_code == status, query
        assert answer.json_body["detail"] in page.get_data(as_text=True).replace("&#39;", "'"), query
    assert everything(engine) == before


def test_the_command_line_prints_where_they_part_and_json(database_url, runs):
    failed, done = make_pair(runs)
    shown = cli(database_url, failed, done, *DEFINITIONS)
    assert shown.exit_code == 0, shown.output
    first = shown.output.splitlines()[0]
    assert first.startswith("They part at step issue_refund: A failed") and "GatewayTimeout" in first, first
    assert "<- they part" in shown.output
    found = cli(database_url, failed[:8], done, "--json")
    assert found.exit_code == 0, found.output
    (body,) = [json.loads(line) for line in found.output.splitlines() if line.strip()]
    assert body["divergence"]["step_name"] == "issue_refund"


def test_the_command_line_refuses_with_the_refusal_tables_words(database_url, engine, runs):
    failed, _ = make_pair(runs)
    before = everything(engine)
    same = cli(database_url, failed, failed)
    assert same.exit_code == 2 and "same run" in same.output, same.output
    missing = cli(database_url, failed, "nope-nope-nope")
    assert missing.exit_code == 1 and "nope-nope-nope" in missing.output, missing.output
    assert everything(engine) == before
