"""The Locks page and its actions, on the dashboard's blueprint.

- ``GET /locks``: every uniqueness lock with its state, filtered by
  ``state`` and ``queue``, oldest first, in keyset pages.
- ``POST /locks/release`` (``lock_key``): release one lock.
- ``POST /locks/discard`` (``lock_key``, ``queue_name``, ``msg_id``): delete
  the lock's message and release the lock it holds.
- ``POST /locks/reap``: release every orphaned lock, as the reaper does.

The POST routes are for operators only (``can_act``; others get 403) and
each runs in one transaction on the primary. Their forms confirm in the page
itself (a disclosure holding the final button), so they work the same with
or without JavaScript. Without htmx a good POST redirects back to the view
it came from with a flashed message; a failed one re-renders the page with
the error and its status. With htmx the answer is the page's ``locks``
block, carrying the message.
"""

from __future__ import annotations

import logging
from datetime import datetime, timezone
from typing import Any

from flask import Blueprint, Response, abort, current_app, flash, make_response, redirect, request, url_for
from markupsafe import Markup

from ..i18n import t, tn
from ..locks import FRESH, GONE, LIVE, ORPHAN, PARKED, actions, queries
from . import hx, render
from .extension import state
from .filters import FilterError
from .lock_filters import MAX_KEY, MAX_QUEUE, LockFilters, parse, text
from .security import may_act

log = logging.getLogger(__name__)

TEMPLATE = "pgbus_web/locks/index.html"
FRAGMENTS = {"pgbus-locks": "locks"}

# Badge tones: a live or parked lock is doing its job; a gone one leaked a
# little; an orphan blocks its key until someone (or the reaper) acts.
STATE_TONES = {LIVE: "green", PARKED: "blue", FRESH: "gray", GONE: "yellow", ORPHAN: "red"}

# The largest message id PGMQ can hand out (a bigint identity).
MAX_MSG_ID = 2**63 - 1


def state_labels() -> dict[str, str]:
    return {
        LIVE: t("pgbus.locks.states.live"),
        GONE: t("pgbus.locks.states.gone"),
        PARKED: t("pgbus.locks.states.parked"),
        FRESH: t("pgbus.locks.states.fresh"),
        ORPHAN: t("pgbus.locks.states.orphan"),
    }


def locks_context(conn, settings, view: LockFilters, now: datetime | None = None) -> dict[str, Any]:
    """Everything the page shows, read on one connection."""
    floor = settings.lock_age_floor
    page = queries.list_locks(
        conn,
        age_floor=floor,
        limit=settings.page_size,
        state=view.state,
        queue=view.queue,
        after=view.after,
    )
    return {
        "now": now or datetime.now(timezone.utc),
        "view": view,
        "locks": page.rows,
        "next_query": view.next_query(page.next_cursor) if page.next_cursor else None,
        "counts": queries.count_by_state(conn, age_floor=floor, queue=view.queue),
        "queues": queries.queue_counts(conn),
        "known_queues": {table.name for table in queries.queue_tables(conn)},
        "age_floor": floor,
        "state_labels": state_labels(),
        "state_tones": STATE_TONES,
    }


def _page(view: LockFilters, *, notice: tuple[str, str] | None = None, status: int = 200,
          filter_error: str | None = None, primary: bool = False) -> Response:
    # After a write, read it back from the primary: a replica may lag.
    database = state().database
    with (database.write() if primary else database.read()) as conn:
        context = locks_context(conn, state().settings, view)
    context.update(notice=notice, filter_error=filter_error, can_act=may_act())
    return render.page(TEMPLATE, context, FRAGMENTS, status=status)


def locks_index():
    """GET /locks."""
    try:
        return _page(parse(request.args))
    except FilterError as problem:
        return _page(LockFilters(), filter_error=str(problem), status=400)


# --- actions -----------------------------------------------------------------


class BadForm(ValueError):
    """A form field that is missing or cannot be right."""


def _guard() -> None:
    """Operators only. CSRF is checked for the whole blueprint before any
    POST view runs; these forms carry its token field (locks/_forms.html)."""
    if not may_act():
        abort(403)


def _view() -> LockFilters:
    """The view the form was posted from (its query string), to go back to."""
    try:
        return parse(request.args)
    except FilterError:
        return LockFilters()


def _field(name: str, limit: int) -> str:
    try:
        value = text(request.form, name, limit)
    except FilterError as problem:
        raise BadForm(str(problem)) from None
    if value is None:
        raise BadForm(t("pgbus.locks.errors.missing", name=name))
    return value


