"""Why an ongoing run needs a person: each stuck reason's rule, written once
as data and read two ways, so the two cannot drift apart:

- as SQL over a run row ``w`` (``condition_sql``, ``since_sql``,
  ``statuses_sql``): the needs-attention groups and the runs index's
  reason filter;
- as a Python predicate over the same facts (``reason_of``): a run's
  badge and the ``stuck_reason`` the API and the actions give.

A rule reads the run's status and its ``latest_*`` columns, which the
steps' triggers keep equal to its latest step row (``facts_of_step`` names
them from that row), and compares them with ``params``: the cutoffs of the
thresholds and the stalled error class, bound as values. The conditions
hold with SQL's meaning: a comparison with NULL is never true.

The rules exclude each other; the first that holds wins (a CASE in SQL).
A rule that reads a cutoff not given is left out by both readers: without
a waiting threshold no run is waiting_overdue.

A waiting run whose latest step has no ``waiting_since`` is never
waiting_overdue: nothing says how long it has waited (its ``updated_at``
moves for reasons other than the wait), so it needs no one yet.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, TypedDict

from . import states
from .columns import LATEST_OF_STEP

# The run's latest_* columns a rule may read, each with the field of the
# latest step row it copies (rules/columns declares them).
STEP_FIELD_OF = LATEST_OF_STEP
# The run's own column a rule's "since" may name besides those.
RUN_COLUMNS = ("paused_at",)


class Thresholds(TypedDict):
    """The policy's stuck-run thresholds, as the models' queries take them."""

    threshold: timedelta
    waiting_threshold: timedelta


@dataclass(frozen=True)
class Param:
    """A value bound when the rule is read (``params`` gives them)."""

    name: str


Value = str | Param


@dataclass(frozen=True)
class Equals:
    """column = value: never true when the column is NULL."""

    column: str
    value: Value


@dataclass(frozen=True)
class DistinctFrom:
    """column IS DISTINCT FROM value: true when the column is NULL."""

    column: str
    value: Value


@dataclass(frozen=True)
class IsNull:
    column: str


@dataclass(frozen=True)
class Before:
    """column < value: never true when the column is NULL."""

    column: str
    value: Param


Condition = Equals | DistinctFrom | IsNull | Before


@dataclass(frozen=True)
class Rule:
    """*reason* for a run in *status* whose facts meet every condition;
    *since* is the column that says when it got stuck."""

    reason: str
    status: str
    conditions: tuple[Condition, ...]
    since: str

    @property
    def params(self) -> frozenset[str]:
        return frozenset(
            c.value.name for c in self.conditions if not isinstance(c, IsNull) and isinstance(c.value, Param)
        )


STALLED_ERROR = Param("stalled_error")
OVERDUE_BEFORE = Param("overdue_before")
WAITING_BEFORE = Param("waiting_before")

RULES: tuple[Rule, ...] = (
    Rule(
        states.STALLED,
        states.PAUSED,
        (
            Equals("latest_step_status", states.STEP_FAILED),
            Equals("latest_error_class", STALLED_ERROR),
        ),
        since="paused_at",
    ),
    Rule(
        states.PAUSED_ERROR,
        states.PAUSED,
        (
            Equals("latest_step_status", states.STEP_FAILED),
            DistinctFrom("latest_error_class", STALLED_ERROR),
        ),
        since="paused_at",
    ),
    Rule(
        states.PAUSED_MANUAL,
        states.PAUSED,
        (DistinctFrom("latest_step_status", states.STEP_FAILED),),
        since="paused_at",
    ),
    Rule(
        states.OVERDUE,
        states.READY,
        (
            Equals("latest_step_status", states.STEP_SCHEDULED),
            Before("latest_scheduled_at", OVERDUE_BEFORE),
        ),
        since="latest_scheduled_at",
    ),
    Rule(
        states.WAITING_OVERDUE,
        states.WAITING,
        (
            Equals("latest_step_status", states.STEP_WAITING),
            IsNull("latest_timeout_at"),
            Before("latest_waiting_since", WAITING_BEFORE),
        ),
        since="latest_waiting_since",
    ),
)
BY_REASON = {rule.reason: rule for rule in RULES}
assert tuple(BY_REASON) == states.STUCK_REASONS


def params(now: datetime, threshold: timedelta, waiting_threshold: timedelta | None = None) -> dict[str, Any]:
    """The values the rules compare with at *now*: runs due more than
    *threshold* ago are overdue, runs waiting more than *waiting_threshold*
    ago waiting_overdue (none when it is None)."""
    values: dict[str, Any] = {
        OVERDUE_BEFORE.name: now - threshold,
        STALLED_ERROR.name: states.STEP_STALLED_ERROR,
    }
    if waiting_threshold is not None:
        values[WAITING_BEFORE.name] = now - waiting_threshold
    return values


def rules_for(given: Iterable[str]) -> tuple[Rule, ...]:
    """The rules whose params are all in *given* (names), in order."""
    return _rules_for(frozenset(given))


@functools.lru_cache(maxsize=16)
def _rules_for(given: frozenset[str]) -> tuple[Rule, ...]:
    # Asked once per run listed, always with one of a few name sets.
    return tuple(rule for rule in RULES if rule.params <= given)


# The statuses some rule is for: a run in any other is never stuck.
_RULE_STATUSES = frozenset(rule.status for rule in RULES)


# --- as SQL --------------------------------------------------------------------


def _column(column: str) -> str:
    if column not in STEP_FIELD_OF and column not in RUN_COLUMNS:
        raise ValueError(f"not a column the stuck rules read: {column}")
    return f"w.{column}"


def _literal(value: Value) -> str:
    if isinstance(value, Param):
        return f":{value.name}"
    # Only the constants above: a quote would need escaping, and none has one.
    if "'" in value:
        raise ValueError(f"not a plain literal: {value!r}")
    return f"'{value}'"


def _sql(condition: Condition) -> str:
    column = _column(condition.column)
    if isinstance(condition, Equals):
        return f"{column} = {_literal(condition.value)}"
    if isinstance(condition, DistinctFrom):
        return f"{column} IS DISTINCT FROM {_literal(condition.value)}"
    if isinstance(condition, IsNull):
        return f"{column} IS NULL"
    return f"{column} < {_literal(condition.value)}"


def condition_sql(rule: Rule) -> str:
    """The rule's condition over run ``w`` (its status apart), binds named
    as its params."""
    return " AND ".join(_sql(condition) for condition in rule.conditions)


def reason_sql(rules: Iterable[Rule]) -> list[str]:
    """The WHEN branches of a CASE that gives run ``w`` its reason by
    *rules*, in their order (the first that holds)."""
    return [
        f"WHEN w.status = {_literal(rule.status)} AND {condition_sql(rule)} THEN {_literal(rule.reason)}"
        for rule in rules
    ]


def statuses_sql(rules: Iterable[Rule]) -> str:
    """The statuses *rules* can give a reason to, as an IN list's items."""
    statuses = dict.fromkeys(rule.status for rule in rules)
    return ", ".join(_literal(status) for status in statuses)


