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
from typing import Any, cast

from flask import (
    Blueprint,
    Response,
    abort,
    make_response,
    render_template,
    request,
    url_for,
)

from ...core import problems
from ...core.checks import FormError
from ...core.lock_filters import MAX_KEY, MAX_QUEUE, LockFilters, parse, text
from ...core.lock_reads import locks_context
from ...core.words import results
from ...locks import lock_acts
from ...plumbing import hx, reading
from ...plumbing.redirects import see_other
from ...plumbing.security import may_release_locks
from ...plumbing.state import state
from ...rules.limits import ID_MAX
from ...rules.run_filters import FilterError
from ..answering import answers, pages, render

log = logging.getLogger(__name__)


def _page(view: LockFilters, *, status: int = 200, filter_error: str | None = None) -> Response:
    with reading.read() as conn:
        context = locks_context(conn, state().settings, view)
    context.update(filter_error=filter_error, can_act=may_release_locks())
    return render.page(pages.LOCKS.template, context, pages.LOCKS.fragments, status=status)


def locks_index():
    """GET /locks."""
    try:
        return _page(parse(request.args))
    except FilterError as problem:
        return _page(LockFilters(), filter_error=str(problem), status=400)


# --- actions -----------------------------------------------------------------
# Who may act (can_act) and the CSRF token are checked for the whole
# blueprint before any POST view runs (security.py, csrf.py); these forms
# carry the token field (locks/_forms.html).


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
        raise FormError(name, str(problem), status=400) from None
    if value is None:
        refusal = problems.field_missing(name)
        raise FormError(name, refusal.message, status=refusal.status)
    return value


def _msg_id() -> int:
    value = _field("msg_id", 20).strip()
    # isascii: "²" is a digit to str.isdigit, and not to int().
    if not (value.isascii() and value.isdigit()) or not 0 < int(value) <= ID_MAX:
        refusal = problems.bad_message_id(value)
        raise FormError("msg_id", refusal.message, status=refusal.status)
    return int(value)


def _answer(view: LockFilters, category: str, message: str, status: int = 200) -> Response:
    """The page as it is now with *message* in the messages area (htmx: the
    locks block and the messages, each swapping itself in); a plain form's
    success is a redirect back to its view with the message flashed."""
    if category == "ok" and not hx.details().request:
        answers.flash_message(category, message)
        return see_other(_view_url(view))
    database = state().database
    # After a write, read it back from the primary: a replica may lag.
    with database.write() as conn:
        context = locks_context(conn, state().settings, view)
    context.update(filter_error=None, can_act=may_release_locks())
    if hx.details().request:
        body = render.fragments(pages.LOCKS.template, pages.LOCKS.blocks, context, oob=False)
        return render.answer(body + answers.messages(category, message), status)
    context["pgbus_messages"] = [(category, message)]
    return make_response(render_template(pages.LOCKS.template, **context), status)


def _view_url(view: LockFilters) -> str:
    return url_for("pgbus_web.locks", **cast(dict[str, Any], view.query()))


def _act(work) -> Response:
    """Run *work(conn)* in one transaction; it returns the sentence to show."""
    view = _view()
    try:
        with state().database.write() as conn:
            message = work(conn)
    except (FormError, lock_acts.LockActionError) as problem:
        refusal = problems.refusal(problem)
        return _answer(view, "error", refusal.message, refusal.status)
    # Committed: from here on the operator must read that it was done.
    return answers.committed(lambda: _answer(view, "ok", message), message, "ok", lambda: _view_url(view))


def release():
    """POST /locks/release."""

    def work(conn) -> str:
        lock_key = _field("lock_key", MAX_KEY)
        lock_acts.release_lock(conn, lock_key)
        return results.lock_released(lock_key)

    return _act(work)


def discard():
    """POST /locks/discard."""

    def work(conn) -> str:
        lock_key = _field("lock_key", MAX_KEY)
        queue_name = _field("queue_name", MAX_QUEUE)
        msg_id = _msg_id()
        done = lock_acts.discard_message(conn, lock_key, queue_name=queue_name, msg_id=msg_id)
        return results.message_discarded(msg_id, done.queue_name, lock_released=done.lock_released)

    return _act(work)


def reap():
    """POST /locks/reap."""

    def work(conn) -> str:
        result = lock_acts.reap(conn, age_floor=state().settings.lock_age_floor)
        return results.locks_reaped(result.released, result.kept)

    return _act(work)


def _for_lock_holders(view):
    """*view* for whoever may release locks (may_release_locks); 403 before
    anything is read for anyone else."""

    def guarded(*args, **kwargs):
        if not may_release_locks():
            abort(403)
        return view(*args, **kwargs)

    guarded.__name__ = view.__name__
    guarded.__doc__ = view.__doc__
    return guarded


def register(blueprint: Blueprint) -> None:
    blueprint.add_url_rule("/locks", "locks", locks_index)
    blueprint.add_url_rule("/locks/release", "locks_release", _for_lock_holders(release), methods=["POST"])
    blueprint.add_url_rule("/locks/discard", "locks_discard", _for_lock_holders(discard), methods=["POST"])
    blueprint.add_url_rule("/locks/reap", "locks_reap", _for_lock_holders(reap), methods=["POST"])
