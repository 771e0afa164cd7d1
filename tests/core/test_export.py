"""Exporting a whole filtered set (docs/search.md, Exporting runs): the
index's links, ``GET /api/v1/runs/export`` and ``pgbus-web runs export``
give every run the filters match, checked against the rows stored; the
ceiling keeps out a run created while the export streams; a CSV cell a
spreadsheet would read as a formula is escaped (and a plain one is not);
the answer streams, chunk by chunk; a refused filter or format is a 400
with its sentence."""

from __future__ import annotations

import csv
import io
import json
import re
from datetime import datetime

import pytest
import sqlalchemy as sa
from click.testing import CliRunner
from support.refusals import page_message
from support.web_helpers import make_app, step

from pgbus_web.core import exports
from pgbus_web.core.settings import Settings
from pgbus_web.i18n import force_locale, t
from pgbus_web.launch import main_group
from pgbus_web.models import workflow_export
from pgbus_web.rules import run_filters, states

FILENAME = re.compile(
    r'attachment; filename="pgbus-runs_(?P<filter>[A-Za-z0-9._-]+)_(?P<moment>\d{8}T\d{6}Z)\.(csv|ndjson)"'
)


@pytest.fixture
def made(runs):
    return {
        "paused": runs.make(
            states.PAUSED,
            step("capture_payment", "failed", error_class="TimeoutError"),
            arguments={"customer_id": 42, "lines": [{"sku": "A-1"}], "note": "ünïcødé"},
            idempotency_key="Checkout-1",
        ),
        "completed": runs.make(states.COMPLETED, arguments={"customer_id": "42"}, finished_at=None),
        "other": runs.make(states.FAILED, arguments={"customer_id": 7}),
    }


@pytest.fixture
def client(database):
    return make_app(database).test_client()


def stored(engine, ids) -> dict[str, dict]:
    with engine.connect() as conn:
        rows = (
            conn.execute(
                sa.text(
                    "SELECT id, workflow_id, workflow_class, status, subject_type, subject_id, idempotency_key,"
                    " latest_step_name, latest_error_class, created_at, arguments FROM pgbus_workflows"
                    " WHERE workflow_id = ANY(:ids)"
                ),
                {"ids": list(ids)},
            )
            .mappings()
            .all()
        )
    return {row["workflow_id"]: dict(row) for row in rows}


def csv_rows(text: str) -> tuple[list[str], list[dict[str, str]]]:
    reader = csv.reader(io.StringIO(text))
    header = next(reader)
    return header, [dict(zip(header, row, strict=True)) for row in reader]


def test_a_csv_export_holds_exactly_the_matching_runs_as_stored(client, engine, made):
    response = client.get("/workflows/export.csv", query_string={"arg.customer_id": "42"})
    assert response.status_code == 200 and response.mimetype == "text/csv"
    header, rows = csv_rows(response.get_data(as_text=True))
    assert header == list(workflow_export.EXPORT_COLUMNS)
    assert [row["workflow_id"] for row in rows] == [made["paused"], made["completed"]]  # oldest first
    expected = stored(engine, [made["paused"], made["completed"]])
    for row in rows:
        run = expected[row["workflow_id"]]
        assert int(row["id"]) == run["id"]
        for column in ("workflow_class", "status", "subject_type", "subject_id", "latest_step_name"):
            assert row[column] == (run[column] or ""), column
        assert row["idempotency_key"] == (run["idempotency_key"] or "")
        assert json.loads(row["arguments"]) == run["arguments"]
        assert datetime.fromisoformat(row["created_at"]) == run["created_at"]
        assert row["created_at"].endswith("+00:00") and "T" in row["created_at"]
    paused = next(row for row in rows if row["workflow_id"] == made["paused"])
    assert paused["stuck_reason"] == "paused_error" and paused["latest_error_class"] == "TimeoutError"
    match = FILENAME.fullmatch(response.headers["Content-Disposition"])
    assert match and match["filter"] == "arg.customer_id-42", response.headers["Content-Disposition"]


def test_an_ndjson_export_is_one_object_a_line_with_the_arguments_as_json(client, engine, made):
    response = client.get("/workflows/export.ndjson", query_string={"status": "paused"})
    assert response.status_code == 200 and response.mimetype == "application/x-ndjson"
    lines = [json.loads(line) for line in response.get_data(as_text=True).splitlines()]
    assert [line["workflow_id"] for line in lines] == [made["paused"]]
    assert list(lines[0]) == list(workflow_export.EXPORT_COLUMNS)
    assert lines[0]["arguments"] == stored(engine, [made["paused"]])[made["paused"]]["arguments"]
    assert "status-paused" in response.headers["Content-Disposition"]


def test_without_filters_every_run_and_the_filename_says_all(client, made):
    response = client.get("/workflows/export.csv")
    _, rows = csv_rows(response.get_data(as_text=True))
    assert {row["workflow_id"] for row in rows} == set(made.values())
    assert FILENAME.fullmatch(response.headers["Content-Disposition"])["filter"] == "all"


def test_a_run_created_while_the_export_streams_is_not_in_it(engine, runs, made):
    from pgbus_web.db import Database

    database = Database(engine)
    filters = run_filters.parse_query({"arg.customer_id": "42"})
    export = exports.export(database.read, Settings(), filters, "csv")
    chunks = iter(export.chunks)
    header = next(chunks)  # sent before the rows are asked for
    assert header.decode().startswith("id,workflow_id,")
    late = runs.make(states.COMPLETED, arguments={"customer_id": 42})
    _, rows = csv_rows((header + b"".join(chunks)).decode())
    assert {row["workflow_id"] for row in rows} == {made["paused"], made["completed"]}
    assert max(int(row["id"]) for row in rows) <= export.ceiling_id
    # Control: an export started after it has it.
    again = exports.export(database.read, Settings(), filters, "csv")
    _, rows = csv_rows(b"".join(again.chunks).decode())
    assert late in {row["workflow_id"] for row in rows}


