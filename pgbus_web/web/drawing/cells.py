"""The HTML of the small pieces a page repeats hundreds of times: a
badge, a subject, a "what happens next" sentence, an audit sentence; and
the lists made of them: the runs table's rows (remembered between
requests, run_rows), a step's attempts and the audit trail's items.

They are the macros of _macros.html (exported there under the same names),
written in Python because a Jinja macro call costs more than the piece it
draws: a runs fragment has 50 rows of them, a long run page hundreds. Every
value is escaped here (``escape``) and the result is Markup, so a template
can print it as it is.
"""

from __future__ import annotations

from collections import abc
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from flask import url_for
from markupsafe import Markup, escape

from ... import bidi
from ...core.words import presenters, timefmt
from ...core.words.detail_keys import detail_label
from ...i18n import current_locale, current_timezone, on_reload, t, t_html, tn
from . import dom_ids, template_helpers
from .template_helpers import batch_url, run_state, run_url


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
    moment: datetime | None,
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


def subject(run: Mapping[str, Any], subject_url: Callable[[str, str], Any] | None = None) -> Markup:
    """The run's subject ("Order 1042"), linked when the host's
    *subject_url* gives a safe address for it."""
    _label, url = presenters.subject_link(run, subject_url)
    if url:
        return Markup(
            f'<a class="pgbus-link pgbus-subject" href="{escape(url)}">{escape(presenters.subject_html(run))}</a>'
        )
    return Markup(f'<span class="pgbus-subject">{escape(presenters.subject_html(run))}</span>')


# The runs table's columns: the header's words, which each cell repeats as
# its data-label (the table stacks into labelled cards on a phone).
RUN_COLUMNS = ("status", "run", "subject", "step", "next", "age")

# Runs rows drawn before, by everything they show (_row_key): the live
# refresh draws the same page every few seconds, and most of its rows have
# not changed. With a host's subject_url the subject cell is drawn each
# time (the host's links may change without the run). Cleared whole when
# full, and with the catalogs.
_drawn_rows: dict = {}
_DRAWN_ROWS_MAX = 4096
on_reload(_drawn_rows.clear)


def run_rows(
    runs: list[Mapping[str, Any]],
    now: datetime,
    subject_url: Callable[[str, str], Any] | None = None,
) -> Markup:
    """The runs table's body rows: one ``<tr>`` per run (a page's rows, as
    workflows.page gives them) with its badge, class and link, subject,
    step, next sentence and age. One call draws them all, so the locale,
    the zone and the column words are looked up once per table."""
    locale, tz = current_locale(), current_timezone()
    # What every row shares: the language and zone, the viewer's day (a
    # wall clock shows the date on another day), the links' prefixes.
    zone = timefmt.zone(tz)
    shared = (locale, zone, timefmt.in_zone(now, zone).date(), run_url("x"), batch_url("x"))
    rows = []
    for run in runs:
        state = run_state(run, now)
        key: tuple[Any, ...] | None = _row_key(run, state, now, shared)
        drawn: tuple[str, str | None] | None
        try:
            drawn = _drawn_rows.get(key)
        except TypeError:  # a value that cannot be a key: drawn, not kept
            drawn, key = None, None
        if drawn is None:
            start, end = _run_row(run, state, now, locale, tz)
            # Without a host's links, the subject is the run's own values.
            drawn = (start, end) if subject_url is not None else (f"{start}{subject(run)}{end}", None)
            if key is not None:
                if len(_drawn_rows) >= _DRAWN_ROWS_MAX:
                    _drawn_rows.clear()
                _drawn_rows[key] = drawn
        head, tail = drawn
        rows.append(head if tail is None else f"{head}{subject(run, subject_url)}{tail}")
    return Markup("".join(rows))


def _row_key(run: Mapping[str, Any], state: presenters.RunState, now: datetime, shared: tuple) -> tuple:
    """Everything a runs row shows: the run's, its step's and its batch's
    values, its state, and what the clock makes of its moments ("5 minutes
    ago"; "infinity", which as a value equals Python's last moment). A
    value that cannot be hashed makes the key fail on lookup."""
    moments = (run.get("created_at"), *state.next_args.values())
    step, batch = run.get("step"), run.get("batch")
    return (
        shared,
        tuple(value for name, value in run.items() if name != "step" and name != "batch"),
        tuple(step.values()) if step else None,
        tuple(batch.values()) if batch else None,
        state.badge,
        state.tone,
        state.next_key,
        tuple(state.next_args.items()),
        tuple(timefmt.relative(moment, now=now) for moment in moments if isinstance(moment, datetime)),
    )


