"""The CSV export's cells are made by the server (models.workflow_export.
_csv_line): read back by Python's csv reader each holds the stored text,
with the formula rule's apostrophe where a cell starts like a formula, for
texts with commas, quotes, line breaks, carriage returns and tabs, empty
texts, NULLs and arguments of every JSON type."""

from __future__ import annotations

import csv
import io
import json

import pytest
from support.web_helpers import make_app

from pgbus_web.models import workflow_export
from pgbus_web.rules import states

TRICKY = [
    "plain",
    "a,b",
    'say "hi"',
    "two\nlines",
    "cr\rhere",
    "=1+1",
    "+SUM(A1)",
    "-2",
    "@cmd",
    "\tOrder",
    "\rstart",
    '=HYPERLINK("x","y")',
    "",
    "ünï,cødé",
    "'quoted'",
    "a=b",
    "tail-",
]
ARGUMENTS = [{"customer_id": 42, "note": 'a "b", c\nd'}, -5, -0.5, 7, "=text", [1, "x"], True, {}]


@pytest.fixture
def client(database):
    return make_app(database).test_client()


def _expected(value: str | None) -> str:
    # The rule written out here, not read from the code under test.
    if value is None:
        return ""
    return "'" + value if value[:1] in ("=", "+", "-", "@", "\t", "\r") else value


def test_every_cell_reads_back_as_its_stored_text_with_the_formula_rule(client, runs):
    made = {}
    for number, text in enumerate(TRICKY):
        made[
            runs.make(
                states.COMPLETED,
                subject=("Order", text),
                idempotency_key=text or None,
                current_step=text or None,
                arguments={"n": number},
            )
        ] = text
    for number, value in enumerate(ARGUMENTS):
        made[runs.make(states.FAILED, arguments=value, subject=("Arg", str(number)))] = value
    response = client.get("/workflows/export.csv")
    assert response.status_code == 200
    body = response.get_data(as_text=True)
    assert body.startswith(",".join(workflow_export.EXPORT_COLUMNS) + "\r\n")
    rows = list(csv.DictReader(io.StringIO(body, newline="")))
    by_id = {row["workflow_id"]: row for row in rows}
    assert set(by_id) == set(made)
    for workflow_id, text in made.items():
        row = by_id[workflow_id]
        if row["subject_type"] == "Order":
            assert row["subject_id"] == _expected(text), repr(text)
            assert row["idempotency_key"] == _expected(text or None), repr(text)
            assert row["current_step"] == _expected(text or None), repr(text)
        else:
            cell = row["arguments"]
            if text is not None and not isinstance(text, (dict, list, str)) and json.dumps(text).startswith("-"):
                assert cell == "'" + json.dumps(text), cell
            else:
                assert json.loads(cell) == text, cell
    # Every line of the file ends with CRLF, a line break inside a cell stays as it was stored.
    assert body.count("\r\n") == len(rows) + 1 + sum(1 for text in TRICKY if "\r\n" in text)
    assert '"two\nlines"' in body and '"cr\rhere"' in body
