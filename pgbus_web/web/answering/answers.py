"""How the dashboard answers, the same way on every page: a message in
the messages area (flashed across a redirect, or swapped in by htmx), an
error page for a refusal that has no page to show again, and the answer of
an action that has committed, which is never an error page.

What a refusal says and its status come from problems.py; the routes pick
which page to draw around it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from flask import Response, flash, make_response, render_template
from markupsafe import Markup

from ...core.problems import Refusal
from ...core.words import results
from ...i18n import current_locale
from ...plumbing import hx
from ...plumbing.redirects import see_other
from . import pages, render

log = logging.getLogger(__name__)


def error_page(status: int, title: str, message: str) -> Response:
    return render.page(
        pages.ERROR.template,
        {"status": status, "title": title, "message": message},
        {},
        status=status,
    )


def error_page_for(refusal: Refusal) -> Response:
    return error_page(refusal.status, refusal.title, refusal.message)


def flash_message(category: str, message: str) -> None:
    """*message* for the page a redirect leads to."""
    try:
        flash(message, category)
    except RuntimeError:
        # A host app without SECRET_KEY has no session to carry it; the
        # page the redirect leads to shows the new state all the same.
        log.info("pgbus-web: no session for flashed messages (set SECRET_KEY)")


def messages(category: str, message: str) -> str:
    """The messages area holding *message*, swapping itself in (htmx)."""
    return render_template(pages.MESSAGES_TEMPLATE, pgbus_messages=[(category, message)], oob=True)


def message_answer(status: int, title: str, message: str, category: str = "error") -> Response:
    """A refusal that has no page to show again: for htmx the message
    alone, otherwise the error page."""
    if hx.details().request:
        return render.answer(messages(category, message), status)
    return error_page(status, title, message)


def refused(refusal: Refusal) -> Response:
    """message_answer for a refusal of problems.py."""
    return message_answer(refusal.status, refusal.title, refusal.message)


# The messages area of an answer drawn without a template: what a done
# action answers when drawing the page failed (done_anyway).
_BARE_MESSAGES = Markup(
    '<div class="pgbus-messages" id="pgbus-messages" role="status" aria-live="polite" tabindex="-1"{oob}>'
    '<p class="pgbus-notice pgbus-notice-{category}" data-category="{category}">{message}</p>'
    '<p class="pgbus-notice pgbus-notice-warn pgbus-redraw-failed" data-category="warn">{note}</p></div>'
)


def done_anyway(message: str, category: str, location: Callable[[], str]) -> Response:
    """The answer to an action that has committed when drawing its answer
    failed: still a success (an operator who read an error would do it
    again), saying it was done and that the page could not be redrawn.
    htmx gets the messages area alone; a plain form the redirect to
    *location()*, or, failing that too, a bare page with the messages."""
    note = results.redraw_failed()
    category = category if category in ("ok", "warn") else "ok"
    if not hx.details().request:
        try:
            flash_message(category, message)
            return see_other(location())
        except Exception:  # noqa: BLE001  (the last resort must not fail)
            log.exception("pgbus-web: no redirect after a done action")
    oob = Markup(' hx-swap-oob="innerHTML"') if hx.details().request else Markup("")
    body = _BARE_MESSAGES.format(oob=oob, category=category, message=message, note=note)
    if not hx.details().request:
        body = Markup('<!doctype html><html lang="{}"><title>pgbus</title><main>{}</main></html>').format(
            current_locale(), body
        )
    return make_response(body, 200)


def committed(answer: Callable[[], Response], message: str, category: str, location: Callable[[], str]) -> Response:
    """*answer()* for an action whose transaction has committed; whatever
    fails while it reads or draws the page is logged, and the operator
    still reads that it was done (done_anyway), never an error page."""
    try:
        return answer()
    except Exception:  # noqa: BLE001  (any failure after the commit)
        log.exception("pgbus-web: the action was done, but drawing its answer failed")
        return done_anyway(message, category, location)