def _run_row(
    run: Mapping[str, Any], state: presenters.RunState, now: datetime, locale: Any, tz: Any
) -> tuple[str, str]:
    """A runs row's HTML before and after its subject cell's content."""
    status, run_label, subject_label, step_label, next_label, age = (
        escape(t(f"pgbus.workflows.index.columns.{name}")) for name in RUN_COLUMNS
    )
    step, workflow_id = run["step"], run["workflow_id"]
    if step and step["step_name"] or run["current_step"]:
        step_cell = f'<code dir="auto">{escape(step["step_name"] if step else run["current_step"])}</code>'
        if step and step["attempt"] > 1:
            step_cell += f' <span class="pgbus-muted pgbus-small">#{escape(step["attempt"])}</span>'
    else:
        step_cell = '<span class="pgbus-muted">—</span>'
    row_id, badge = dom_ids.run_row_id(workflow_id), escape(state.badge)
    head = f"""
        <tr class="pgbus-run-row" id="{row_id}" data-workflow-id="{escape(workflow_id)}" data-badge="{badge}">
          <td data-label="{status}">{run_badge(state)}</td>
          <td data-label="{run_label}">
            <a class="pgbus-class" dir="auto" href="{escape(run_url(workflow_id))}">{escape(run["workflow_class"])}</a>
            <div class="pgbus-run-link pgbus-muted"><bdi>{escape(workflow_id[:8])}</bdi></div>
          </td>
          <td data-label="{subject_label}">"""
    sentence = next_sentence(run, state, now, locale, tz)
    created = timefmt.exact_tag(run["created_at"], now=now, locale=locale, tz=tz)
    tail = f"""</td>
          <td data-label="{step_label}">{step_cell}</td>
          <td class="pgbus-next" data-label="{next_label}">{sentence}</td>
          <td class="pgbus-nowrap pgbus-small" data-label="{age}">{created}</td>
        </tr>"""
    return head, tail


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
        run,
        state,
        now=now,
        batch_url=batch_url,
        locale=locale or current_locale(),
        tz=tz or current_timezone(),
    )
    return Markup(f'<span class="pgbus-next-sentence" data-next="{escape(state.next_key)}">{escape(sentence)}</span>')


