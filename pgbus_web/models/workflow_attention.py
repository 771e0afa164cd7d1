"""The runs that need a person: each stuck run's reason by rules/stuck.py,
counted, grouped into the needs-attention groups and walked by a bulk
action; and the failed runs' groups beside them.

The groups and the counts by reason are read from what is kept
(the schema version that adds them, docs/performance.md "The first screen"): the paused and
failed runs' counts by key (models/attention_counts.py) with two index
probes per key for the moments, and the runs stuck by the clock (overdue,
waiting_overdue) from a partial index of the candidates read up to the
cutoff. models/recount.py holds the same answers counted from every
candidate run, as they were before: what the tests compare with.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ..rules import stuck
from . import STATES, as_dicts, attention_counts

# Default page size of attention groups, and of a bulk action's walk.
ATTENTION_GROUP_LIMIT = 200
ATTENTION_IDS_LIMIT = 500


def _now() -> datetime:
    return datetime.now(UTC)


# Each paused or ready run (and, when waiting_before is given, each waiting
# run) with its latest step's facts and why it is stuck (NULL when it is
# not), by the rules of rules/stuck.py; "since" is when the run got stuck:
# paused_at, the overdue step's scheduled_at, or the waiting step's
# waiting_since.
# The latest step's facts are the run's latest_* columns (a trigger on the
# steps table keeps them), so the whole query reads pgbus_workflows_stuck
# only, instead of looking up the latest step of every such run. The
# needs-attention queries and the index's reason filter both read the same
# rules, so a group's count and its "N runs" list agree, and neither looks
# a run's steps up.
def stuck_runs_sql(rules: tuple[stuck.Rule, ...], *, by_class: bool) -> str:
    since = "\n                 ".join(stuck.since_sql(rules, "stuck_reason.reason"))
    reasons = "\n                     ".join(stuck.reason_sql(rules))
    class_filter = "AND w.workflow_class = :workflow_class" if by_class else ""
    return f"""
        SELECT w.id, w.workflow_id, w.workflow_class,
               COALESCE(w.latest_step_name, w.current_step) AS step_name,
               w.latest_error_class AS error_class, stuck_reason.reason,
               CASE
                 {since}
               END AS since
        FROM pgbus_workflows w
        CROSS JOIN LATERAL (
            SELECT CASE
                     {reasons}
                   END AS reason
        ) stuck_reason
        WHERE w.status IN ({stuck.statuses_sql(rules)}) {class_filter}
    """


def stuck_binds(threshold: timedelta, now: datetime | None, waiting_threshold: timedelta | None) -> dict[str, Any]:
    return stuck.params(now or _now(), threshold, waiting_threshold)


def stuck_reason_counts(
    conn: Connection,
    *,
    threshold: timedelta,
    now: datetime | None = None,
    waiting_threshold: timedelta | None = None,
    workflow_class: str | None = None,
) -> dict[tuple[str, str], int]:
    """{(workflow_class, reason): runs} for the ongoing runs that need a person."""
    summary = stuck_reason_summary(
        conn, threshold=threshold, now=now, waiting_threshold=waiting_threshold, workflow_class=workflow_class
    )
    return {key: runs for key, (runs, _) in summary.items()}


def attention_ids(
    conn: Connection,
    group: Mapping[str, Any],
    *,
    threshold: timedelta,
    now: datetime | None = None,
    waiting_threshold: timedelta | None = None,
    limit: int = ATTENTION_IDS_LIMIT,
) -> list[str]:
    """The workflow_ids of one attention group (workflow_class, step_name,
    reason, error_class; a None error_class matches runs without one),
    oldest stuck first, at most *limit*: what a bulk action walks."""
    binds = stuck_binds(threshold, now, waiting_threshold)
    binds.update(
        workflow_class=group["workflow_class"],
        step_name=group["step_name"],
        reason=group["reason"],
        error_class=group.get("error_class"),
        limit=int(limit),
    )
    inner = stuck_runs_sql(stuck.rules_for(binds), by_class=True)
    rows = conn.execute(
        sa.text(
            f"""
            SELECT stuck.workflow_id
            FROM ({inner}) stuck
            WHERE stuck.step_name = :step_name AND stuck.reason = :reason
              AND stuck.error_class IS NOT DISTINCT FROM CAST(:error_class AS text)
            ORDER BY stuck.since NULLS LAST, stuck.id
            LIMIT :limit
            """
        ),
        binds,
    )
    return [workflow_id for (workflow_id,) in rows]


# --- kept: what the first screen reads -----------------------------------------


def _clock_free(rule: stuck.Rule) -> bool:
    return not any(isinstance(condition, stuck.Before) for condition in rule.conditions)


# The kept counts answer the rules that read no clock; their conditions may
# read only what a key holds, and they say when a run got stuck by the
# moment the moments index orders it by.
_KEY_COLUMNS = {"latest_step_status", "latest_error_class"}
for _rule in stuck.RULES:
    if _clock_free(_rule):
        assert _rule.status in attention_counts.STATUSES and _rule.since == "paused_at", _rule
        assert {condition.column for condition in _rule.conditions} <= _KEY_COLUMNS, _rule
    else:
        # A rule that reads the clock is read from its candidates' index,
        # ordered by the moment it compares, which is also its "since"; and
        # no other rule of its status comes after it.
        before = [c for c in _rule.conditions if isinstance(c, stuck.Before)]
        assert len(before) == 1 and before[0].column == _rule.since, _rule
        assert [r.status for r in stuck.RULES].count(_rule.status) == 1, _rule
        assert _rule.status not in attention_counts.STATUSES, _rule


def _kept_parts_sql(rules: tuple[stuck.Rule, ...], *, by_class: bool) -> str:
    """One row per kept key of a stuck run: its group, runs, first and last
    moments and its newest run (as ``newest``: [epoch of the moment or
    -Infinity, id])."""
    kept_rules = tuple(rule for rule in rules if _clock_free(rule))
    if not kept_rules:
        return ""
    reasons = "\n                     ".join(stuck.reason_sql(kept_rules))
    statuses = stuck.statuses_sql(kept_rules)
    a = attention_counts
    first = a.FIRST_PROBE.replace("{key}", "w.key")
    newest = a.NEWEST_PROBE.replace("{key}", "w.key")
    return f"""
        SELECT w.workflow_class, w.step_name, w.reason, w.latest_error_class AS error_class,
               w.runs AS count, first.since AS first_seen_at, newest.since AS last_seen_at,
               ARRAY[COALESCE(EXTRACT(EPOCH FROM newest.since), '-Infinity'), newest.id] AS newest
        FROM (
            SELECT w.*, CASE
                     {reasons}
                   END AS reason
            FROM (
                SELECT kept.key, kept.runs, kept.key[{a.CLASS}] AS workflow_class, kept.key[{a.STATUS}] AS status,
                       kept.key[{a.STEP}] AS step_name, kept.key[{a.ERROR_CLASS}] AS latest_error_class,
                       kept.key[{a.STEP_STATUS}] AS latest_step_status
                FROM ({a.kept_sql(by_class=by_class)}) kept
                WHERE kept.key[{a.STATUS}] IN ({statuses})
            ) w
        ) w
        LEFT JOIN LATERAL ({first}) first ON TRUE
        LEFT JOIN LATERAL ({newest}) newest ON TRUE
        WHERE w.reason IS NOT NULL
    """


def _due_parts_sql(rules: tuple[stuck.Rule, ...], *, by_class: bool) -> list[str]:
    """Per rule that reads the clock, its groups from its candidates read up
    to the cutoff (the rule's condition as written, status and all, which
    is what the candidates' partial index holds)."""
    class_filter = "AND w.workflow_class = :workflow_class" if by_class else ""
    parts = []
    for rule in rules:
        if _clock_free(rule):
            continue
        since = f"w.{rule.since}"
        candidates = f"w.status = '{rule.status}' AND {stuck.condition_sql(rule)}"
        # The newest run of a group is looked up after grouping, among the
        # candidates at its last moment (the index's key), rather than
        # carried through the grouping as an array built for every run.
        parts.append(f"""
        SELECT g.workflow_class, g.step_name, g.reason, g.error_class, g.count, g.first_seen_at,
               g.last_seen_at, ARRAY[EXTRACT(EPOCH FROM g.last_seen_at), newest.id] AS newest
        FROM (
            SELECT w.workflow_class, COALESCE(w.latest_step_name, w.current_step) AS step_name,
                   '{rule.reason}' AS reason, w.latest_error_class AS error_class, count(*) AS count,
                   min({since}) AS first_seen_at, max({since}) AS last_seen_at
            FROM pgbus_workflows w
            WHERE {candidates} {class_filter}
            GROUP BY 1, 2, 3, 4
        ) g
        CROSS JOIN LATERAL (
            SELECT w.id FROM pgbus_workflows w
            WHERE {candidates} AND {since} = g.last_seen_at AND w.workflow_class = g.workflow_class
              AND COALESCE(w.latest_step_name, w.current_step) IS NOT DISTINCT FROM g.step_name
              AND w.latest_error_class IS NOT DISTINCT FROM g.error_class
            ORDER BY w.id DESC
            LIMIT 1
        ) newest
        """)
    return parts


def _groups_sql(binds: Mapping[str, Any], *, by_class: bool) -> str:
    """Every needs-attention group (class, step, reason, error class) with
    its count, first and last moments and newest run id, unordered."""
    rules = stuck.rules_for(binds)
    parts = [
        part for part in (_kept_parts_sql(rules, by_class=by_class), *_due_parts_sql(rules, by_class=by_class)) if part
    ]
    union = "\n        UNION ALL\n".join(parts)
    return f"""
        SELECT part.workflow_class, part.step_name, part.reason, part.error_class,
               CAST(sum(part.count) AS bigint) AS count,
               min(part.first_seen_at) AS first_seen_at, max(part.last_seen_at) AS last_seen_at,
               CAST((max(part.newest))[2] AS bigint) AS newest_id
        FROM ({union}) part
        GROUP BY part.workflow_class, part.step_name, part.reason, part.error_class
    """


def stuck_reason_summary(
    conn: Connection,
    *,
    threshold: timedelta,
    now: datetime | None = None,
    waiting_threshold: timedelta | None = None,
    workflow_class: str | None = None,
) -> dict[tuple[str, str], tuple[int, datetime | None]]:
    """{(workflow_class, reason): (runs, when the oldest got stuck)}: the
    stuck runs counted, with the oldest "since" (the metrics' oldest-stuck
    age; None when no run of the pair has one). From what is kept."""
    binds = stuck_binds(threshold, now, waiting_threshold)
    if workflow_class is not None:
        binds["workflow_class"] = workflow_class
    rows = conn.execute(
        sa.text(
            f"""
            SELECT g.workflow_class, g.reason, CAST(sum(g.count) AS bigint) AS runs, min(g.first_seen_at) AS oldest
            FROM ({_groups_sql(binds, by_class=workflow_class is not None)}) g
            GROUP BY g.workflow_class, g.reason
            """
        ),
        binds,
    )
    return {(klass, reason): (runs, oldest) for klass, reason, runs, oldest in rows}


def attention_groups(
    conn: Connection,
    *,
    threshold: timedelta,
    now: datetime | None = None,
    waiting_threshold: timedelta | None = None,
    limit: int = ATTENTION_GROUP_LIMIT,
    workflow_class: str | None = None,
) -> list[dict[str, Any]]:
    """The stuck runs grouped by (class, step, reason, error class), biggest
    group first, at most *limit* groups, each with when its runs got stuck
    (first_seen_at, last_seen_at) and its newest error message: the latest
    step's of the group's newest run (the greatest since, a missing one
    counting as oldest, then the greatest id). From what is kept."""
    binds = stuck_binds(threshold, now, waiting_threshold)
    binds["limit"] = int(limit)
    if workflow_class is not None:
        binds["workflow_class"] = workflow_class
    rows = conn.execute(
        sa.text(
            f"""
            SELECT grouped.workflow_class, grouped.step_name, grouped.reason, grouped.error_class,
                   grouped.count, grouped.first_seen_at, grouped.last_seen_at,
                   (SELECT error_message FROM pgbus_workflow_steps
                    WHERE workflow_id = (SELECT workflow_id FROM pgbus_workflows
                                         WHERE id = grouped.newest_id)
                    ORDER BY id DESC
                    LIMIT 1) AS error_message
            FROM ({_groups_sql(binds, by_class=workflow_class is not None)}
                ORDER BY count DESC, last_seen_at DESC NULLS LAST, workflow_class
                LIMIT :limit
            ) grouped
            ORDER BY grouped.count DESC, grouped.last_seen_at DESC NULLS LAST, grouped.workflow_class
            """
        ),
        binds,
    )
    return as_dicts(rows)


def failed_groups(conn: Connection, *, limit: int = ATTENTION_GROUP_LIMIT) -> list[dict[str, Any]]:
    """The failed runs (terminal: no needs-attention group has them) grouped
    by (class, step, error class) of their latest step, biggest first, at
    most *limit* groups, each with its count and its newest failure
    (last_failed_at). From the kept counts, one probe of the moments index
    per key."""
    a = attention_counts
    newest = a.NEWEST_PROBE.replace("{key}", "kept.key")
    rows = conn.execute(
        sa.text(
            f"""
            SELECT kept.key[{a.CLASS}] AS workflow_class, kept.key[{a.STEP}] AS step_name,
                   kept.key[{a.ERROR_CLASS}] AS error_class, CAST(sum(kept.runs) AS bigint) AS count,
                   max(newest.since) AS last_failed_at
            FROM ({a.kept_sql(by_class=False)}) kept
            LEFT JOIN LATERAL ({newest}) newest ON TRUE
            WHERE kept.key[{a.STATUS}] = {STATES.FAILED}
            GROUP BY 1, 2, 3
            ORDER BY count DESC, last_failed_at DESC NULLS LAST, 1, 2, 3
            LIMIT :limit
            """
        ),
        {"limit": int(limit)},
    )
    return as_dicts(rows)


def stuck_count(
    conn: Connection,
    *,
    reason: str,
    threshold: timedelta,
    now: datetime | None = None,
    waiting_threshold: timedelta | None = None,
    workflow_class: str | None = None,
    step_name: str | None = None,
    error_class: str | None = None,
    no_error_class: bool = False,
) -> int:
    """The runs stuck for *reason* (of a class, a step, an error class or
    none when given): what the index's filter of a reason or of a group
    lists, counted from what is kept instead of run by run."""
    binds = stuck_binds(threshold, now, waiting_threshold)
    binds["reason"] = reason
    conditions = ["g.reason = :reason"]
    if workflow_class is not None:
        binds["workflow_class"] = workflow_class
        conditions.append("g.workflow_class = :workflow_class")
    if step_name is not None:
        binds["step_name"] = step_name
        conditions.append("g.step_name = :step_name")
    if error_class is not None:
        binds["error_class"] = error_class
        conditions.append("g.error_class = :error_class")
    elif no_error_class:
        conditions.append("g.error_class IS NULL")
    # sum() of bigint counts is numeric: a Decimal, as a count an int.
    return int(
        conn.execute(
            sa.text(
                f"""
            SELECT COALESCE(sum(g.count), 0)
            FROM ({_groups_sql(binds, by_class=workflow_class is not None)}) g
            WHERE {" AND ".join(conditions)}
            """
            ),
            binds,
        ).scalar_one()
    )