def since_sql(rules: Iterable[Rule], reason: str) -> list[str]:
    """The WHEN branches of a CASE that gives, for a run's *reason* (an SQL
    expression), the column of run ``w`` saying when it got stuck."""
    by_since: dict[str, list[str]] = {}
    for rule in rules:
        by_since.setdefault(rule.since, []).append(rule.reason)
    branches = []
    for since, reasons in by_since.items():
        test = f"= {_literal(reasons[0])}" if len(reasons) == 1 else f"IN ({', '.join(_literal(r) for r in reasons)})"
        branches.append(f"WHEN {reason} {test} THEN {_column(since)}")
    return branches


# --- as Python -----------------------------------------------------------------


def facts_of_step(step: Mapping[str, Any] | None) -> dict[str, Any]:
    """The latest_* columns a run with latest step row *step* (None for a
    run without one) carries."""
    return {column: (step.get(field) if step else None) for column, field in STEP_FIELD_OF.items()}


def _moment(value: Any) -> Any:
    # A naive datetime is taken to be UTC, as the pages take it.
    if isinstance(value, datetime) and value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value


def _value(value: Value, given: Mapping[str, Any]) -> Any:
    return given[value.name] if isinstance(value, Param) else value


def _holds(condition: Condition, facts: Mapping[str, Any], given: Mapping[str, Any]) -> bool:
    column = facts.get(condition.column)
    if isinstance(condition, IsNull):
        return column is None
    value = _value(condition.value, given)
    if isinstance(condition, DistinctFrom):
        return column != value if column is not None and value is not None else (column is None) != (value is None)
    if column is None or value is None:
        return False
    if isinstance(condition, Equals):
        return bool(column == value)
    return bool(_moment(column) < _moment(value))


def reason_of(status: str | None, facts: Mapping[str, Any], given: Mapping[str, Any]) -> str | None:
    """The stuck reason of a run in *status* with latest_* *facts*, read
    with *given* (``params``), or None when it is not stuck."""
    for rule in rules_for(given):
        if rule.status == status and all(_holds(c, facts, given) for c in rule.conditions):
            return rule.reason
    return None


def reason_of_run(
    run: Mapping[str, Any],
    *,
    now: datetime,
    threshold: timedelta,
    waiting_threshold: timedelta | None = None,
) -> str | None:
    """reason_of for *run*, a pgbus_workflows row with ``step`` (its latest
    step row, or None), as the pages and the API hold it."""
    if run.get("status") not in _RULE_STATUSES:
        return None
    given = params(now, threshold, waiting_threshold)
    return reason_of(run.get("status"), facts_of_step(run.get("step")), given)
