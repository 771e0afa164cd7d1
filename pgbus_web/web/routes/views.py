"""The read-only routes of the dashboard: each reads its request, asks its
context builder (core/page_reads.py) and renders the page, or only the block an
HTMX request targets (render.py)."""

from __future__ import annotations

import logging

from flask import Blueprint, jsonify, redirect, request, url_for
from sqlalchemy import exc as sa_exc
from werkzeug.exceptions import HTTPException, InternalServerError

from ... import db
from ...core import compare as comparing
from ...core import exports, page_reads, problems, redacting, worker_reads
from ...db import SchemaProblem
from ...plumbing import reading, run_ids, security
from ...plumbing.security import may_act
from ...plumbing.state import state
from ...plumbing.streamed_exports import export_response
from ...rules import run_filters as filters
from ...rules.limits import ID_MAX
from ...runtime import verbs
from ...runtime.clock import utcnow
from ..answering import answers, not_modified, page_cache, pages, render

log = logging.getLogger(__name__)


def searchable(run_filters: filters.RunFilters) -> filters.RunFilters:
    """*run_filters*, unless they search by a value the policy redacts and
    this request may not reveal it (redacting.SearchRefused, a FilterError)."""
    return redacting.check_search(run_filters, security.principal(), security.current_policy())


def common() -> dict:
    """What every page's template reads besides its own context."""
    return {"settings": state().settings, "can_act": may_act()}


def index():
    """GET /workflows: the runs index."""
    search = request.args.get("q")
    try:
        run_filters = searchable(filters.parse_query(request.args))
        error = search_error = None
    except filters.FilterError as problem:
        # The box keeps what was typed, to be mended; its own refusal (too
        # long) is said beside it too.
        run_filters, error = None, str(problem)
        search_error = error if problem.field == "q" else None
    parts = render.requested_blocks(pages.INDEX.fragments) or pages.INDEX.blocks
    with reading.read() as conn:
        tag, unchanged = not_modified.check(conn)
        if unchanged is not None:
            return unchanged
        page = page_reads.index_context(
            conn, state().settings, run_filters, parts=parts, remember=page_cache.remember_index
        )
    page.update(common(), filter_error=error, search_text=search if error else None, search_error=search_error)
    response = render.page(pages.INDEX.template, page, pages.INDEX.fragments, status=400 if error else 200)
    return not_modified.tagged(response, tag)


def export(fmt: str):
    """GET /workflows/export.csv and .ndjson: every run the index's filters
    match (the cursors aside), streamed as the rows are read; a refused
    filter is refused as the index refuses it (400 and its sentence)."""
    try:
        run_filters = searchable(filters.parse_query(request.args))
        made = exports.export(state().database.read, state().settings, run_filters, fmt)
    except filters.FilterError as problem:
        return answers.error_page_for(problems.refusal(problem))
    return export_response(made, **{"Cache-Control": "no-store"})


# The run page's windows of older attempts and events (context.Window).
WINDOW_CURSORS = ("attempts_before", "events_before")


def _window_cursors() -> dict[str, int]:
    """The run page's window cursors from the query: ids, as a bigserial
    has them; FilterError for anything else."""
    cursors = {}
    for name in WINDOW_CURSORS:
        value = request.args.get(name)
        if value is None:
            continue
        if not (value.isascii() and value.isdigit() and 0 < len(value) <= 19 and 0 < int(value) <= ID_MAX):
            raise filters.FilterError(problems.bad_window_cursor(name, value).message)
        cursors[name] = int(value)
    return cursors


def workflow(workflow_id: str):
    """GET /workflows/<workflow_id>: one run. The address of one of its
    actions (``<id>/cancel``, ``<id>/signals``: left in the address bar by
    a plain form post that was refused) leads to the run's page."""
    try:
        cursors = _window_cursors()
    except filters.FilterError as problem:
        return answers.error_page_for(problems.refusal(problem))
    try:
        with reading.read() as conn:
            tag, unchanged = not_modified.check(conn)
            if unchanged is not None:
                return unchanged
            # Read once per change marker and clock bucket, drawn once per
            # kind of viewer (page_cache.py): any committed write moves the
            # marker, so an operator's own change shows on the next page.
            now = page_reads.utcnow()
            page = page_cache.remember_run(
                conn,
                now,
                lambda on: page_reads.run_context(
                    on,
                    state().settings,
                    workflow_id,
                    now,
                    attempts_before=cursors.get("attempts_before"),
                    events_before=cursors.get("events_before"),
                ),
            )
    except page_reads.NotFound:
        owner = _action_owner(workflow_id)
        if owner is not None:
            return redirect(url_for("pgbus_web.workflow", workflow_id=owner), 303)
        found = _by_prefix(workflow_id)
        if len(found) == 1:
            return redirect(url_for("pgbus_web.workflow", workflow_id=found[0]), 303)
        if found:
            return redirect(url_for("pgbus_web.workflows", q=workflow_id), 303)
        return answers.error_page_for(problems.run_not_found(workflow_id))
    page.update(common())
    return not_modified.tagged(render.page(pages.RUN.template, page, pages.RUN.fragments), tag)


# The last segments of a run's action URLs (POST routes of actions.py).
ACTION_SEGMENTS = frozenset(verbs.VERBS) | {"signals", "reveal"}


def _action_owner(path: str) -> str | None:
    """The run whose action URL *path* is (``<id>/<verb>``), when that run
    exists; None otherwise. Only asked once no run has *path* as its id,
    so a run whose id ends in ``/cancel`` keeps its page."""
    owner, _, last = path.rpartition("/")
    if not owner or last not in ACTION_SEGMENTS:
        return None
    with reading.read() as conn:
        return owner if page_reads.find_run(conn, owner) is not None else None


