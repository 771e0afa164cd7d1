"""Column lists the SQL names more than once, each declared here once and
read by every statement that spells them out (models/, the stuck rule).

The schema's scripts (schema/v*.sql) are migrations, written once as they
were: tests/models/test_columns.py proves each list here equals the
installed table's columns.
"""

from __future__ import annotations

from collections.abc import Iterable

# pgbus_workflows' latest_* columns, each with the column of the run's
# latest pgbus_workflow_steps row it copies (highest id; NULL while the run
# has no step). The steps' triggers keep them equal (schema v1 and v2); a
# writer that declared it keeps them itself (models/workflow_rows).
LATEST_OF_STEP = {
    "latest_step_id": "id",
    "latest_step_name": "step_name",
    "latest_step_status": "status",
    "latest_error_class": "error_class",
    "latest_scheduled_at": "scheduled_at",
    "latest_waiting_since": "waiting_since",
    "latest_timeout_at": "timeout_at",
}
LATEST_COLUMNS = tuple(LATEST_OF_STEP)
# The step row's columns they copy, in the same order.
LATEST_STEP_FIELDS = tuple(LATEST_OF_STEP.values())


def listed(names: Iterable[str], alias: str = "", prefix: str = "") -> str:
    """*names* as a SQL list, each as ``alias.prefix + name`` (no alias:
    the bare name)."""
    qualifier = f"{alias}." if alias else ""
    return ", ".join(f"{qualifier}{prefix}{name}" for name in names)


def latest_list(alias: str = "") -> str:
    """The run's latest_* columns as a SQL list (``w.latest_step_id, ...``)."""
    return listed(LATEST_COLUMNS, alias)


def step_fields_list(alias: str = "", prefix: str = "") -> str:
    """The step row's columns latest_* copies, as a SQL list, in their order."""
    return listed(LATEST_STEP_FIELDS, alias, prefix)


def latest_assignments(step_alias: str, prefix: str = "") -> str:
    """``latest_step_id = s.id, ...``: latest_* set from step row
    *step_alias* (its columns named ``prefix + column``)."""
    return ", ".join(f"{column} = {step_alias}.{prefix}{field}" for column, field in LATEST_OF_STEP.items())
