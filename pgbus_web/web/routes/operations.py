"""The routes of operations (docs/operations.md): one verb on every run a filter of
the index matches, previewed, confirmed with a reason, then tracked.

- POST /workflows/operations: without ``confirmed=1`` the preview (a page;
  with htmx the dialog alone, swapped into the page it was asked from);
  with it, the operation is created and the answer leads to its page
  (303; htmx: HX-Redirect). A count that changed since the preview answers
  the fresh preview again (409) with a message.
- GET /workflows/operations/<id>: its progress (the fragment polls itself
  while it is queued or running); POST .../cancel stops it, .../pause and
  .../resume hold it and let it go on, .../approve lets a second operator
  start one awaiting approval, .../pace changes its rate and ceiling.
- GET /workflows/operations: the recent ones.

Routes stay thin: checks.py reads the form, core/operation_acts.py decides,
problems.py words a refusal, answers.py answers.
"""

from __future__ import annotations

from typing import Any, cast
from urllib.parse import parse_qsl, urlencode

from flask import (
    Blueprint,
    Response,
    get_flashed_messages,
    make_response,
    render_template,
    request,
    url_for,
)
from werkzeug.datastructures import MultiDict

from ...core import checks, operation_acts, operation_reads, page_reads, permissions, problems
from ...core.words import pace, results, verb_labels
from ...i18n import current_timezone
from ...plumbing import hx, reading
from ...plumbing.redirects import see_other
from ...plumbing.security import current_policy, principal
from ...plumbing.state import state
from ...rules import run_filters as filters
from ...rules import states, verb_table
from ...runtime import errors, operation_preview, operation_record
from ...runtime.clock import utcnow
from ..answering import answers, pages, render
from ..drawing import filter_chips, operation_words
from . import views

# The statuses whose page no longer shows the creation's banner (a
# cancelled one shows its own message instead).
ENDED_QUIETLY = (states.OPERATION_DONE, states.OPERATION_FAILED)


def _filters() -> filters.RunFilters:
    """The index filters the form carries (its ``query`` field), as the
    index reads them: a filter the index refuses is refused here too."""
    return filters.parse_query(MultiDict(parse_qsl(request.form.get(checks.QUERY_FIELD, ""), keep_blank_values=True)))


def preview_answer(
    preview: operation_preview.Preview,
    form: dict[str, Any],
    *,
    status: int = 200,
    message: str | None = None,
    errors_by_field: dict[str, str] | None = None,
) -> Response:
    """The preview: a page, or with htmx the dialog alone (with the message
    in the messages area)."""
    page = {
        "preview": preview,
        "form": form,
        "chips": filter_chips.chips(filters.parse(preview.query)),
        "message": message,
        "errors": errors_by_field or {},
        "statuses": states.RUN,
        "tz_name": str(current_timezone()),
        **operation_words.operation_preview(preview),
        **operation_words.pace_preview(
            preview, form, operation_acts.approval(state().database.primary, state().settings)
        ),
    }
    page.update(views.common())
    if hx.details().request:
        body = render_template(pages.OPERATION_DIALOG_TEMPLATE, **page)
        if message:
            body += answers.messages("warn" if status == 409 else "error", message)
        return render.answer(body, status)
    if message:
        page["pgbus_messages"] = [("warn" if status == 409 else "error", message)]
    return make_response(render_template(pages.OPERATION_PREVIEW.template, **page), status)


def _shown(parsed: checks.OperationForm, run_filters: filters.RunFilters) -> dict[str, Any]:
    """What the form's fields show again, as typed."""
    values = {
        name: request.form.get(name, "") for name in ("at", "from_step", "name", "payload", "rate", "max_in_flight")
    }
    values.update(verb=parsed.verb, reason=parsed.reason or "", query=urlencode(run_filters.query()))
    if parsed is not None and parsed.params.get("at") is not None and not values["at"].strip():
        values["at"] = checks.local_input(parsed.params["at"], checks.form_zone(request.form, current_timezone()))
    return values


def _refused(refusal: problems.Refusal) -> Response:
    """A refusal of the operation's form: the message; htmx leaves the
    dialog as it is (HX-Reswap), so what was typed stays."""
    response = answers.refused(refusal)
    if hx.details().request:
        response.headers["HX-Reswap"] = "none"
    return response