FORMULAS = {
    "subject_id": "=1+1",
    "idempotency_key": "+SUM(A1)",
    "current_step": "-2+3",
    "workflow_class": "@cmd",
    "subject_type": "\tOrder",
}


def test_a_cell_a_spreadsheet_would_read_as_a_formula_starts_with_an_apostrophe(client, runs):
    risky = runs.make(
        states.COMPLETED,
        subject=(FORMULAS["subject_type"], FORMULAS["subject_id"]),
        workflow_class=FORMULAS["workflow_class"],
        idempotency_key=FORMULAS["idempotency_key"],
        current_step=FORMULAS["current_step"],
    )
    plain = runs.make(states.COMPLETED, subject=("Order", "a=b"), idempotency_key="key+1", current_step="step-2")
    _, rows = csv_rows(client.get("/workflows/export.csv").get_data(as_text=True))
    by_id = {row["workflow_id"]: row for row in rows}
    for column, value in FORMULAS.items():
        assert by_id[risky][column] == "'" + value, column
    # Control: the same characters inside a cell leave it as it is.
    assert (by_id[plain]["subject_id"], by_id[plain]["idempotency_key"]) == ("a=b", "key+1")
    assert by_id[plain]["subject_type"] == "Order"
    # NDJSON is data, not a spreadsheet: nothing added.
    lines = [json.loads(line) for line in client.get("/workflows/export.ndjson").get_data(as_text=True).splitlines()]
    assert next(line for line in lines if line["workflow_id"] == risky)["subject_id"] == "=1+1"


def test_the_answer_streams_chunk_by_chunk(client, engine):
    with engine.begin() as conn:
        conn.execute(
            sa.text(
                "INSERT INTO pgbus_workflows (workflow_id, workflow_class, status, arguments)"
                " SELECT gen_random_uuid()::text, 'OrderWorkflow', 'completed', jsonb_build_object('n', g)"
                " FROM generate_series(1, 3 * :chunk) AS g"
            ),
            {"chunk": exports.CHUNK_ROWS},
        )
    response = client.get("/workflows/export.csv", buffered=False)
    assert response.is_streamed
    chunks = iter(response.response)
    first = next(chunks)
    # The header goes out before the query has read a row.
    assert first.decode() == ",".join(workflow_export.EXPORT_COLUMNS) + "\r\n"
    rest = list(chunks)
    assert len(rest) >= 3
    assert sum(chunk.count(b"\r\n") for chunk in rest) == 3 * exports.CHUNK_ROWS
    response.close()


def test_the_api_and_the_command_line_export_the_same_rows(app, engine, database_url, made, tmp_path):
    from support.api_support import Api, token_for

    api = Api(app.test_client(), token_for(engine, "reader", "viewer"))  # a viewer may export
    answer = api.client.get(
        "/api/v1/runs/export", query_string={"format": "csv", "arg.customer_id": "42"}, headers=api.headers()
    )
    assert answer.status_code == 200, answer.get_data(as_text=True)
    assert FILENAME.fullmatch(answer.headers["Content-Disposition"])
    _, by_api = csv_rows(answer.get_data(as_text=True))
    target = tmp_path / "runs.csv"
    result = CliRunner().invoke(
        main_group,
        [
            "runs",
            "export",
            "--database-url",
            database_url,
            "--format",
            "csv",
            "--filter",
            "arg.customer_id=42",
            "-o",
            str(target),
        ],
    )
    assert result.exit_code == 0, result.output
    _, by_cli = csv_rows(target.read_text(encoding="utf-8"))
    assert (
        [row["workflow_id"] for row in by_api]
        == [row["workflow_id"] for row in by_cli]
        == [made["paused"], made["completed"]]
    )
    ndjson = CliRunner().invoke(
        main_group,
        ["runs", "export", "--database-url", database_url, "--format", "ndjson", "--filter", "status=failed"],
    )
    assert ndjson.exit_code == 0, ndjson.output
    assert [json.loads(line)["workflow_id"] for line in ndjson.output.splitlines()] == [made["other"]]


def test_a_refused_filter_or_format_is_a_400_with_its_sentence(app, client, engine, made):
    from support.api_support import Api, token_for

    api = Api(app.test_client(), token_for(engine, "reader", "viewer"))
    with force_locale("en"):
        unknown = t(
            "pgbus.workflows.filters.errors.unknown_name",
            name="workflw_class",
            known=", ".join(run_filters.NAMES + ("arg.<path>", "signal.<path>")),
        )
        bad_format = t("pgbus.workflows.filters.errors.choice", name="format", value="xlsx", allowed="csv, ndjson")
    page = client.get("/workflows/export.csv", query_string={"workflw_class": "X"})
    assert page.status_code == 400 and unknown in page_message(page)
    answer = api.client.get(
        "/api/v1/runs/export", query_string={"format": "csv", "workflw_class": "X"}, headers=api.headers()
    )
    assert answer.status_code == 400 and answer.get_json()["detail"] == unknown
    answer = api.client.get("/api/v1/runs/export", query_string={"format": "xlsx"}, headers=api.headers())
    assert answer.status_code == 400 and answer.get_json()["detail"] == bad_format
    # Control: the same filter spelled right is exported.
    assert client.get("/workflows/export.csv", query_string={"workflow_class": "OrderWorkflow"}).status_code == 200
