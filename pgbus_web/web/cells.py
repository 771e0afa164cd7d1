"""The HTML of the small pieces a page repeats hundreds of times: a
badge, a subject, a "what happens next" sentence, an audit sentence.

They are the macros of _macros.html (exported there under the same names),
written in Python because a Jinja macro call costs more than the piece it
draws: a runs fragment has 50 rows of them, a long run page hundreds. Every
value is escaped here (``escape``) and the result is Markup, so a template
can print it as it is.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Callable, Mapping, Optional

from flask import url_for
from markupsafe import Markup, escape

from .. import bidi
from ..i18n import current_locale, current_timezone, t
from . import presenters, timefmt
from .helpers import batch_url


def badge(label: Any, tone: Any, status: Any = None) -> Markup:
    """``<span class="pgbus-badge pgbus-tone-TONE" data-status="STATUS">``,
    the status attribute only when there is one."""
    data = f' data-status="{escape(status)}"' if status else ""
    return Markup(f'<span class="pgbus-badge pgbus-tone-{escape(tone)}"{data}>{escape(label)}</span>')


def run_badge(state: presenters.RunState) -> Markup:
    return badge(t("pgbus.workflows.statuses." + str(state.badge)), state.tone, state.badge)


def step_badge(status: Any) -> Markup:
    return badge(t(f"pgbus.workflows.step_statuses.{status}"), presenters.step_tone(status), status)


def signal_badge(status: Any) -> Markup:
    return badge(t(f"pgbus.workflows.signal_statuses.{status}"), presenters.signal_tone(status), status)


def time_tag(
    moment: Optional[datetime],
    now: datetime,
    clock: bool = False,
    locale: timefmt.LocaleArg = None,
    tz: timefmt.TimeZoneArg = None,
) -> Markup:
    """A moment with its exact wall clock written out (timefmt.exact_tag);
    due times and deadlines (*clock*) in time_tag's "in 2 hours (3:05 PM)"."""
    locale, tz = locale or current_locale(), tz or current_timezone()
    if clock:
        return timefmt.time_tag(moment, now=now, clock=True, locale=locale, tz=tz)
    return timefmt.exact_tag(moment, now=now, locale=locale, tz=tz)


def subject(run: Mapping[str, Any], subject_url: Optional[Callable[[str, str], Any]] = None) -> Markup:
    """The run's subject ("Order 1042"), linked when the host's
    *subject_url* gives a safe address for it."""
    _label, url = presenters.subject_link(run, subject_url)
    if url:
        return Markup(f'<a class="pgbus-link pgbus-subject" href="{escape(url)}">{escape(presenters.subject_html(run))}</a>')
    return Markup(f'<span class="pgbus-subject">{escape(presenters.subject_html(run))}</span>')


def next_sentence(
    run: Mapping[str, Any],
    state: presenters.RunState,
    now: datetime,
    locale: timefmt.LocaleArg = None,
    tz: timefmt.TimeZoneArg = None,
) -> Markup:
    """presenters.next_sentence in its span; the batch it waits for links
    to the batch page."""
    sentence = presenters.next_sentence(
        run, state, now=now, batch_url=batch_url,
        locale=locale or current_locale(), tz=tz or current_timezone(),
    )
    return Markup(f'<span class="pgbus-next-sentence" data-next="{escape(state.next_key)}">{escape(sentence)}</span>')


def event_sentence(event: Mapping[str, Any]) -> Markup:
    """An audit-trail row as a sentence, and the operation that wrote it
    as a link when there was one."""
    sentence = Markup(
        f'<span class="pgbus-event-sentence" data-event="{escape(event.get("event", ""))}">'
        f"{escape(bidi.html(presenters.event_sentence(event)))}</span>"
    )
    operation_id = presenters.event_operation(event)
    if not operation_id:
        return sentence
    href = url_for("pgbus_web.operation", operation_id=operation_id)
    words = t("pgbus.operations.event_link", operation_id=operation_id)
    return sentence + Markup(f' <a class="pgbus-event-operation" href="{escape(href)}">{escape(words)}</a>')