def _by_prefix(prefix: str) -> list[str]:
    """The runs a short id (the pages print a run id's first eight
    characters, and an operator pastes it into the address bar) may name:
    none, one, or two when it names several. Only asked once no run has
    *prefix* as its whole id."""
    with reading.read() as conn:
        return page_reads.runs_by_prefix(conn, prefix)


def compare():
    """GET /workflows/compare?a=<id>&b=<id>: two runs side by side; a
    refused query (a missing, unknown or repeated parameter, a malformed
    or missing run, one run twice) is its refusal's page."""
    try:
        a_id, b_id = comparing.parse(request.args.to_dict(flat=False))
        with reading.read() as conn:
            found = comparing.compare(conn, state().settings, a_id, b_id)
    except comparing.CompareRefused as problem:
        return answers.error_page_for(problems.refusal(problem))
    page = {"comparison": found, "now": utcnow()}
    page.update(common())
    return render.page(pages.COMPARE.template, page, pages.COMPARE.fragments)


def insights(workflow_class: str):
    """GET /workflows/insights/<workflow_class>: one class over a range."""
    range_name = request.args.get("since") or page_reads.DEFAULT_INSIGHTS_RANGE
    if range_name not in filters.RANGES:
        return answers.error_page_for(problems.bad_choice("since", range_name, filters.RANGES))
    try:
        with reading.read() as conn:
            page = page_reads.insights_context(conn, state().settings, workflow_class, range_name)
    except page_reads.NotFound:
        return answers.error_page_for(problems.class_not_found(workflow_class))
    page.update(common())
    return render.page(pages.INSIGHTS.template, page, pages.INSIGHTS.fragments)


def batch(batch_id: str):
    """GET /batches/<batch_id>: one fan-out batch, its jobs by state and
    the runs that wait for it."""
    try:
        with reading.read() as conn:
            page = page_reads.batch_context(conn, batch_id)
    except page_reads.NotFound:
        return answers.error_page_for(problems.batch_not_found(batch_id))
    page.update(common())
    return render.page(pages.BATCH.template, page, pages.BATCH.fragments)


def workers():
    """GET /workers: the workers and serving processes, and the queues."""
    with state().database.read() as conn:
        page = worker_reads.workers_context(conn, state().settings)
    page.update(common())
    return render.page(pages.WORKERS.template, page, pages.WORKERS.fragments)


def health():
    """GET /health: 200 {"status": "ok", "database": "ok"} when the
    primary answers with this release's schema, else 503 with the reason,
    within health_timeout (its own connection, not the pages' pool). With
    a replica, "replica" says how it is (docs/replica.md); a replica down
    or behind never fails the check: pages then read the primary."""
    try:
        state().database.check(state().settings.health_timeout)
    except (sa_exc.OperationalError, sa_exc.InterfaceError, sa_exc.TimeoutError) as problem:
        log.warning("pgbus-web: health check failed: %s", problem.__class__.__name__)
        return jsonify(status="unavailable", database="unreachable"), 503
    except SchemaProblem as problem:
        log.warning("pgbus-web: health check failed: %s", problem)
        return jsonify(status="unavailable", database="ok", schema=str(problem)), 503
    replica = page_reads.replica_health(state().database)
    if replica is None:
        return jsonify(status="ok", database="ok")
    return jsonify(status="ok", database="ok", replica=replica)


# --- error pages -------------------------------------------------------------


def database_unavailable(problem: Exception):
    # The operator needs to know the database is away, not our stack trace;
    # the log keeps the cause.
    log.error("pgbus-web: database unavailable: %s", problem)
    if db.cancelled(problem):
        # It answered, too slowly: "not answering" would send the operator
        # looking for an outage (docs/operations.md, the million-run trial).
        return answers.error_page_for(problems.database_unavailable(too_slow=True))
    return answers.error_page_for(problems.database_unavailable(too_slow=False))


def http_error(problem: HTTPException):
    refusal = problems.page_refusal(problem.code) if problem.code is not None else None
    if refusal is None:
        return problem
    response = answers.error_page_for(refusal)
    # A 405's Allow header names the methods the address takes.
    for name, value in problem.get_headers():
        if name == "Allow":
            response.headers[name] = value
    return response


def server_error(problem: InternalServerError):
    """500: anything a view did not expect. Flask has logged the exception
    with its traceback before calling this; the operator reads a sentence."""
    return answers.error_page_for(problems.server_error())


def register(blueprint: Blueprint) -> None:
    blueprint.add_url_rule("/workflows", "workflows", index)
    blueprint.add_url_rule("/workflows/export.csv", "export_csv", lambda: export("csv"))
    blueprint.add_url_rule("/workflows/export.ndjson", "export_ndjson", lambda: export("ndjson"))
    blueprint.add_url_rule("/workflows/compare", "compare", compare)
    blueprint.add_url_rule(f"/workflows/<{run_ids.CONVERTER}:workflow_id>", "workflow", workflow)
    blueprint.add_url_rule("/workflows/insights/<workflow_class>", "insights", insights)
    # A batch id is any text (a "/" too): the rest of the path.
    blueprint.add_url_rule("/batches/<path:batch_id>", "batch", batch)
    blueprint.add_url_rule("/workers", "workers", workers)
    blueprint.add_url_rule("/health", "health", health)
    for problem in (sa_exc.OperationalError, sa_exc.InterfaceError, sa_exc.TimeoutError):
        blueprint.register_error_handler(problem, database_unavailable)
    # 403 is actions.forbidden's (a refused POST reads differently); it
    # hands a page's 403 back to http_error.
    for code in (404, 405):
        blueprint.register_error_handler(code, http_error)
    blueprint.register_error_handler(InternalServerError, server_error)
