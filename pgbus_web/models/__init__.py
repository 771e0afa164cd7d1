"""The SQL of pgbus-web, one module per table (pgbus_workflows, which most
queries read, in one module per concern: workflow_rows, workflow_counts,
workflow_attention, workflow_index, workflow_upkeep).

Every function takes an open SQLAlchemy ``Connection`` (the caller owns the
transaction) and returns plain dicts, ints or sets. SQL text is written once,
here, with named binds; nothing is built from input. A status the SQL
names is read from rules/states (``STATES``) and a column list
it spells out from rules/columns, never written as a literal again
(tests/models/test_declared_once.py).
"""

from __future__ import annotations

from collections.abc import Iterable
from types import SimpleNamespace
from typing import Any, overload

from sqlalchemy.engine import Result, Row

from ..rules import states


def quoted(value: str) -> str:
    """*value*, one of rules/states' names, as a SQL literal: only those
    constants, which hold no quote, never input."""
    if "'" in value:
        raise ValueError(f"not a plain name: {value!r}")
    return f"'{value}'"


def among(values: Iterable[str]) -> str:
    """*values* (a tuple of rules/states) as an ``IN`` list: ``('a', 'b')``."""
    return f"({', '.join(quoted(value) for value in values)})"


# rules/states' names as the SQL reads them: STATES.READY is ``'ready'``,
# STATES.TERMINAL is ``('completed', 'failed', 'cancelled')`` (an IN list).
STATES = SimpleNamespace(
    **{
        name: quoted(value) if isinstance(value, str) else among(value)
        for name, value in vars(states).items()
        if name.isupper() and (isinstance(value, str) or isinstance(value, tuple))
    }
)


@overload
def as_dict(row: Row[Any]) -> dict[str, Any]: ...
@overload
def as_dict(row: Row[Any] | None) -> dict[str, Any] | None: ...
def as_dict(row: Row[Any] | None) -> dict[str, Any] | None:
    return dict(row._mapping) if row is not None else None


def as_dicts(rows: Result[Any]) -> list[dict[str, Any]]:
    # The names once per result, zipped with each row's values: a row's
    # _mapping view costs more than the dict made from it.
    keys = list(rows.keys())
    return [dict(zip(keys, row, strict=True)) for row in rows.all()]