def create():
    """POST /workflows/operations."""
    now = utcnow()
    try:
        run_filters = _filters()
        parsed = checks.parse_operation(request.form, tz=current_timezone(), now=now, verbs=operation_record.VERBS)
    except (filters.FilterError, checks.FormError) as problem:
        return _refused(problems.refusal(problem))
    return answer(run_filters, parsed, now=now)


def answer(run_filters: filters.RunFilters, parsed: checks.OperationForm, *, now) -> Response:
    """The preview of *parsed* on *run_filters*, or, confirmed, the
    operation created (a needs-attention group's button comes here too,
    with its group's filter)."""
    settings = state().settings
    engine = state().database.primary
    who = principal()
    if not parsed.confirmed:
        try:
            shown = operation_acts.preview(engine, settings, who, run_filters, parsed.verb, parsed.params, now=now)
        except (errors.WorkflowError, operation_record.OperationError, permissions.NotPermitted) as problem:
            return _refused(problems.refusal(problem, verb=parsed.verb))
        return preview_answer(shown, _shown(parsed, run_filters))
    try:
        created = operation_acts.start(
            engine,
            settings,
            who,
            run_filters,
            parsed.verb,
            parsed.params,
            reason=parsed.reason,
            expected=parsed.expected,
            now=now,
            **parsed.pace,
        )
    except operation_record.CountChanged as problem:
        refusal = problems.refusal(problem)
        return preview_answer(
            problem.preview, _shown(parsed, run_filters), status=refusal.status, message=refusal.message
        )
    except operation_record.ReasonMissing as problem:
        refusal = problems.refusal(problem)
        shown = operation_acts.preview(engine, settings, who, run_filters, parsed.verb, parsed.params, now=now)
        return preview_answer(
            shown,
            _shown(parsed, run_filters),
            status=refusal.status,
            message=refusal.message,
            errors_by_field={"reason": refusal.message},
        )
    except (errors.WorkflowError, operation_record.OperationError, permissions.NotPermitted) as problem:
        return _refused(problems.refusal(problem, verb=parsed.verb))
    location = url_for("pgbus_web.operation", operation_id=created["id"])
    message = results.operation_created(created)
    return answers.committed(lambda: _to_operation(location, message), message, "ok", lambda: location)


def _to_operation(location: str, message: str) -> Response:
    """Where a created operation leads: its page (htmx: HX-Redirect)."""
    answers.flash_message("ok", message)
    if hx.details().request:
        response = make_response("", 200)
        response.headers["HX-Redirect"] = location
        return response
    return see_other(location)


def group_action(verb: str):
    """POST /workflows/bulk/<verb>: a needs-attention group's button, an
    operation on the group's filter (filters.group_query: class, step,
    stuck reason, error class or none), every run of it, no cap. The form
    carries the group; the preview asks the reason (``note`` is taken as
    the reason when a form sends one)."""
    if verb not in verb_labels.BULK_VERBS:
        return answers.refused(problems.unknown_verb(verb))
    settings = state().settings
    try:
        group = checks.parse_group(request.form)
        note = checks.reason(request.form, "note")
        run_filters = filters.parse(filters.group_query(group))
        parsed = checks.parse_operation(
            MultiDict({**request.form.to_dict(), "verb": verb_labels.BULK_VERBS[verb], "reason": note or ""}),
            tz=current_timezone(),
            now=utcnow(),
            verbs=operation_record.VERBS,
        )
    except (checks.FormError, filters.FilterError) as problem:
        return answers.refused(problems.refusal(problem))
    class_loaded = page_reads.definition_of(settings, group["workflow_class"]) is not None
    if verb not in verb_labels.bulk_verbs(group, class_loaded):
        refusal = problems.not_offered(verb, group["reason"])
        return answers.message_answer(refusal.status, refusal.title, refusal.message)
    return answer(run_filters, parsed, now=utcnow())


def _flashed() -> list[tuple[str, str]]:
    """The flashed messages with their categories (flask's type covers both of its answers)."""
    return cast(list[tuple[str, str]], get_flashed_messages(with_categories=True))


