"""A filtered set of runs as rows, JSON objects or CSV lines made by the
server, streamed through a server-side cursor (docs/search.md, Exporting
runs); core/exports.py writes them out.
"""

from __future__ import annotations

from collections.abc import Generator, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ..rules import stuck

# The columns of an export (docs/search.md, Exporting runs): the run's own,
# its stuck reason as the index gives it, its latest step's name and error
# class, and its arguments.
EXPORT_COLUMNS = (
    "id",
    "workflow_id",
    "workflow_class",
    "status",
    "stuck_reason",
    "current_step",
    "latest_step_name",
    "latest_error_class",
    "subject_type",
    "subject_id",
    "idempotency_key",
    "definition_digest",
    "created_at",
    "started_at",
    "paused_at",
    "finished_at",
    "updated_at",
    "arguments",
)


def _moment(column: str) -> str:
    # ISO 8601 as JSON writes it (2026-03-01T14:05:00.123456+00:00): the
    # same text in a CSV cell as in an NDJSON line, made by the server.
    return f"to_json({column}) #>> '{{}}'"


# The export's columns whose text never needs a CSV cell's quotes or its
# formula escape (digits, a moment, one of a few keys).
_CSV_PLAIN = frozenset(
    ("id", "status", "stuck_reason", "created_at", "started_at", "paused_at", "finished_at", "updated_at")
)
# What a CSV cell may not start with: a spreadsheet reads it as a formula
# (OWASP's list, the tab and carriage return included).
CSV_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def _csv_cell(text: str) -> str:
    """The CSV cell of *text* (an SQL text expression, cheap to repeat):
    a text that starts like a formula gets a leading apostrophe, one that
    holds a comma, a quote or a line break is quoted (its quotes doubled),
    NULL is empty. The usual text, none of these, is given as it is after
    one look at its first character and four searches."""
    codes = ", ".join(str(ord(start)) for start in CSV_FORMULA_STARTS)
    escaped = f"CASE WHEN ascii({text}) IN ({codes}) THEN '''' || {text} ELSE {text} END"
    special = (
        f"""strpos({text}, ',') > 0 OR strpos({text}, '"') > 0"""
        f" OR strpos({text}, E'\\n') > 0 OR strpos({text}, E'\\r') > 0"
    )
    return (
        f"""CASE WHEN {text} IS NULL THEN '' WHEN {special} THEN '"' || replace({escaped}, '"', '""') || '"'"""
        f" WHEN ascii({text}) IN ({codes}) THEN '''' || {text} ELSE {text} END"
    )


def _csv_line(values: Mapping[str, str]) -> str:
    """The SELECT list that makes each run one CSV line (CRLF ended) on the
    server, with _csv_cell's escapes, as Python's csv writer writes them.
    The arguments (JSON, made text once) are always quoted: an object's
    keys hold quotes anyway; a negative number alone gets the apostrophe."""
    cells = []
    for key, value in values.items():
        if key == "arguments":
            text = f"({value})::text"
            escaped = (
                f"CASE WHEN jsonb_typeof({value}) = 'number' AND {value} < '0'::jsonb"
                f" THEN '''' || {text} ELSE {text} END"
            )
            cells.append(f"""coalesce('"' || replace({escaped}, '"', '""') || '"', '')""")
        elif key in _CSV_PLAIN:
            text = _moment(value) if key.endswith("_at") else f"({value})::text"
            cells.append(f"coalesce({text}, '')")
        else:
            cells.append(_csv_cell(value))
    return " || ',' || ".join(cells) + " || E'\\r\\n'"


def export_rows(
    conn: Connection,
    *,
    where: str,
    binds: Mapping[str, Any],
    ceiling_id: int,
    now: datetime,
    threshold: timedelta,
    waiting_threshold: timedelta,
    as_json: bool = False,
    as_csv: bool = False,
    batch: int = 2000,
    limit: int | None = None,
    redact: tuple[str, ...] = (),
) -> Generator[Sequence[Any], None, None]:
    """Every run page_where's *where* matches with an id up to *ceiling_id*
    (the first *limit* of them, when given),
    oldest first, in lists of up to *batch*: each run a row of
    EXPORT_COLUMNS as text (None for NULL;
    moments ISO 8601, the arguments their JSON), or with *as_json* one JSON
    object's text with those keys in that order, or with *as_csv* its CSV
    line (_csv_line). Read through a
    server-side cursor *batch* rows at a time, so memory does not grow with
    the count; the server writes the text, so each row costs Python little.
    A generator: the statement runs when the first row is asked for, and
    *conn* must stay open until the last. *redact*: the policy's redaction
    rules (their text), applied to the arguments by the server
    (pgbus_web_redact, schema/v16.sql) before any format is made of them."""
    given = stuck.params(now, threshold, waiting_threshold)
    reasons = "\n                 ".join(stuck.reason_sql(stuck.rules_for(given)))
    values = {
        "id": "w.id",
        "workflow_id": "w.workflow_id",
        "workflow_class": "w.workflow_class",
        "status": "w.status",
        "stuck_reason": f"CASE {reasons} END",
        "current_step": "w.current_step",
        "latest_step_name": "w.latest_step_name",
        "latest_error_class": "w.latest_error_class",
        "subject_type": "w.subject_type",
        "subject_id": "w.subject_id",
        "idempotency_key": "w.idempotency_key",
        "definition_digest": "w.definition_digest",
        "created_at": "w.created_at",
        "started_at": "w.started_at",
        "paused_at": "w.paused_at",
        "finished_at": "w.finished_at",
        "updated_at": "w.updated_at",
        "arguments": "shown.arguments" if redact else "w.arguments",
    }
    assert tuple(values) == EXPORT_COLUMNS
    # Redacted once per row, however many times the line names it.
    shown = (
        "CROSS JOIN LATERAL (SELECT pgbus_web_redact(w.arguments, CAST(:export_redact AS text[])) AS arguments) shown"
        if redact
        else ""
    )
    if as_json:
        pairs = ", ".join(f"'{key}', {value}" for key, value in values.items())
        selected = f"json_build_object({pairs})::text"
    elif as_csv:
        selected = _csv_line(values)
    else:
        selected = ", ".join(
            _moment(value) if key.endswith("_at") else f"({value})::text" for key, value in values.items()
        )
    statement = sa.text(
        f"""
        SELECT {selected}
        FROM pgbus_workflows w {shown}
        WHERE w.id <= :export_ceiling AND ({where})
        ORDER BY w.id
        {"LIMIT :export_limit" if limit is not None else ""}
        """
    )
    # A server-side cursor lives in a transaction: a page's connection is
    # in autocommit, so this one is put back in a transaction of its own
    # (READ COMMITTED: the cursor reads the snapshot of its start).
    if not conn.in_transaction():
        conn.execution_options(isolation_level="READ COMMITTED")
    result = conn.execution_options(stream_results=True, yield_per=int(batch)).execute(
        statement,
        {
            **binds,
            **given,
            "export_ceiling": int(ceiling_id),
            **({"export_limit": int(limit)} if limit is not None else {}),
            **({"export_redact": list(redact)} if redact else {}),
        },
    )
    try:
        # A batch at a time: a row at a time through the result costs more
        # than the server takes to send it.
        for rows in result.partitions(int(batch)):
            yield [line for (line,) in rows] if as_json or as_csv else rows
    finally:
        result.close()
