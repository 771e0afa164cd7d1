"""The read-only routes of the dashboard: each reads its request, asks its
context builder (context.py) and renders the page, or only the block an
HTMX request targets (render.py)."""

from __future__ import annotations

import logging

from flask import Blueprint, Response, jsonify, redirect, request, url_for
from sqlalchemy import exc as sa_exc
from werkzeug.exceptions import HTTPException, InternalServerError

from ..i18n import t
from ..models import workflows
from ..runtime import verbs
from . import context, filters, render, run_ids
from .extension import state
from .security import may_act

log = logging.getLogger(__name__)

INDEX_TEMPLATE = "pgbus_web/index.html"
RUN_TEMPLATE = "pgbus_web/run.html"
INSIGHTS_TEMPLATE = "pgbus_web/insights.html"
ERROR_TEMPLATE = "pgbus_web/error.html"

# HTMX targets (element ids) each page can answer with one block of its
# template instead of the whole page.
INDEX_FRAGMENTS = {
    "pgbus-counts": "counts",
    "pgbus-attention": "attention",
    "pgbus-runs": "runs",
}
RUN_FRAGMENTS = {
    "pgbus-run-header": "run_header",
    "pgbus-run-steps": "run_steps",
    "pgbus-run-signals": "run_signals",
    "pgbus-run-timeline": "run_timeline",
    "pgbus-run-audit": "run_audit",
}
INSIGHTS_FRAGMENTS = {"pgbus-insights": "insights"}


def common() -> dict:
    """What every page's template reads besides its own context."""
    return {"settings": state().settings, "can_act": may_act()}


def printable(value: str) -> str:
    """*value* to show back in a message: a NUL (which no stored id or
    class can hold) as the replacement character."""
    return value.replace("\x00", "\ufffd")


def index():
    """GET /workflows: the runs index."""
    try:
        run_filters = filters.parse(request.args)
        error = None
    except filters.FilterError as problem:
        run_filters, error = None, str(problem)
    parts = render.requested_blocks(INDEX_FRAGMENTS) or context.INDEX_PARTS
    with state().database.read() as conn:
        page = context.index_context(conn, state().settings, run_filters, parts=parts)
    page.update(common(), filter_error=error)
    return render.page(INDEX_TEMPLATE, page, INDEX_FRAGMENTS, status=400 if error else 200)


def workflow(workflow_id: str):
    """GET /workflows/<workflow_id>: one run. The address of one of its
    actions (``<id>/cancel``, ``<id>/signals``: left in the address bar by
    a plain form post that was refused) leads to the run's page."""
    try:
        with state().database.read() as conn:
            page = context.run_context(conn, state().settings, workflow_id)
    except context.NotFound:
        owner = _action_owner(workflow_id)
        if owner is not None:
            return redirect(url_for("pgbus_web.workflow", workflow_id=owner), 303)
        return error_page(
            404,
            t("pgbus.workflows.show.not_found_title"),
            t("pgbus.workflows.show.not_found", workflow_id=printable(workflow_id)),
        )
    page.update(common())
    return render.page(RUN_TEMPLATE, page, RUN_FRAGMENTS)


# The last segments of a run's action URLs (POST routes of actions.py).
ACTION_SEGMENTS = frozenset(verbs.VERBS) | {"signals"}


def _action_owner(path: str) -> str | None:
    """The run whose action URL *path* is (``<id>/<verb>``), when that run
    exists; None otherwise. Only asked once no run has *path* as its id,
    so a run whose id ends in ``/cancel`` keeps its page."""
    owner, _, last = path.rpartition("/")
    if not owner or last not in ACTION_SEGMENTS or not context.storable(owner):
        return None
    with state().database.read() as conn:
        return owner if workflows.find(conn, owner) is not None else None


def insights(workflow_class: str):
    """GET /workflows/insights/<workflow_class>: one class over a range."""
    range_name = request.args.get("since") or context.DEFAULT_INSIGHTS_RANGE
    if range_name not in filters.RANGES:
        return error_page(
            400,
            t("pgbus.web.errors.bad_request_title"),
            t(
                "pgbus.workflows.filters.errors.choice",
                name="since",
                value=printable(range_name),
                allowed=", ".join(filters.RANGES),
            ),
        )
    try:
        with state().database.read() as conn:
            page = context.insights_context(conn, state().settings, workflow_class, range_name)
    except context.NotFound:
        return error_page(
            404,
            t("pgbus.workflows.insights.not_found_title"),
            t("pgbus.workflows.insights.not_found", workflow_class=printable(workflow_class)),
        )
    page.update(common())
    return render.page(INSIGHTS_TEMPLATE, page, INSIGHTS_FRAGMENTS)


def health():
    """GET /health: 200 {"status": "ok"} when the database answers, else 503,
    within health_timeout (its own connection, not the pages' pool)."""
    try:
        state().database.check(state().settings.health_timeout)
    except (sa_exc.OperationalError, sa_exc.InterfaceError, sa_exc.TimeoutError) as problem:
        log.warning("pgbus-web: health check failed: %s", problem.__class__.__name__)
        return jsonify(status="unavailable", database="unreachable"), 503
    return jsonify(status="ok", database="ok")


# --- error pages -------------------------------------------------------------


def error_page(status: int, title: str, message: str) -> Response:
    return render.page(
        ERROR_TEMPLATE,
        {"status": status, "title": title, "message": message},
        {},
        status=status,
    )


def database_unavailable(problem: Exception):
    # The operator needs to know the database is away, not our stack trace;
    # the log keeps the cause.
    log.error("pgbus-web: database unavailable: %s", problem)
    return error_page(
        503, t("pgbus.web.errors.unavailable_title"), t("pgbus.web.errors.unavailable")
    )


def http_error(problem: HTTPException):
    titles = {
        403: ("pgbus.web.errors.forbidden_title", "pgbus.web.errors.forbidden"),
        404: ("pgbus.web.errors.not_found_title", "pgbus.web.errors.not_found"),
        405: ("pgbus.web.errors.method_title", "pgbus.web.errors.method"),
    }
    if problem.code not in titles:
        return problem
    title, message = titles[problem.code]
    return error_page(problem.code, t(title), t(message))


def server_error(problem: InternalServerError):
    """500: anything a view did not expect. Flask has logged the exception
    with its traceback before calling this; the operator reads a sentence."""
    return error_page(500, t("pgbus.web.errors.server_title"), t("pgbus.web.errors.server"))


def register(blueprint: Blueprint) -> None:
    blueprint.add_url_rule("/workflows", "workflows", index)
    blueprint.add_url_rule(f"/workflows/<{run_ids.CONVERTER}:workflow_id>", "workflow", workflow)
    blueprint.add_url_rule("/workflows/insights/<workflow_class>", "insights", insights)
    blueprint.add_url_rule("/health", "health", health)
    for problem in (sa_exc.OperationalError, sa_exc.InterfaceError, sa_exc.TimeoutError):
        blueprint.register_error_handler(problem, database_unavailable)
    # 403 is actions.forbidden's (a refused POST reads differently); it
    # hands a page's 403 back to http_error.
    for code in (404, 405):
        blueprint.register_error_handler(code, http_error)
    blueprint.register_error_handler(InternalServerError, server_error)