def attempt_items(attempts: list[Mapping[str, Any]], batches: Mapping[str, Any], now: datetime) -> Markup:
    """A step's attempts as ``<li>`` items, newest first (*attempts* come
    oldest first): number, status and how long it ran, its moments, what it
    waits for (a signal, a batch of *batches* by id), its error, backtrace
    and result."""
    items = []
    for attempt in reversed(attempts):
        status, started, finished = attempt.get("status"), attempt.get("started_at"), attempt.get("finished_at")
        head = f"""
          <div class="pgbus-attempt-head">
            <strong>{escape(t("pgbus.workflows.show.attempt", attempt=attempt.get("attempt")))}</strong>
            {step_badge(status)}"""
        if started and finished:
            ran = t("pgbus.workflows.show.ran_for", duration=timefmt.between(started, finished))
            head += f'\n            <span class="pgbus-muted pgbus-small">{escape(ran)}</span>'
        times = "".join(
            f"<span>{t_html(key, time=time_tag(attempt.get(column), now))}</span>"
            for column, key in _ATTEMPT_MOMENTS
            if column == "created_at" or attempt.get(column)
        )
        parts = [
            head,
            f'\n          </div>\n          <div class="pgbus-attempt-times">\n            {times}\n          </div>',
        ]
        if attempt.get("wait_for") or attempt.get("batch_id"):
            waits = ""
            if attempt.get("wait_for"):
                signal = presenters.code(attempt["wait_for"])
                waits += f"<span>{t_html('pgbus.workflows.show.waits_for_signal_html', signal=signal)}</span>"
            if attempt.get("batch_id"):
                batch = batches.get(attempt["batch_id"])
                name = batch["description"] if batch and batch.get("description") else attempt["batch_id"]
                link = t_html(
                    "pgbus.workflows.show.waits_for_batch_html",
                    batch=template_helpers.batch_link(name, attempt["batch_id"]),
                )
                progress = ""
                if batch:
                    done, total = presenters.batch_progress(batch)
                    progress = f" ({escape(tn('pgbus.workflows.show.batch_progress', total, done=done))})"
                waits += f"\n            <span>{link}{progress}</span>"
            if attempt.get("waiting_since"):
                since = time_tag(attempt["waiting_since"], now)
                waits += f"<span>{t_html('pgbus.workflows.show.waiting_since_html', time=since)}</span>"
            # When it gives up only matters while the attempt is open (states.STEP_OPEN).
            if attempt.get("timeout_at") and presenters.step_open(status):
                gives_up = time_tag(attempt["timeout_at"], now)
                waits += f"<span>{t_html('pgbus.workflows.show.timeout_html', time=gives_up)}</span>"
            parts.append(f'\n          <div class="pgbus-attempt-times">{waits}\n          </div>')
        error_class, error_message = attempt.get("error_class"), attempt.get("error_message")
        if error_class or error_message:
            colon = ": " if error_class and error_message else ""
            words = template_helpers.error_words(error_message, now)
            parts.append(
                '\n          <p class="pgbus-error">'
                f'<span class="pgbus-error-class" dir="auto">{escape(error_class or "")}</span>'
                f'{colon}<span class="pgbus-error-message" dir="auto">{words}</span></p>'
            )
        if attempt.get("error_backtrace"):
            parts.append(
                '\n          <details class="pgbus-backtrace">'
                f"\n            <summary>{escape(t('pgbus.workflows.show.backtrace'))}</summary>"
                f"\n            <pre><code>{escape(attempt['error_backtrace'])}</code></pre>\n          </details>"
            )
        if attempt.get("result") is not None:
            parts.append(
                f'\n          <details class="pgbus-result">\n            <summary class="pgbus-muted pgbus-small">'
                f"{escape(t('pgbus.workflows.show.result'))}</summary>"
                f"\n            <pre>{presenters.stored_json(attempt['result'])}</pre>"
                f"\n          </details>"
            )
        items.append(
            f'\n        <li class="pgbus-attempt" id="pgbus-step-{escape(attempt.get("id"))}"'
            f' data-status="{escape(status)}">'
            f"{''.join(parts)}\n        </li>"
        )
    return Markup("".join(items))


# An attempt's moments in the order its line shows them (created always).
_ATTEMPT_MOMENTS = (
    ("created_at", "pgbus.workflows.show.created_html"),
    ("scheduled_at", "pgbus.workflows.show.due_html"),
    ("started_at", "pgbus.workflows.show.started_html"),
    ("finished_at", "pgbus.workflows.show.finished_html"),
)


def audit_items(events: list[Mapping[str, Any]], now: datetime) -> Markup:
    """The audit trail's ``<li>`` items, newest first (*events* come oldest
    first): when, the sentence, and the details, each value through the
    time formatter where it is a moment or a span, else as stored JSON.
    One call draws them all: a run page shows up to 50."""
    items = []
    for event in reversed(events):
        details = event.get("details")
        if details and isinstance(details, abc.Mapping):
            pairs = "".join(
                f'\n          <div><dt dir="auto" data-key="{escape(key)}">{escape(detail_label(key))}</dt>'
                f"<dd>{template_helpers.detail_words(key, value, now)}</dd></div>"
                for key, value in details.items()
            )
            shown = f'\n        <dl class="pgbus-audit-details">{pairs}\n        </dl>'
        elif details is not None and not isinstance(details, abc.Mapping):
            shown = (
                f'\n        <p class="pgbus-audit-details">{presenters.stored_json(details, object_expected=True)}</p>'
            )
        else:
            shown = ""
        items.append(
            f"""
    <li class="pgbus-event" data-event="{escape(event.get("event"))}">
      <div class="pgbus-audit-when">{time_tag(event.get("created_at"), now)}</div>
      <div>
        {event_sentence(event)}{shown}
      </div>
    </li>"""
        )
    return Markup("".join(items))


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
