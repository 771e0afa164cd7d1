"""The routes that change runs: an outside verb on one run, a signal to one
run, a verb on one needs-attention group. Each is thin: read the form
(forms.py), call one runtime function, answer.

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
from datetime import datetime
from typing import Any, Callable, Mapping
from urllib.parse import parse_qsl, urlsplit

from flask import Blueprint, Response, flash, make_response, redirect, render_template, request, url_for
from markupsafe import Markup
from werkzeug.datastructures import MultiDict
from werkzeug.exceptions import Forbidden, RequestEntityTooLarge

from .. import states
from ..i18n import current_locale, current_timezone, t, tn
from ..models import workflows
from ..runtime import errors, verbs
from ..runtime.clock import utcnow
from . import buttons, context, csrf, filters, forms, hx, presenters, render, run_ids, timefmt, views
from .extension import state
from .security import UNSAFE_METHODS

log = logging.getLogger(__name__)

RUN_TEMPLATE = views.RUN_TEMPLATE
INDEX_TEMPLATE = views.INDEX_TEMPLATE
FLASH_TEMPLATE = "pgbus_web/_flash.html"
CONFIRM_TEMPLATE = "pgbus_web/bulk_confirm.html"
# The index fragments a bulk action refreshes.
INDEX_BLOCKS = ("counts", "attention", "runs")
# The most runs one bulk request moves (oldest stuck first); the rest
# stay in the group for the next request.
BULK_LIMIT = workflows.ATTENTION_IDS_LIMIT
# Longest actor name kept: the audit trail shows it on every line.
ACTOR_LIMIT = 200


def actor() -> str:
    """Who acts, as the audit trail records it: ``dashboard:<name>`` with
    the name from the actor_name setting (the host's resolver)."""
    name = str(state().settings.actor_name(request) or "").strip() or "anonymous"
    return f"dashboard:{name[:ACTOR_LIMIT]}"


# --- messages ------------------------------------------------------------------


def already(status: str) -> str:
    """'This run is already <status>': what the loser of a race reads."""
    return {
        states.READY: t("pgbus.workflows.forms.already.ready"),
        states.RUNNING: t("pgbus.workflows.forms.already.running"),
        states.WAITING: t("pgbus.workflows.forms.already.waiting"),
        states.PAUSED: t("pgbus.workflows.forms.already.paused"),
        states.COMPLETED: t("pgbus.workflows.forms.already.completed"),
        states.FAILED: t("pgbus.workflows.forms.already.failed"),
        states.CANCELLED: t("pgbus.workflows.forms.already.cancelled"),
    }.get(status) or t("pgbus.workflows.forms.already.other", status=status)


def _moment(moment: datetime | None) -> str:
    if not moment:
        return timefmt.NONE
    return timefmt.absolute(moment, locale=current_locale(), tz=current_timezone())


def done(verb: str, before: Mapping[str, Any], after: Mapping[str, Any], options: forms.VerbForm) -> str:
    """The sentence after a verb went through."""
    step_before = before.get("current_step") or timefmt.NONE
    step_after = after.get("current_step") or timefmt.NONE
    if verb == "resume":
        if after.get("status") == states.COMPLETED:
            return t("pgbus.workflows.forms.done.resume_finished")
        return t("pgbus.workflows.forms.done.resume", step=step_after)
    if verb == "resume_at":
        return t("pgbus.workflows.forms.done.resume_at", step=step_after, time=_moment(options.at))
    if verb == "run_now":
        return t("pgbus.workflows.forms.done.run_now", step=step_after)
    if verb == "skip":
        if after.get("status") == states.COMPLETED:
            return t("pgbus.workflows.forms.done.skip_finished", step=step_before)
        return t("pgbus.workflows.forms.done.skip", step=step_before, next=step_after)
    if verb == "rerun":
        return t("pgbus.workflows.forms.done.rerun", step=step_after)
    if verb == "cancel":
        return t("pgbus.workflows.forms.done.cancel")
    if verb == "pause":
        return t("pgbus.workflows.forms.done.pause")
    return t("pgbus.workflows.forms.done.reschedule", step=step_after, time=_moment(options.at))


def _flash(category: str, message: str) -> None:
    try:
        flash(message, category)
    except RuntimeError:
        # A host app without SECRET_KEY has no session to carry it; the
        # page the redirect leads to shows the new state all the same.
        log.info("pgbus-web: no session for flashed messages (set SECRET_KEY)")


def _messages(category: str, message: str) -> str:
    return render_template(FLASH_TEMPLATE, pgbus_messages=[(category, message)], oob=True)


# --- answers -------------------------------------------------------------------


def message_answer(status: int, title: str, message: str, category: str = "error") -> Response:
    """A refusal that has no page to show again: for htmx the message
    alone, otherwise the error page."""
    if hx.details().request:
        return make_response(_messages(category, message), status)
    return views.error_page(status, title, message)


def _run_not_found(workflow_id: str) -> Response:
    return message_answer(
        404,
        t("pgbus.workflows.show.not_found_title"),
        t("pgbus.workflows.show.not_found", workflow_id=views.printable(workflow_id)),
    )


def run_answer(
    workflow_id: str, status: int, message: str, category: str, refused: Mapping[str, Any] | None = None
) -> Response:
    """The run as it is now, with *message*; *refused* (verb, values,
    errors) shows that form back."""
    if status < 400 and not hx.details().request:
        # A plain form's success is a redirect: nothing to read or draw here.
        _flash(category, message)
        return redirect(url_for("pgbus_web.workflow", workflow_id=workflow_id), 303)
    settings = state().settings
    # The primary, not the replica: the operator must see what just happened.
    with state().database.primary.connect() as conn:
        try:
            page = context.run_context(conn, settings, workflow_id)
        except context.NotFound:
            return _run_not_found(workflow_id)
    page.update(views.common(), refused=refused)
    if hx.details().request:
        body = render.fragments(RUN_TEMPLATE, views.RUN_FRAGMENTS.values(), page) + _messages(category, message)
        return make_response(body, status)
    page["pgbus_messages"] = [(category, message)]
    return make_response(render_template(RUN_TEMPLATE, **page), status)


# The messages area of an answer drawn without a template: what a done
# action answers when drawing the page failed (done_anyway).
_BARE_MESSAGES = Markup(
    '<div class="pgbus-messages" id="pgbus-messages" role="status" aria-live="polite"{oob}>'
    '<p class="pgbus-notice pgbus-notice-{category}" data-category="{category}">{message}</p>'
    '<p class="pgbus-notice pgbus-notice-warn pgbus-redraw-failed" data-category="warn">{note}</p></div>'
)


def done_anyway(message: str, category: str, location: Callable[[], str]) -> Response:
    """The answer to an action that has committed when drawing its answer
    failed: still a success (an operator who read an error would do it
    again), saying it was done and that the page could not be redrawn.
    htmx gets the messages area alone; a plain form the redirect to
    *location()*, or, failing that too, a bare page with the messages."""
    note = t("pgbus.workflows.forms.redraw_failed")
    category = category if category in ("ok", "warn") else "ok"
    if not hx.details().request:
        try:
            _flash(category, message)
            return redirect(location(), 303)
        except Exception:  # noqa: BLE001  (the last resort must not fail)
            log.exception("pgbus-web: no redirect after a done action")
    oob = Markup(' hx-swap-oob="innerHTML"') if hx.details().request else Markup("")
    body = _BARE_MESSAGES.format(oob=oob, category=category, message=message, note=note)
    if not hx.details().request:
        body = Markup('<!doctype html><html lang="{}"><title>pgbus</title><main>{}</main></html>').format(
            current_locale(), body
        )
    return make_response(body, 200)


def committed(answer: Callable[[], Response], message: str, category: str,
              location: Callable[[], str]) -> Response:
    """*answer()* for an action whose transaction has committed; whatever
    fails while it reads or draws the page is logged, and the operator
    still reads that it was done (done_anyway), never an error page."""
    try:
        return answer()
    except Exception:  # noqa: BLE001  (any failure after the commit)
        log.exception("pgbus-web: the action was done, but drawing its answer failed")
        return done_anyway(message, category, location)


def _refused_form(workflow_id: str, verb: str, field: str, message: str, status: int, names) -> Response:
    refused = {"verb": verb, "values": forms.values_of(request.form, names), "errors": {field: message}}
    return run_answer(workflow_id, status, message, "error", refused)


def workflow_error(workflow_id: str, verb: str, problem: errors.WorkflowError, names) -> Response:
    """The answer to what the runtime refused (it wrote nothing)."""
    label = buttons.verb_label(verb)
    if isinstance(problem, errors.RunNotFound):
        return _run_not_found(workflow_id)
    if isinstance(problem, errors.WrongStatus):
        if problem.status == "gone":
            return _run_not_found(workflow_id)
        if problem.status in problem.allowed:
            # Allowed from this status, refused for another reason (say,
            # skipping past the last step): "already" would not be true.
            message = t("pgbus.workflows.forms.errors.not_now", action=label)
        else:
            message = already(problem.status)
        return run_answer(workflow_id, 409, message, "error")
    if isinstance(problem, errors.InvalidTime):
        if problem.problem == errors.InvalidTime.MISSING:
            message = t("pgbus.workflows.forms.errors.time_missing")
        elif problem.problem == errors.InvalidTime.PAST:
            message = t("pgbus.workflows.forms.errors.time_past", value=str(problem.value))
        else:
            message = t("pgbus.workflows.forms.errors.time_unreadable", value=str(problem.value))
        return _refused_form(workflow_id, verb, "at", message, 422, names)
    if isinstance(problem, errors.UnknownStep):
        message = t(
            "pgbus.workflows.forms.errors.unknown_step", step=problem.step, steps=", ".join(problem.known)
        )
        if verb == "rerun":
            return _refused_form(workflow_id, verb, "from_step", message, 422, names)
        return run_answer(workflow_id, 409, message, "error")
    if isinstance(problem, errors.ClassNotLoaded):
        message = t("pgbus.workflows.forms.errors.class_not_loaded", action=label, workflow_class=problem.workflow_class)
        return run_answer(workflow_id, 409, message, "error")
    if isinstance(problem, errors.SubjectBusy):
        message = t(
            "pgbus.workflows.forms.errors.subject_busy",
            workflow_class=problem.workflow_class,
            subject=f"{problem.subject_type} {problem.subject_id}",
        )
        return run_answer(workflow_id, 409, message, "error")
    if isinstance(problem, errors.InvalidSignalName):
        return _refused_form(
            workflow_id, verb, "name", t("pgbus.workflows.forms.errors.signal_name_missing"), 422, names
        )
    if isinstance(problem, errors.InvalidPayload):
        message = t("pgbus.workflows.forms.errors.payload_not_json", detail=problem.detail)
        return _refused_form(workflow_id, verb, "payload", message, 422, names)
    log.warning("pgbus-web: %s on %s refused: %s", verb, workflow_id, problem)
    return run_answer(workflow_id, 409, t("pgbus.workflows.forms.errors.refused", action=label, detail=str(problem)), "error")


# --- one run -------------------------------------------------------------------


def _find(workflow_id: str) -> dict[str, Any] | None:
    if not context.storable(workflow_id):
        return None
    with state().database.primary.connect() as conn:
        return workflows.find(conn, workflow_id)


def run_action(workflow_id: str, verb: str):
    """POST /workflows/<workflow_id>/<verb>: one outside verb on one run."""
    if verb not in verbs.VERBS:
        return message_answer(
            404, t("pgbus.web.errors.not_found_title"), t("pgbus.workflows.forms.errors.unknown_verb", verb=verb[:50])
        )
    run = _find(workflow_id)
    if run is None:
        return _run_not_found(workflow_id)
    definition = context.definition_of(state().settings, run["workflow_class"])
    names = forms.VERB_FIELDS[verb]
    try:
        options = forms.parse_verb(
            verb,
            request.form,
            tz=current_timezone(),
            now=utcnow(),
            step_names=tuple(definition.step_names) if definition is not None else (),
        )
    except forms.FormError as problem:
        return _refused_form(workflow_id, verb, problem.field, problem.message, problem.status, names)
    try:
        after = verbs.perform(
            state().database.primary, verb, workflow_id,
            actor=actor(), registry=state().settings.registry, **options.options(),
        )
    except errors.WorkflowError as problem:
        return workflow_error(workflow_id, verb, problem, names)
    message = done(verb, run, after, options)
    return committed(lambda: run_answer(workflow_id, 200, message, "ok"), message, "ok", _run_url(workflow_id))


def _run_url(workflow_id: str) -> Callable[[], str]:
    return lambda: url_for("pgbus_web.workflow", workflow_id=workflow_id)


def send_signal(workflow_id: str):
    """POST /workflows/<workflow_id>/signals: deliver a signal to one run."""
    names = forms.SIGNAL_FIELDS
    if _find(workflow_id) is None:
        return _run_not_found(workflow_id)
    try:
        signal = forms.parse_signal(request.form)
    except forms.FormError as problem:
        return _refused_form(workflow_id, buttons.SIGNAL, problem.field, problem.message, problem.status, names)
    try:
        result = verbs.signal(
            state().database.primary, workflow_id, signal.name, signal.payload, signal.idempotency_key, actor=actor()
        )
    except errors.WorkflowError as problem:
        return workflow_error(workflow_id, buttons.SIGNAL, problem, names)
    if result.duplicate:
        message = t("pgbus.workflows.forms.done.signal_duplicate", idempotency_key=signal.idempotency_key or "")
        category = "warn"
    elif result.signal.get("status") == states.SIGNAL_CLAIMED:
        message = t("pgbus.workflows.forms.done.signal_claimed", name=signal.name,
                    step=result.run.get("current_step") or timefmt.NONE)
        category = "ok"
    else:
        message, category = t("pgbus.workflows.forms.done.signal", name=signal.name), "ok"
    return committed(lambda: run_answer(workflow_id, 200, message, category), message, category,
                     _run_url(workflow_id))


# --- a needs-attention group ----------------------------------------------------


def _current_filters() -> filters.RunFilters | None:
    """The filters of the index page htmx posted from, so its runs list
    stays as the operator had it."""
    current = hx.details().current_url
    if not current:
        return filters.RunFilters()
    parts = urlsplit(current)
    if parts.path != url_for("pgbus_web.workflows"):
        return filters.RunFilters()
    try:
        return filters.parse(MultiDict(parse_qsl(parts.query)))
    except filters.FilterError:
        return None


def _posted_filters() -> filters.RunFilters:
    """The filters of the index a plain bulk form was posted from: its
    ``back`` field carries that page's query (read as filters only, so it
    can lead nowhere but the index)."""
    try:
        return filters.parse(MultiDict(parse_qsl(request.form.get("back", ""))))
    except filters.FilterError:
        return filters.RunFilters()


def index_answer(status: int, message: str, category: str) -> Response:
    """The index's counts, groups and runs as they are now, with *message*."""
    settings = state().settings
    run_filters = _current_filters() if hx.details().request else _posted_filters()
    if status < 400 and not hx.details().request:
        _flash(category, message)
        return redirect(url_for("pgbus_web.workflows", **run_filters.query()), 303)
    with state().database.primary.connect() as conn:
        page = context.index_context(conn, settings, run_filters)
    page.update(views.common(), filter_error=None)
    if hx.details().request:
        body = render.fragments(INDEX_TEMPLATE, INDEX_BLOCKS, page) + _messages(category, message)
        return make_response(body, status)
    page["pgbus_messages"] = [(category, message)]
    return make_response(render_template(INDEX_TEMPLATE, **page), status)


def _fresh_group(conn, group: Mapping[str, Any], now: datetime) -> dict[str, Any] | None:
    limits = context.thresholds(state().settings)
    for row in workflows.attention_groups(conn, now=now, workflow_class=group["workflow_class"], **limits):
        if all(row.get(name) == group.get(name) for name in forms.GROUP_FIELDS):
            return row
    return None


def bulk_message(result: verbs.BulkResult) -> str:
    parts = [tn("pgbus.workflows.bulk.moved", result.moved)]
    if result.moved_on:
        parts.append(tn("pgbus.workflows.bulk.moved_on", result.moved_on))
    if result.errors:
        parts.append(tn("pgbus.workflows.bulk.refused", len(result.errors)))
    return " ".join(parts)


def bulk_action(verb: str):
    """POST /workflows/bulk/<verb>: one verb on the runs of one
    needs-attention group, at most BULK_LIMIT, oldest stuck first, each in
    its own transaction. Without ``confirmed=1`` it only asks first."""
    if verb not in buttons.BULK_VERBS:
        return message_answer(
            404, t("pgbus.web.errors.not_found_title"), t("pgbus.workflows.forms.errors.unknown_verb", verb=verb[:50])
        )
    settings = state().settings
    try:
        group = forms.parse_group(request.form)
        note = forms.reason(request.form, "note")
    except forms.FormError as problem:
        return message_answer(problem.status, t("pgbus.web.errors.bad_request_title"), problem.message)
    registry = settings.registry
    class_loaded = context.definition_of(settings, group["workflow_class"]) is not None
    if verb not in buttons.bulk_verbs(group, class_loaded):
        message = t("pgbus.workflows.bulk.not_offered", action=buttons.bulk_label(verb),
                    reason=t(f"pgbus.workflows.attention.reasons.{group['reason']}"))
        return message_answer(422, t("pgbus.web.errors.bad_request_title"), message)
    now = utcnow()
    with state().database.primary.connect() as conn:
        ids = workflows.attention_ids(conn, group, now=now, limit=BULK_LIMIT, **context.thresholds(settings))
        fresh = _fresh_group(conn, group, now) if ids and request.form.get("confirmed") != "1" else None
    if not ids:
        return index_answer(409, t("pgbus.workflows.bulk.emptied"), "warn")
    if request.form.get("confirmed") != "1":
        shown = dict(fresh or group, count=(fresh or {}).get("count", len(ids)))
        return render_template(
            CONFIRM_TEMPLATE,
            verb=verb,
            label=buttons.bulk_label(verb),
            question=presenters.bulk_confirm(verb, shown),
            group=group,
            count=shown["count"],
            limit=BULK_LIMIT,
            note=note or "",
            back=_posted_filters().query(),
        )
    result = verbs.bulk(
        state().database.primary, buttons.BULK_VERBS[verb], ids,
        actor=actor(), registry=registry, reason=note,
    )
    for workflow_id, problem in result.errors:
        log.warning("pgbus-web: bulk %s left %s: %s", verb, workflow_id, problem)
    message, category = bulk_message(result), "warn" if result.errors else "ok"
    return committed(lambda: index_answer(200, message, category), message, category,
                     lambda: url_for("pgbus_web.workflows"))


# --- refusals before the view ----------------------------------------------------


def forbidden(problem: Forbidden):
    """403: a viewer posting (security.py), or a page the host hides."""
    if request.method in UNSAFE_METHODS:
        return message_answer(403, t("pgbus.web.errors.forbidden_title"), t("pgbus.workflows.forms.errors.forbidden"))
    return views.http_error(problem)


def csrf_failed(problem: csrf.CSRFError):
    return message_answer(400, t("pgbus.web.errors.bad_request_title"), t("pgbus.workflows.forms.errors.csrf"))


def too_large(problem: RequestEntityTooLarge):
    return message_answer(
        413,
        t("pgbus.workflows.forms.errors.too_large_title"),
        t("pgbus.workflows.forms.errors.too_large", max=csrf.MAX_BODY // 1024),
    )


# --- template helpers ------------------------------------------------------------


def _run_actions(run, definition, now, refused=None):
    return buttons.run_actions(run, definition, now=now, tz=current_timezone(), refused=refused)


def _group_actions(group):
    loaded = context.definition_of(state().settings, group.get("workflow_class")) is not None
    return buttons.group_actions(group, loaded)


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
        targets = views.INDEX_FRAGMENTS
    elif endpoint in ("workflow", "run_action", "send_signal") and workflow_id:
        url, targets = url_for("pgbus_web.workflow", workflow_id=workflow_id), views.RUN_FRAGMENTS
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
    return redirect(url_for("pgbus_web.workflows"), 303)


def register(blueprint: Blueprint) -> None:
    csrf.init_blueprint(blueprint)
    # Static parts win over converters, so /workflows/bulk/<verb> and
    # /workflows/<id>/signals are not taken for a run id or a verb; a run
    # whose id is "bulk" is written "~YnVsaw" (run_ids.py). The verb is the
    # last segment: the run id may hold slashes. A GET on a run's action
    # URL is the run page's (views.workflow sends it to the run).
    run = f"/workflows/<{run_ids.CONVERTER}:workflow_id>"
    blueprint.add_url_rule("/workflows/bulk/<verb>", "bulk_action", bulk_action, methods=["POST"])
    blueprint.add_url_rule(f"{run}/signals", "send_signal", send_signal, methods=["POST"])
    blueprint.add_url_rule(f"{run}/<verb>", "run_action", run_action, methods=["POST"])
    blueprint.add_url_rule("/workflows/bulk/<verb>", "bulk_action_page", back_to_index, methods=["GET"])
    blueprint.register_error_handler(403, forbidden)
    blueprint.register_error_handler(csrf.CSRFError, csrf_failed)
    blueprint.register_error_handler(413, too_large)

    @blueprint.context_processor
    def _action_helpers() -> dict[str, Any]:
        return {
            "pgbus_run_actions": _run_actions,
            "pgbus_group_actions": _group_actions,
            "pgbus_refresh": refresh,
        }