def _msg_id() -> int:
    value = _field("msg_id", 20).strip()
    # isascii: "²" is a digit to str.isdigit, and not to int().
    if not (value.isascii() and value.isdigit()) or not 0 < int(value) <= MAX_MSG_ID:
        raise BadForm(t("pgbus.locks.errors.bad_message_id", value=value))
    return int(value)


def _problem(problem: Exception) -> tuple[int, str]:
    """The status and the operator's sentence for a refused action."""
    if isinstance(problem, actions.LockNotFound):
        return 404, t("pgbus.locks.errors.not_found", lock_key=problem.lock_key)
    if isinstance(problem, actions.QueueNotFound):
        return 404, t("pgbus.locks.errors.queue_not_found", queue=problem.queue_name)
    if isinstance(problem, actions.MessageNotFound):
        return 409, t("pgbus.locks.errors.message_not_found", msg_id=problem.msg_id, queue=problem.queue_name)
    return 400, str(problem)


def _answer(view: LockFilters, kind: str, message: str, status: int = 200) -> Response:
    if hx.details().request:
        # htmx swaps 2xx answers only; the block carries the error itself.
        return _page(view, notice=(kind, message), primary=True)
    if kind == "ok":
        if current_app.secret_key:
            flash(message, "ok")
        return redirect(url_for("pgbus_web.locks", **view.query()), code=303)
    return _page(view, notice=(kind, message), status=status, primary=True)


def _act(work) -> Response:
    """Run *work(conn)* in one transaction; it returns the sentence to show."""
    _guard()
    view = _view()
    try:
        with state().database.write() as conn:
            message = work(conn)
    except (BadForm, actions.LockActionError) as problem:
        status, message = _problem(problem)
        return _answer(view, "error", message, status)
    # Committed: from here on the operator must read that it was done.
    try:
        return _answer(view, "ok", message)
    except Exception:  # noqa: BLE001  (any failure after the commit)
        log.exception("pgbus-web: the lock action was done, but drawing its answer failed")
        return _done_anyway(view, message)


def _done_anyway(view: LockFilters, message: str) -> Response:
    """The answer to a done action whose page could not be drawn: the
    message alone, in place of the locks block (htmx swaps it in), or the
    redirect a plain form gets anyway."""
    if not hx.details().request:
        return redirect(url_for("pgbus_web.locks", **view.query()), code=303)
    return make_response(
        Markup(
            '<section class="pgbus-card" id="pgbus-locks"><div class="pgbus-card-body">'
            '<p class="pgbus-notice pgbus-notice-ok" role="status" data-outcome="ok">{}</p>'
            '<p class="pgbus-notice pgbus-notice-warn pgbus-redraw-failed">{}</p></div></section>'
        ).format(message, t("pgbus.workflows.forms.redraw_failed")),
        200,
    )


def release():
    """POST /locks/release."""

    def work(conn) -> str:
        lock_key = _field("lock_key", MAX_KEY)
        actions.release_lock(conn, lock_key)
        return t("pgbus.locks.results.released", lock_key=lock_key)

    return _act(work)


def discard():
    """POST /locks/discard."""

    def work(conn) -> str:
        lock_key = _field("lock_key", MAX_KEY)
        queue_name = _field("queue_name", MAX_QUEUE)
        msg_id = _msg_id()
        done = actions.discard_message(conn, lock_key, queue_name=queue_name, msg_id=msg_id)
        key = "pgbus.locks.results.discarded" if done.lock_released else "pgbus.locks.results.discarded_kept"
        return t(key, msg_id=msg_id, queue=done.queue_name)

    return _act(work)


def reap():
    """POST /locks/reap."""

    def work(conn) -> str:
        result = actions.reap(conn, age_floor=state().settings.lock_age_floor)
        message = tn("pgbus.locks.results.reaped", result.released)
        if result.kept:
            message += " " + tn("pgbus.locks.results.reap_kept", result.kept)
        return message

    return _act(work)


def register(blueprint: Blueprint) -> None:
    blueprint.add_url_rule("/locks", "locks", locks_index)
    blueprint.add_url_rule("/locks/release", "locks_release", release, methods=["POST"])
    blueprint.add_url_rule("/locks/discard", "locks_discard", discard, methods=["POST"])
    blueprint.add_url_rule("/locks/reap", "locks_reap", reap, methods=["POST"])