def _page(operation: dict[str, Any]) -> dict[str, Any]:
    now = utcnow()
    page = {"operation": operation, "now": now, **operation_words.operation_progress(operation, now=now)}
    with reading.read() as conn:
        found = operation_reads.outcome(conn, state().settings, operation, now)
    page["outcomes"] = operation_words.outcome_groups(found)
    page["step_outcome"] = operation_words.step_outcome(found)
    page["outcome"] = found
    # The page stays live while the operation works and, after, while the
    # runs it acted on still move (their outcome counts change).
    page["pace_lines"] = pace.pace_lines(operation.get("rate"), operation.get("max_in_flight"))
    page["starts_work"] = operation["verb"] in verb_table.STARTS_WORK
    page["can_approve"] = operation_acts.may_approve(state().database.primary, principal(), operation)
    page["can_steer"] = operation_acts.may_steer(state().database.primary, principal(), operation)
    page["polling"] = (
        page["open"] or page["held"] or any(group["total"] for group in page["outcomes"] if group["kind"] == "moving")
    )
    page["chips"] = (
        filter_chips.chips(operation_record.filters_of(operation))
        if operation_words.filters_readable(operation)
        else []
    )
    page.update(views.common())
    return page


def show(operation_id: int):
    """GET /workflows/operations/<id>."""
    with state().database.primary.connect() as conn:
        found = operation_reads.find(conn, operation_id)
    if found is None:
        return answers.error_page_for(problems.operation_not_found(operation_id))
    page = _page(found)
    ended = found["status"] in ENDED_QUIETLY
    created = results.operation_created_all(found)
    if not render.requested_blocks(pages.OPERATION.fragments):
        # Reached from its start (the flash says so): the page opens with
        # focus on the operation, so a keyboard is not sent back to the top.
        page["arrived"] = any(message in created for _, message in _flashed())
        if ended:
            # "Operation N started." is stale once it is done: the flash is
            # taken, and every other message shown.
            page["pgbus_messages"] = [(category, message) for category, message in _flashed() if message not in created]
        return render.page(pages.OPERATION.template, page, pages.OPERATION.fragments)
    response = render.page(pages.OPERATION.template, page, pages.OPERATION.fragments)
    if not page["polling"]:
        # 286: htmx stops polling (the morph keeps the polling node).
        response.status_code = 286
    if ended:
        # The banner the creation flashed goes with the poll that sees it done.
        response.set_data(
            response.get_data(as_text=True) + render_template(pages.MESSAGES_TEMPLATE, pgbus_messages=[], oob=True)
        )
    return response


def cancel(operation_id: int):
    """POST /workflows/operations/<id>/cancel."""
    try:
        checks.operation_id(operation_id)
    except operation_record.OperationNotFound as problem:
        return answers.refused(problems.refusal(problem))
    try:
        cancelled = operation_acts.cancel(
            state().database.primary, principal(), operation_id, reason=request.form.get("reason")
        )
    except (operation_record.OperationError, permissions.NotPermitted) as problem:
        refusal = problems.refusal(problem)
        if refusal.status == 404:
            return answers.refused(refusal)
        return _operation_answer(operation_id, refusal.status, refusal.message, "warn")
    message = results.operation_cancelled(cancelled)
    return answers.committed(
        lambda: _operation_answer(operation_id, 200, message, "ok"),
        message,
        "ok",
        lambda: url_for("pgbus_web.operation", operation_id=operation_id),
    )


def _change(operation_id: int, change, done):
    """A change of an operation from its page (pause, go on, approve, its
    pace): *change*(engine, id) decides; the page answers with *done*(the
    operation), results.py's sentence."""
    try:
        checks.operation_id(operation_id)
    except operation_record.OperationNotFound as problem:
        return answers.refused(problems.refusal(problem))
    try:
        changed = change(state().database.primary, operation_id)
    except (operation_record.OperationError, checks.FormError, permissions.NotPermitted) as problem:
        refusal = problems.refusal(problem)
        if refusal.status == 404:
            return answers.refused(refusal)
        return _operation_answer(operation_id, refusal.status, refusal.message, "warn")
    message = done(changed)
    return answers.committed(
        lambda: _operation_answer(operation_id, 200, message, "ok"),
        message,
        "ok",
        lambda: url_for("pgbus_web.operation", operation_id=operation_id),
    )


def pause(operation_id: int):
    """POST /workflows/operations/<id>/pause."""
    return _change(
        operation_id,
        lambda engine, op: operation_acts.pause(engine, principal(), op, reason=request.form.get("reason")),
        results.operation_paused,
    )


