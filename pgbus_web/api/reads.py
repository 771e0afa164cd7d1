"""The API's reads: the runs (the index's filters and keyset paging), one
run, the counts, the needs-attention groups, operations and locks. Each is
the pages' own context builder or query, shaped by core/representations.py."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from flask import Response, request

from ..core import compare as comparing
from ..core import exports, operation_reads, page_reads, policy, policy_changes, problems, redacting, worker_reads
from ..core import representations as rep
from ..core.lock_filters import parse as parse_lock_filters
from ..core.lock_reads import locks_context
from ..plumbing import reading, security
from ..plumbing.state import state
from ..plumbing.streamed_exports import export_response
from ..rules import run_filters
from ..runtime.clock import utcnow
from . import guard
from .answers import json_answer
from .problems import from_refusal


def stuck_of(now: datetime):
    """The run -> stuck reason function for rows read at *now*."""
    kept = security.current_policy()

    def stuck(run: Mapping[str, Any]) -> str | None:
        return rep.stuck_reason(
            run, now=now, stall_threshold=kept.stall_threshold, waiting_threshold=kept.waiting_threshold
        )

    return stuck


def searchable(filters: run_filters.RunFilters) -> run_filters.RunFilters:
    """*filters*, unless they search by a value the policy redacts and the
    caller may not reveal it (redacting.SearchRefused, a FilterError)."""
    return redacting.check_search(filters, guard.principal(), security.current_policy())


def runs() -> Response:
    """GET /runs: one page of the index, newest first; ``next_before`` is
    the ``before`` of the next (older) page, null on the last."""
    try:
        filters = searchable(run_filters.parse_query(request.args))
    except run_filters.FilterError as refused:
        return from_refusal(problems.refusal(refused))
    now = utcnow()
    with reading.read() as conn:
        page = page_reads.index_runs(conn, state().settings, filters, now)
    stuck = stuck_of(now)
    return json_answer(
        {
            "runs": [rep.run_row(run, stuck=stuck(run)) for run in page["runs"]],
            "next_before": page["pagination"].older,
            "next_after": page["pagination"].newer,
        }
    )


def export() -> Response:
    """GET /runs/export?format=csv|ndjson: every run the index's filters
    match (the cursors aside), streamed; a refused filter or format is a
    400 problem with the index's sentence, before any row is read."""
    args = request.args.to_dict()
    fmt = args.pop("format", None)
    try:
        filters = searchable(run_filters.parse_query(args))
        made = exports.export(state().database.read, state().settings, filters, fmt)
    except run_filters.FilterError as refused:
        return from_refusal(problems.refusal(refused))
    return export_response(made)


def compare() -> Response:
    """GET /runs/compare?a=&b=: two runs compared (core/compare.py); a
    refused query is its problem, as the page refuses it."""
    try:
        a_id, b_id = comparing.parse(request.args.to_dict(flat=False))
        with reading.read() as conn:
            found = comparing.compare(conn, state().settings, a_id, b_id)
    except comparing.CompareRefused as refused:
        return from_refusal(problems.refusal(refused))
    return json_answer(rep.comparison(found))


def run_detail(conn, workflow_id: str, *, now: datetime | None = None, run=None) -> dict[str, Any]:
    """One run in detail (NotFound when there is none)."""
    now = now or utcnow()
    page = page_reads.run_context(conn, state().settings, workflow_id, now=now, run=run)
    return rep.run_detail(page, stuck=stuck_of(now)(page["run"]))


def run(workflow_id: str) -> Response:
    """GET /runs/<workflow_id>."""
    with reading.read() as conn:
        try:
            return json_answer(run_detail(conn, workflow_id))
        except page_reads.NotFound:
            return from_refusal(problems.run_not_found(workflow_id))


def counts() -> Response:
    """GET /counts: runs per class and status."""
    with reading.read() as conn:
        page = page_reads.index_context(conn, state().settings, None, parts=("counts",))
    return json_answer(rep.counts(page["counts"]))


def attention() -> Response:
    """GET /attention: the needs-attention groups, biggest first."""
    settings = state().settings
    with reading.read() as conn:
        page = page_reads.index_context(conn, settings, None, parts=("attention",))
    return json_answer(
        {
            "groups": [
                rep.attention_group(group, page_reads.definition_of(settings, group["workflow_class"]) is not None)
                for group in page["attention_groups"]
            ]
        }
    )


def operations() -> Response:
    """GET /operations: the recent operations, newest first."""
    with reading.read() as conn:
        rows = operation_reads.recent(conn)
    return json_answer({"operations": [rep.operation(row) for row in rows]})


def operation(operation_id: int) -> Response:
    """GET /operations/<id>: the operation and what became of its runs."""
    with state().database.primary.connect() as conn:
        found = operation_reads.find(conn, operation_id)
        if found is None:
            return from_refusal(problems.operation_not_found(operation_id))
        outcome = operation_reads.outcome(conn, state().settings, found, utcnow())
    return json_answer({"operation": rep.operation(found), "outcome": rep.operation_outcome(outcome, found["id"])})


def locks() -> Response:
    """GET /locks: one page of uniqueness locks (the Locks page's filters
    ``state``, ``queue`` and its cursor), oldest first, and the counts."""
    try:
        view = parse_lock_filters(request.args)
    except run_filters.FilterError as refused:
        return from_refusal(problems.refusal(refused))
    with reading.read() as conn:
        page = locks_context(conn, state().settings, view)
    return json_answer(
        {
            "locks": [rep.lock(row) for row in page["locks"]],
            "next": page["next_query"],
            "counts": dict(page["counts"]),
        }
    )


def workers() -> Response:
    """GET /workers: every worker and serving process, alive first, with
    its state against worker_gone_after."""
    with state().database.read() as conn:
        rows = worker_reads.worker_rows(conn, state().settings)
    return json_answer(
        {
            "workers": [rep.worker(row) for row in rows],
            "gone_after_seconds": state().settings.worker_gone_after.total_seconds(),
        }
    )


def queues() -> Response:
    """GET /queues: each PGMQ queue's depth and oldest message."""
    with state().database.read() as conn:
        rows = worker_reads.queue_rows(conn)
    return json_answer({"queues": [rep.queue(row) for row in rows]})


def policy_rules() -> Response:
    """GET /policy: every rule with its value, default, version and last change."""
    return json_answer({"rules": [rep.policy_rule(rule) for rule in policy_changes.rules(state().database.primary)]})


def policy_history() -> Response:
    """GET /policy/history[?key=RULE]: the changes, newest first."""
    try:
        changes = policy_changes.history(state().database.primary, request.args.get("key") or None)
    except policy.PolicyError as refused:
        return from_refusal(problems.refusal(refused))
    return json_answer({"changes": [rep.policy_change(change) for change in changes]})
