"""Exporting a whole filtered set of runs as CSV or NDJSON, for every door
that offers it (the index's links, ``GET /api/v1/runs/export``,
``pgbus-web runs export``); docs/search.md, Exporting runs.

The export is pinned to a ceiling: the highest run id when it starts, so
a run created while it streams is not in it (as an operation's walk). Its
rows come through a server-side cursor (models.workflow_export.export_rows)
and leave as chunks of bytes, so memory does not grow with the count.

The columns are stable keys (EXPORT_COLUMNS, the API's own names), not the
operator's words: a file handed on is read by a colleague in another
language and by scripts. Moments are ISO 8601 in UTC. A CSV cell that a
spreadsheet would read as a formula (starting with ``= + - @``, a tab or a
carriage return) starts with an apostrophe instead.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Generator, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy.engine import Connection

from ..i18n import t
from ..models import workflow_export, workflow_index, workflow_rows
from ..rules import run_filters
from ..rules.run_filters import FilterError, RunFilters
from ..runtime.clock import utcnow
from . import redacting
from .page_reads import thresholds
from .settings import Settings

FORMATS = {"csv": "text/csv; charset=utf-8", "ndjson": "application/x-ndjson; charset=utf-8"}
COLUMNS = workflow_export.EXPORT_COLUMNS
# Rows read from the server per fetch, each fetch one chunk sent on.
CHUNK_ROWS = 1000
# The most runs, and characters, an excerpt holds (``excerpt``: an export
# answered in one message).
EXCERPT_ROWS = 1000
EXCERPT_CHARS = 1_000_000
# Longest part of a filename that names the filter.
FILENAME_FILTER_MAX = 80
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


@dataclass(frozen=True)
class Export:
    filename: str
    content_type: str
    ceiling_id: int
    chunks: Iterator[bytes]


def export_format(value: str | None) -> str:
    """The format asked for, csv or ndjson; FilterError otherwise."""
    if value not in FORMATS:
        raise FilterError(
            t(
                "pgbus.workflows.filters.errors.choice",
                name="format",
                value=str(value)[: run_filters.NAME_SHOWN],
                allowed=", ".join(FORMATS),
            )
        )
    return value


def filename(filters: RunFilters, fmt: str, now: datetime) -> str:
    """``pgbus-runs_<filters>_<moment UTC>.<fmt>``: the filters as name-value
    pairs (``all`` for none), only letters, digits, dot, dash and underscore."""
    query = filters.query(before=None, after=None)
    named = "_".join(f"{name}-{value}" for name, value in query.items()) or "all"
    named = _UNSAFE.sub("-", named).strip("-")[:FILENAME_FILTER_MAX] or "filtered"
    return f"pgbus-runs_{named}_{now.strftime('%Y%m%dT%H%M%SZ')}.{fmt}"


def content_disposition(name: str) -> str:
    return f'attachment; filename="{name}"'


def _encoder(fmt: str) -> Callable[[Sequence[str]], str]:
    """A batch of export_rows' lines as the format's text (the CSV header
    aside): the server made each CSV line whole, an NDJSON line lacks its
    line feed."""
    if fmt == "csv":
        return "".join
    return lambda lines: "".join(line + "\n" for line in lines)


def _header(fmt: str) -> str:
    return ",".join(COLUMNS) + "\r\n" if fmt == "csv" else ""


def _batches(
    conn: Connection,
    settings: Settings,
    filters: RunFilters,
    fmt: str,
    ceiling_id: int,
    now: datetime,
    *,
    batch: int = CHUNK_ROWS,
    limit: int | None = None,
) -> Generator[Sequence[Any], None, None]:
    binds = filters.page_binds(now)
    began = conn.in_transaction()
    given = thresholds(conn)
    redact = tuple(redacting.texts(redacting.rules_of(conn)))
    if conn.in_transaction() and not began:
        # The policy was read on this connection: that read ends here, so
        # the export's cursor begins a transaction of its own (export_rows).
        conn.rollback()
    where, where_binds = workflow_index.page_where(now=now, **given, **binds)
    return workflow_export.export_rows(
        conn,
        where=where,
        binds=where_binds,
        ceiling_id=ceiling_id,
        now=now,
        as_json=fmt == "ndjson",
        as_csv=fmt == "csv",
        batch=batch,
        limit=limit,
        redact=redact,
        **given,
    )


def _chunks(
    connect: Callable[[], AbstractContextManager[Connection]],
    settings: Settings,
    filters: RunFilters,
    fmt: str,
    ceiling_id: int,
    now: datetime,
) -> Iterator[bytes]:
    encode = _encoder(fmt)
    with connect() as conn:
        batches = _batches(conn, settings, filters, fmt, ceiling_id, now)
        if fmt == "csv":
            yield _header(fmt).encode("utf-8")
        for rows in batches:
            yield encode(rows).encode("utf-8")


def export(
    connect: Callable[[], AbstractContextManager[Connection]],
    settings: Settings,
    filters: RunFilters,
    fmt: str | None,
    *,
    now: datetime | None = None,
    ceiling_id: int | None = None,
) -> Export:
    """The export of every run *filters* match (the cursors aside) as
    *fmt*: the ceiling is read now (or given), the rows when the chunks
    are asked for, each on a connection from *connect*."""
    fmt = export_format(fmt)
    now = now or utcnow()
    filters = dataclasses.replace(filters, before=None, after=None)
    if ceiling_id is None:
        with connect() as conn:
            ceiling_id = workflow_rows.highest_id(conn)
    chunks = _chunks(connect, settings, filters, fmt, ceiling_id, now)
    return Export(filename(filters, fmt, now), FORMATS[fmt], ceiling_id, chunks)


@dataclass(frozen=True)
class Excerpt:
    """The first runs of an export, whole in one text: ``complete`` when
    they are every run the filters match up to the ceiling."""

    filename: str
    content_type: str
    ceiling_id: int
    rows: int
    complete: bool
    text: str


def excerpt(
    connect: Callable[[], AbstractContextManager[Connection]],
    settings: Settings,
    filters: RunFilters,
    fmt: str | None,
    *,
    rows: int = EXCERPT_ROWS,
    max_chars: int = EXCERPT_CHARS,
    now: datetime | None = None,
) -> Excerpt:
    """The export of *filters* as *fmt* (the same rows, columns and escapes
    as ``export``), cut after *rows* runs or before the run that would
    take the text past *max_chars* characters, for a door that answers
    in one message (MCP) rather than a stream."""
    fmt = export_format(fmt)
    now = now or utcnow()
    filters = dataclasses.replace(filters, before=None, after=None)
    rows = max(1, min(int(rows), EXCERPT_ROWS))
    encode = _encoder(fmt)
    header = _header(fmt)
    parts, size, count, complete = [header], len(header), 0, True
    with connect() as conn:
        ceiling_id = workflow_rows.highest_id(conn)
    # The rows on a connection of their own, as export's: the cursor puts
    # it in a transaction, which a read just made may have begun already.
    with connect() as conn:
        # One more than asked: whether the excerpt is the whole set.
        batches = _batches(conn, settings, filters, fmt, ceiling_id, now, batch=rows + 1, limit=rows + 1)
        try:
            for row in (row for batch in batches for row in batch):
                text = encode([row])
                if count == rows or size + len(text) > max_chars:
                    complete = False
                    break
                parts.append(text)
                size += len(text)
                count += 1
        finally:
            batches.close()
    return Excerpt(filename(filters, fmt, now), FORMATS[fmt], ceiling_id, count, complete, "".join(parts))