def go_on(operation_id: int):
    """POST /workflows/operations/<id>/resume."""
    return _change(
        operation_id,
        lambda engine, op: operation_acts.go_on(engine, principal(), op, reason=request.form.get("reason")),
        results.operation_resumed,
    )


def approve(operation_id: int):
    """POST /workflows/operations/<id>/approve."""
    return _change(
        operation_id,
        lambda engine, op: operation_acts.approve(engine, principal(), op, reason=request.form.get("reason")),
        results.operation_approved,
    )


def set_pace(operation_id: int):
    """POST /workflows/operations/<id>/pace: rate and max_in_flight (a
    field sent empty clears it)."""
    return _change(
        operation_id,
        lambda engine, op: operation_acts.set_pace(engine, principal(), op, checks.parse_pace(request.form)),
        results.operation_paced,
    )


def _operation_answer(operation_id: int, status: int, message: str, category: str) -> Response:
    if status < 400 and not hx.details().request:
        answers.flash_message(category, message)
        return see_other(url_for("pgbus_web.operation", operation_id=operation_id))
    with state().database.primary.connect() as conn:
        found = operation_reads.find(conn, operation_id)
    if found is None:  # gone since the act (a prune): as its page says it
        return answers.error_page_for(problems.operation_not_found(operation_id))
    page = _page(found)
    if hx.details().request:
        body = render.fragments(pages.OPERATION.template, pages.OPERATION.blocks, page)
        return render.answer(body + answers.messages(category, message), status)
    page["pgbus_messages"] = [(category, message)]
    return make_response(render_template(pages.OPERATION.template, **page), status)


def recent():
    """GET /workflows/operations."""
    with reading.read() as conn:
        rows = operation_reads.recent(conn)
    now = utcnow()
    page = {"operations": [dict(row, **operation_words.operation_progress(row, now=now)) for row in rows], "now": now}
    page.update(views.common())
    return render.page(pages.OPERATIONS.template, page, pages.OPERATIONS.fragments)


def back_to_page(operation_id: int):
    """GET on the cancel URL (a refused plain post left it in the address bar)."""
    return see_other(url_for("pgbus_web.operation", operation_id=operation_id))


def operation_verbs(fitting=None, filters=None) -> list[dict[str, str]]:
    """The verbs the index's entry offers, with their labels (named as the
    dialog names them for those *filters*): those of *fitting* (the verbs
    the matched runs' statuses allow), all when None; of those, the ones
    the policy lets this person use on some class (the preview then names
    a class they may not act on)."""
    who, kept = principal(), current_policy()
    return [
        {"name": verb, "label": operation_words.operation_verb(verb, filters)}
        for verb in operation_record.VERBS
        if (fitting is None or verb in fitting) and permissions.may_some(who, verb, kept)
    ]


# What the templates call (template_names.py gives them).
TEMPLATE_NAMES = {"pgbus_operation_verbs": operation_verbs}


def register(blueprint: Blueprint) -> None:
    # "operations" is a reserved run-id word (run_ids.py): these static
    # paths win over the run routes' converter.
    blueprint.add_url_rule("/workflows/bulk/<verb>", "bulk_action", group_action, methods=["POST"])
    blueprint.add_url_rule("/workflows/operations", "operations", recent, methods=["GET"])
    blueprint.add_url_rule("/workflows/operations", "operation_create", create, methods=["POST"])
    blueprint.add_url_rule("/workflows/operations/<int:operation_id>", "operation", show, methods=["GET"])
    blueprint.add_url_rule(
        "/workflows/operations/<int:operation_id>/cancel", "operation_cancel", cancel, methods=["POST"]
    )
    blueprint.add_url_rule(
        "/workflows/operations/<int:operation_id>/cancel", "operation_cancel_page", back_to_page, methods=["GET"]
    )
    for name, view in (("pause", pause), ("resume", go_on), ("approve", approve), ("pace", set_pace)):
        blueprint.add_url_rule(
            f"/workflows/operations/<int:operation_id>/{name}", f"operation_{name}", view, methods=["POST"]
        )
        blueprint.add_url_rule(
            f"/workflows/operations/<int:operation_id>/{name}", f"operation_{name}_page", back_to_page, methods=["GET"]
        )
