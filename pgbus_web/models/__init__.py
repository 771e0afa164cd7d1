"""The SQL of pgbus-web, one module per table (pgbus_workflows, which most
queries read, in one module per concern: workflow_rows, workflow_counts,
workflow_attention, workflow_index, workflow_upkeep).

Every function takes an open SQLAlchemy ``Connection`` (the caller owns the
transaction) and returns plain dicts, ints or sets. SQL text is written once,
here, with named binds; nothing is built from input.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy.engine import Row


def as_dict(row: Row | None) -> dict[str, Any] | None:
    return dict(row._mapping) if row is not None else None


def as_dicts(rows) -> list[dict[str, Any]]:
    # The names once per result, zipped with each row's values: a row's
    # _mapping view costs more than the dict made from it.
    keys = list(rows.keys())
    return [dict(zip(keys, row)) for row in rows.all()]
