"""The routes that change one run: an outside verb on it, a signal to it
(a needs-attention group's buttons are operations: routes/operations.py). Each is thin: read the form
(core/checks.py), call one runtime function, answer.

The answer depends on who asked:
- htmx: the page's fragments re-rendered from the database as it is now
  (the run's header, steps, signals, timeline and audit trail; or the
  index's counts, groups and runs), each swapping itself in
  (hx-swap-oob), and the message in the messages area; the HTTP status
  says how it went (200, 404, 409, 413, 422).
- a plain form post: on success a redirect to the page with a flashed
  message; on refusal the full page with the message, the refused form
  open with what was typed, and the status.

Who may act, and the CSRF token, are checked before any of these run
(security.py, csrf.py): a viewer gets 403, a post without a good token
400, and nothing is read or written.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from flask import (
    Blueprint,
    Response,
    make_response,
    render_template,
    request,
    url_for,
)
from werkzeug.exceptions import Forbidden, RequestEntityTooLarge

from ...core import acts, checks, page_reads, permissions, problems
from ...core.words import done
from ...core.words import verb_labels as buttons
from ...i18n import current_timezone
from ...plumbing import csrf, hx, run_ids
from ...plumbing.redirects import see_other
from ...plumbing.security import UNSAFE_METHODS, actor, may, principal
from ...plumbing.state import state
from ...runtime import errors, verbs
from ...runtime.clock import utcnow
from ..answering import answers, pages, render
from . import views

log = logging.getLogger(__name__)


# --- answers -------------------------------------------------------------------


def run_answer(
    workflow_id: str,
    status: int,
    message: str,
    category: str,
    refused: Mapping[str, Any] | None = None,
    run: dict[str, Any] | None = None,
) -> Response:
    """The run as it is now, with *message*; *refused* (verb, values,
    errors) shows that form back. *run*: the run's row as the verb that
    just committed returned it, not read again."""
    if status < 400 and not hx.details().request:
        # A plain form's success is a redirect: nothing to read or draw here.
        answers.flash_message(category, message)
        return see_other(url_for("pgbus_web.workflow", workflow_id=workflow_id))
    settings = state().settings
    # The primary, not the replica: the operator must see what just happened.
    with state().database.primary.connect() as conn:
        try:
            page = page_reads.run_context(conn, settings, workflow_id, run=run)
        except page_reads.NotFound:
            return answers.refused(problems.run_not_found(workflow_id))
    page.update(views.common(), refused=refused)
    if hx.details().request:
        body = render.fragments(pages.RUN.template, pages.RUN.blocks, page) + answers.messages(category, message)
        return render.answer(body, status)
    page["pgbus_messages"] = [(category, message)]
    return make_response(render_template(pages.RUN.template, **page), status)


def workflow_error(workflow_id: str, verb: str, problem: Exception, names) -> Response:
    """The answer to what the runtime or the form refused (it wrote
    nothing): the run page with the message, and the form at fault open
    beside its field when a field is at fault."""
    refusal = problems.refusal(problem, verb=verb, workflow_id=workflow_id)
    if refusal.status == 404:
        return answers.refused(refusal)
    if refusal.field:
        return _refused_form(workflow_id, verb, refusal.field, refusal.message, refusal.status, names)
    return run_answer(workflow_id, refusal.status, refusal.message, "error")


def _refused_form(workflow_id: str, verb: str, field: str, message: str, status: int, names) -> Response:
    refused = {"verb": verb, "values": checks.values_of(request.form, names), "errors": {field: message}}
    return run_answer(workflow_id, status, message, "error", refused)


# --- one run -------------------------------------------------------------------


def _find(workflow_id: str) -> dict[str, Any] | None:
    with state().database.primary.connect() as conn:
        return page_reads.find_run(conn, workflow_id)


def run_action(workflow_id: str, verb: str):
    """POST /workflows/<workflow_id>/<verb>: one outside verb on one run."""
    if verb not in verbs.VERBS:
        return answers.refused(problems.unknown_verb(verb))
    run = _find(workflow_id)
    if run is None:
        return answers.refused(problems.run_not_found(workflow_id))
    definition = page_reads.definition_of(state().settings, run["workflow_class"])
    names = checks.VERB_FIELDS[verb]
    try:
        options = checks.parse_verb(
            verb,
            request.form,
            tz=current_timezone(),
            now=utcnow(),
            step_names=tuple(definition.step_names) if definition is not None else (),
        )
    except checks.FormError as problem:
        return workflow_error(workflow_id, verb, problem, names)
    try:
        acts.permit_class(state().database.primary, principal(), verb, run["workflow_class"])
        after = verbs.perform(
            state().database.primary,
            verb,
            workflow_id,
            actor=actor(),
            registry=state().settings.registry,
            **options.options(),
        )
    except (errors.WorkflowError, permissions.NotPermitted) as problem:
        return workflow_error(workflow_id, verb, problem, names)
    message = done.verb_done(verb, run, after, options.at)
    return answers.committed(
        lambda: run_answer(workflow_id, 200, message, "ok", run=after), message, "ok", _run_url(workflow_id)
    )


def _run_url(workflow_id: str) -> Callable[[], str]:
    return lambda: url_for("pgbus_web.workflow", workflow_id=workflow_id)


def send_signal(workflow_id: str):
    """POST /workflows/<workflow_id>/signals: deliver a signal to one run."""
    names = checks.SIGNAL_FIELDS
    run = _find(workflow_id)
    if run is None:
        return answers.refused(problems.run_not_found(workflow_id))
    try:
        signal = checks.parse_signal(request.form)
    except checks.FormError as problem:
        return workflow_error(workflow_id, buttons.SIGNAL, problem, names)
    try:
        acts.permit_class(state().database.primary, principal(), buttons.SIGNAL, run["workflow_class"])
        result = verbs.signal(
            state().database.primary, workflow_id, signal.name, signal.payload, signal.idempotency_key, actor=actor()
        )
    except (errors.WorkflowError, permissions.NotPermitted) as problem:
        return workflow_error(workflow_id, buttons.SIGNAL, problem, names)
    message, category = done.signal_done(result, signal.name, signal.idempotency_key)
    return answers.committed(
        lambda: run_answer(workflow_id, 200, message, category, run=result.run),
        message,
        category,
        _run_url(workflow_id),
    )


# --- refusals before the view ----------------------------------------------------


def forbidden(problem: Forbidden):
    """403: a viewer posting (security.py), or a page the host hides."""
    if request.method in UNSAFE_METHODS:
        refusal = problems.forbidden()
        return answers.message_answer(refusal.status, refusal.title, refusal.message)
    return views.http_error(problem)


def csrf_failed(problem: csrf.CSRFError):
    refusal = problems.csrf_refused()
    return answers.message_answer(refusal.status, refusal.title, refusal.message)


def too_large(problem: RequestEntityTooLarge):
    refusal = problems.too_large(csrf.MAX_BODY // 1024)
    return answers.message_answer(refusal.status, refusal.title, refusal.message)


# --- template helpers ------------------------------------------------------------


def _run_actions(run, definition, now, refused=None):
    # Only the buttons the policy lets this person press are drawn.
    return [
        action
        for action in buttons.run_actions(run, definition, now=now, tz=current_timezone(), refused=refused)
        if may(action.verb, run.get("workflow_class"))
    ]


def _group_actions(group):
    loaded = page_reads.definition_of(state().settings, group.get("workflow_class")) is not None
    # A group's button may be named for the incident ("retry" is resume):
    # the policy is asked about the verb it does.
    return [
        action
        for action in buttons.group_actions(group, loaded)
        if may(buttons.BULK_VERBS.get(action.verb, action.verb), group.get("workflow_class"))
    ]


# Live refresh reads these fragments only every REFRESH_SELDOM_EVERY-th
# poll: grouping the stuck runs is the index's slowest query (seconds at a
# million runs), and a group changes far less often than the list.
REFRESH_SELDOM = ("pgbus-attention",)
REFRESH_SELDOM_EVERY = 6


def refresh() -> dict[str, Any] | None:
    """What the page's poller asks for (_refresh.html): the page's own URL
    (static/actions.js polls the address bar's query instead, once htmx
    has changed it), the ids of its fragments, those read on every poll and
    those read every REFRESH_SELDOM_EVERY-th; None where nothing refreshes."""
    interval = state().settings.refresh_interval
    if not interval or interval <= 0:
        return None
    endpoint = (request.endpoint or "").rpartition(".")[2]
    workflow_id = (request.view_args or {}).get("workflow_id")
    if endpoint == "workflows" and request.method == "GET":
        query = request.query_string.decode("latin-1")
        url = url_for("pgbus_web.workflows") + (f"?{query}" if query else "")
        targets = pages.INDEX.polled
    elif endpoint in ("workflow", "run_action", "send_signal") and workflow_id:
        url, targets = url_for("pgbus_web.workflow", workflow_id=workflow_id), pages.RUN.polled
    else:
        return None
    return {
        "url": url,
        "interval": int(interval),
        "targets": ",".join(f"#{target}" for target in targets),
        "often": ",".join(target for target in targets if target not in REFRESH_SELDOM),
        "seldom": ",".join(target for target in targets if target in REFRESH_SELDOM),
        "seldom_every": REFRESH_SELDOM_EVERY,
    }


def back_to_index(verb: str) -> Response:
    """GET on a bulk action URL: the runs index."""
    return see_other(url_for("pgbus_web.workflows"))


def register(blueprint: Blueprint) -> None:
    csrf.init_blueprint(blueprint)
    # Static parts win over converters, so /workflows/bulk/<verb>
    # (routes/operations.py) and
    # /workflows/<id>/signals are not taken for a run id or a verb; a run
    # whose id is "bulk" is written "~YnVsaw" (run_ids.py). The verb is the
    # last segment: the run id may hold slashes. A GET on a run's action
    # URL is the run page's (views.workflow sends it to the run).
    run = f"/workflows/<{run_ids.CONVERTER}:workflow_id>"
    blueprint.add_url_rule(f"{run}/signals", "send_signal", send_signal, methods=["POST"])
    blueprint.add_url_rule(f"{run}/<verb>", "run_action", run_action, methods=["POST"])
    blueprint.add_url_rule("/workflows/bulk/<verb>", "bulk_action_page", back_to_index, methods=["GET"])
    blueprint.register_error_handler(403, forbidden)
    blueprint.register_error_handler(csrf.CSRFError, csrf_failed)
    blueprint.register_error_handler(413, too_large)


# What the templates call (template_names.py gives them).
TEMPLATE_NAMES = {"pgbus_run_actions": _run_actions, "pgbus_group_actions": _group_actions, "pgbus_refresh": refresh}
