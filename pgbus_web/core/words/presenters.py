"""The Workflows pages' words, with no I/O: a run's badge, tone and "what
happens next" sentence, the Resume label, the audit-trail sentence, the
subject link and the safe-URL rule, JSON values (the buttons and their
confirm questions are verb_labels.py's).

Everything here takes plain values (row dicts, ``now``, the thresholds) and
returns words or Markup, so it is unit tested without a database or a
request. Moments go through ``timefmt``; the ``_html`` keys let ``<time>``,
``<code>`` and links through, and ``t_html`` escapes every other argument
(a step name, an error class, an actor); the few tags written here (a
name as code, a subject's parts) escape every value they hold.

See docs/presenters.md for the tones and the sentences.
"""

from __future__ import annotations

import ipaddress
import json
import logging
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from markupsafe import Markup, escape

from ...i18n import current_locale, current_timezone, t, t_html
from ...models.values import RawJson
from ...rules import states
from ...rules import stuck as stuck_rules
from . import timefmt
from . import unusual as odd
from .verb_words import WORDS

log = logging.getLogger(__name__)

# Tones, as pgbus's badge colours: blue is work happening, yellow is a run
# that waits (on time, a signal, a batch or a person), green is done, red
# needs a person now, gray is quiet (queued, or stopped on purpose).
TONES = ("blue", "gray", "yellow", "green", "red")

STEP_TONES = {
    states.STEP_SCHEDULED: "gray",
    states.STEP_WAITING: "yellow",
    states.STEP_IN_PROGRESS: "blue",
    states.STEP_COMPLETED: "green",
    states.STEP_FAILED: "red",
    states.STEP_CANCELLED: "gray",
    states.STEP_SKIPPED: "gray",
}

SIGNAL_TONES = {
    states.SIGNAL_PENDING: "yellow",
    states.SIGNAL_CLAIMED: "blue",
    states.SIGNAL_CONSUMED: "green",
}

# The run badge's tone when nothing sharper applies.
RUN_TONES = {
    states.READY: "gray",
    states.RUNNING: "blue",
    states.WAITING: "yellow",
    states.PAUSED: "yellow",
    states.COMPLETED: "green",
    states.FAILED: "red",
    states.CANCELLED: "gray",
}

# The sharper badges: words that say more than the status.
BADGE_STALLED = "stalled"
BADGE_OVERDUE = "overdue"


@dataclass(frozen=True)
class RunState:
    """A run in words: ``badge`` (a run status, or ``stalled``/``overdue``),
    ``tone`` (one of TONES), the "what happens next" message as
    ``next_key`` (under ``pgbus.workflows.next.``, without ``_html``) and
    its raw ``next_args``, and ``stuck``, the stuck reason when the run
    needs a person (states.STUCK_REASONS) or None."""

    badge: str
    tone: str
    next_key: str
    next_args: dict[str, Any] = field(default_factory=dict)
    stuck: str | None = None


def _get(row: Mapping[str, Any] | None, key: str) -> Any:
    return row.get(key) if row else None


def _before(moment: datetime | None, cutoff: datetime) -> bool:
    return moment is not None and timefmt.utc(moment) < timefmt.utc(cutoff)


def run_state(
    run: Mapping[str, Any],
    *,
    now: datetime,
    stall_threshold: timedelta,
    waiting_threshold: timedelta | None = None,
) -> RunState:
    """The badge, tone and next sentence of *run*: a pgbus_workflows row
    with ``step`` (its latest step row, or None) and ``batch`` (the batch
    that step waits on, or None). The stuck reason is rules.stuck's, the
    rule the needs-attention queries are built from, so a badge and the
    groups agree. Raises ValueError for a status that is not a run status."""
    status = run.get("status")
    step = run.get("step")
    step_name = _get(step, "step_name") or run.get("current_step")
    step_status = _get(step, "status")
    tone = RUN_TONES.get(status) if status is not None else None
    if tone is None or status is None:
        raise ValueError(f"unknown run status {status!r}")
    stuck = stuck_rules.reason_of_run(run, now=now, threshold=stall_threshold, waiting_threshold=waiting_threshold)

    if status == states.READY:
        due = _get(step, "scheduled_at")
        if stuck == states.OVERDUE:
            return RunState(BADGE_OVERDUE, "red", "overdue", {"step": step_name, "late": due}, stuck)
        if step_status != states.STEP_SCHEDULED or due is None:
            return RunState(status, tone, "ready", {"step": step_name or timefmt.NONE})
        if not _before(due, now):
            return RunState(status, tone, "due", {"time": due, "step": step_name})
        return RunState(status, tone, "queued", {"step": step_name, "ago": due})

    if status == states.RUNNING:
        started = _get(step, "started_at") if step_status == states.STEP_IN_PROGRESS else None
        if started is None:
            return RunState(status, tone, "running", {"step": step_name, "ago": run.get("started_at")})
        # Past the stall threshold the sweep will stop it: say so before it does.
        if _before(started, now - stall_threshold):
            return RunState(BADGE_STALLED, "red", "running_stalled", {"step": step_name, "ago": started})
        return RunState(status, tone, "running", {"step": step_name, "ago": started})

    if status == states.WAITING:
        return _waiting_state(run, step, step_name, stuck=stuck)

    if status == states.PAUSED:
        args = {"step": step_name or timefmt.NONE, "ago": run.get("paused_at") or run.get("updated_at")}
        error = _get(step, "error_class")
        if stuck == states.STALLED:
            return RunState(BADGE_STALLED, "red", "stalled", args, stuck)
        if stuck != states.PAUSED_ERROR:
            return RunState(status, tone, "paused", args, stuck)
        if error == states.WAIT_TIMED_OUT_ERROR:
            return RunState(status, tone, "paused_timed_out", args, stuck)
        if error:
            return RunState(status, tone, "paused_error", {**args, "error": error}, stuck)
        return RunState(status, tone, "paused", args, stuck)

    ended = run.get("finished_at") or run.get("updated_at")
    if status == states.FAILED and step_status == states.STEP_FAILED and _get(step, "error_class"):
        return RunState(status, tone, "failed", {"step": step_name, "error": _get(step, "error_class"), "ago": ended})
    if status == states.FAILED:
        return RunState(status, tone, "failed_plain", {"ago": ended})
    return RunState(status, tone, status, {"ago": ended})


def batch_progress(batch: Mapping[str, Any]) -> tuple[int, int]:
    """(jobs done, jobs in all) of a batch. Done means finished either way:
    the batch ends when its completed, failed and discarded jobs add up to
    its total."""
    done = sum(int(batch.get(key) or 0) for key in ("completed_jobs", "failed_jobs", "discarded_jobs"))
    return done, int(batch.get("total_jobs") or 0)


def step_open(status: str | None) -> bool:
    """A step attempt that has not ended: scheduled, waiting or in progress."""
    return status in states.STEP_OPEN


def _waiting_state(
    run: Mapping[str, Any], step: Mapping[str, Any] | None, step_name: str | None, *, stuck: str | None
) -> RunState:
    # The sentence's "since" falls back to updated_at for a step without
    # waiting_since; the stuck rule does not (rules.stuck says why).
    since = _get(step, "waiting_since") or run.get("updated_at")
    deadline = _get(step, "timeout_at")
    batch_id = _get(step, "batch_id")
    batch = run.get("batch")
    if batch_id and batch:
        done, total = batch_progress(batch)
        key = "waiting_batch"
        args = {"batch": batch.get("description") or batch_id, "batch_id": batch_id, "done": done, "count": total}
    elif batch_id:
        key, args = "waiting_batch_unknown", {"batch": batch_id, "batch_id": batch_id, "ago": since}
    elif _get(step, "wait_for"):
        key, args = "waiting_signal", {"signal": _get(step, "wait_for"), "ago": since}
    else:
        key, args = "waiting", {"step": step_name or timefmt.NONE, "ago": since}
    if deadline is not None and key != "waiting_batch_unknown":
        key, args = f"{key}_timeout", {**args, "time": deadline}
    if stuck == states.WAITING_OVERDUE:
        return RunState(BADGE_OVERDUE, "red", key, args, stuck)
    return RunState(states.WAITING, RUN_TONES[states.WAITING], key, args)


def code(value: Any) -> Markup:
    """A step, signal or class name as ``<code class="pgbus-code">``,
    isolated (``dir="auto"``) from the sentence around it (bidi.py)."""
    return Markup(f'<code class="pgbus-code" dir="auto">{escape(value)}</code>')


def batch_link(name: Any, batch_id: str | None, batch_url: Callable[[str], str] | None) -> Markup:
    """The batch's name as code, linked to its page when *batch_url* (the
    page's address for a batch_id) is given and the batch has an id."""
    label = code(name)
    if batch_url is None or not batch_id:
        return label
    return Markup('<a class="pgbus-link" href="{}">{}</a>').format(batch_url(batch_id), label)


def next_sentence(
    run: Mapping[str, Any],
    state: RunState,
    *,
    now: datetime,
    locale: timefmt.LocaleArg = None,
    tz: timefmt.TimeZoneArg = None,
    batch_url: Callable[[str], str] | None = None,
) -> Markup:
    """The "what happens next" sentence: "Waiting for signal
    <code>shipment_confirmed</code> since <time>3 hours ago</time>". Step and
    signal names as code, past moments relative (``ago``, ``late``), due
    times and deadlines as the clock (``time``), the batch by its name,
    linked to its page through *batch_url* (a batch_id's address);
    ``count`` picks the plural form of a batch's "7 of 12 jobs done"."""
    args: dict[str, Any] = {}
    for key, value in state.next_args.items():
        if key in ("step", "signal"):
            args[key] = code(value)
        elif key == "batch":
            args[key] = batch_link(value, state.next_args.get("batch_id"), batch_url)
        elif key in ("ago", "late"):
            args[key] = timefmt.time_tag(value, now=now, locale=locale, tz=tz)
        elif key == "time":
            args[key] = timefmt.time_tag(value, now=now, locale=locale, tz=tz, clock=True)
        elif key != "batch_id":
            args[key] = value
    return t_html(f"pgbus.workflows.next.{state.next_key}_html", **args)


def step_tone(status: str | None) -> str:
    return STEP_TONES.get(status or "", "gray")


def signal_tone(status: str | None) -> str:
    return SIGNAL_TONES.get(status or "", "gray")


def _humanize(name: str) -> str:
    words = name.replace("_", " ").strip()
    return words[:1].upper() + words[1:].lower()


def event_sentence(event: Mapping[str, Any]) -> str:
    """One audit-trail row as a sentence: "Resumed by dashboard:alice: SMTP
    fixed", "Step failed by system (capture #2)". An event name this
    version does not know reads as its humanized name. Plain text: the
    template escapes it."""
    name = str(event.get("event") or "")
    what = t(f"pgbus.workflows.events.{name}") if name in states.EVENTS else _humanize(name)
    details = event.get("details")
    if name == "resumed" and isinstance(details, Mapping) and details.get("action") == "retry":
        # A resume that tried the failed step again: reported as offered.
        what = t(WORDS["retry"].event or "")
    sentence = t("pgbus.workflows.audit.by", event=what, actor=event.get("actor") or "")
    if event.get("step_name"):
        if event.get("attempt") is not None:
            sentence = t(
                "pgbus.workflows.audit.with_step", sentence=sentence, step=event["step_name"], attempt=event["attempt"]
            )
        else:
            sentence = t("pgbus.workflows.audit.with_step_only", sentence=sentence, step=event["step_name"])
    reason = event.get("reason")
    if reason is not None and str(reason).strip():
        sentence = t("pgbus.workflows.audit.with_reason", sentence=sentence, reason=reason)
    approval = event.get("approval")
    if isinstance(approval, Mapping) and approval.get("approved_by"):
        # Written by an operation a second operator approved (core.page_reads.with_approvals).
        moment = approval.get("approved_at")
        sentence = t(
            "pgbus.operations.audit.approved",
            sentence=sentence,
            approver=approval["approved_by"],
            time=timefmt.short_date_time(moment, locale=current_locale(), tz=current_timezone())
            if moment is not None
            else timefmt.NONE,
        )
    return sentence


# RFC 3986 (appendix A), the grammar Ruby's URI.parse holds a URL to in
# the reference's pgbus_workflow_safe_url: ASCII only, each character in
# its place, "%" only before two hex digits. Anything outside it (a space,
# a control, a backslash, a bidi control, any non-ASCII letter) is refused
# rather than guessed at.
_UNRESERVED = r"A-Za-z0-9\-._~"
_SUB_DELIMS = r"!$&'()*+,;="
_PCT = r"%[0-9A-Fa-f]{2}"
_PCHAR = rf"(?:[{_UNRESERVED}{_SUB_DELIMS}:@]|{_PCT})"
_QUERY = rf"(?:{_PCHAR}|[/?])*"
_PATH_ABEMPTY = rf"(?:/{_PCHAR}*)*"
_USERINFO = rf"(?:[{_UNRESERVED}{_SUB_DELIMS}:]|{_PCT})*"
_REG_NAME = rf"(?:[{_UNRESERVED}{_SUB_DELIMS}]|{_PCT})*"
_IP_LITERAL = r"\[(?P<ip>[0-9A-Fa-f:.]+|v[0-9A-Fa-f]+\.[" + _UNRESERVED + _SUB_DELIMS + r":]+)\]"
_ABSOLUTE_URL = re.compile(
    rf"(?P<scheme>[A-Za-z][A-Za-z0-9+\-.]*)://(?:{_USERINFO}@)?"
    rf"(?P<host>{_IP_LITERAL}|{_REG_NAME})(?::[0-9]*)?"
    rf"{_PATH_ABEMPTY}(?:\?{_QUERY})?(?:#{_QUERY})?"
)
# A same-site path: "/" and its segments, a query and a fragment.
_SITE_PATH = re.compile(rf"/(?:{_PCHAR}+{_PATH_ABEMPTY})?(?:\?{_QUERY})?(?:#{_QUERY})?")
# What Ruby's String#strip takes off both ends: ASCII whitespace and NUL.
_STRIPPED = " \t\n\v\f\r\x00"


def _ip_literal_ok(literal: str | None) -> bool:
    if literal is None or literal.lower().startswith("v"):
        return True  # not one, or an IPvFuture the grammar has checked
    try:
        ipaddress.IPv6Address(literal)
    except ValueError:
        return False
    return True


def safe_url(value: Any) -> str | None:
    """*value* when it is safe to put in an href, else None, as the
    reference's pgbus_workflow_safe_url: a path on this site ("/orders/1042"),
    never "//host" or "/\\host" (browsers read both as another host), or
    an absolute http(s) URL with a host; either must be an RFC 3986 URL
    (ASCII, no space or control, no backslash). Never javascript:, data:, a
    relative path or a URL without a host. Stricter than the reference in
    one place: it links a path without parsing it, this checks the path's
    characters too, so no control or bidi character reaches an href."""
    if value is None:
        return None
    url = str(value).strip(_STRIPPED)
    if not url:
        return None
    if url.startswith("/"):
        if url.startswith(("//", "/\\")):
            return None
        return url if _SITE_PATH.fullmatch(url) else None
    match = _ABSOLUTE_URL.fullmatch(url)
    if match is None or match.group("scheme").lower() not in ("http", "https"):
        return None
    if not match.group("host") or not _ip_literal_ok(match.group("ip")):
        return None
    return url


def subject_link(run: Mapping[str, Any], subject_url: Callable[[str, str], Any] | None) -> tuple[str, str | None]:
    """The run's subject as (label, url): "Order 1042" with the URL the
    host's *subject_url(type, id)* gives, when it is safe; url None
    otherwise. A run without a subject is the dash. A *subject_url* that
    raises is logged and the subject shows as plain text: one bad link
    must not take the page down."""
    parts = _subject_parts(run)
    if not parts:
        return timefmt.NONE, None
    # As stored: the host's function is given the id None for a subject without one.
    subject_type: Any = run.get("subject_type")
    subject_id: Any = run.get("subject_id")
    label = " ".join(parts)
    if subject_url is None:
        return label, None
    try:
        url = subject_url(subject_type, subject_id)
    except Exception as exc:  # the host's code: any failure means "no link"
        log.error("subject_url raised %s: %s", type(exc).__name__, exc)
        return label, None
    return label, safe_url(url)


def _subject_parts(run: Mapping[str, Any]) -> tuple[str, ...]:
    """("Order", "1042"), ("Order",) without an id, () without a subject."""
    subject_type = run.get("subject_type")
    if not subject_type:
        return ()
    subject_id = run.get("subject_id")
    return (str(subject_type),) if subject_id is None else (str(subject_type), str(subject_id))


def subject_html(run: Mapping[str, Any]) -> Markup:
    """subject_link's label for a page: the type and the id each in its
    own ``<bdi>``, so neither can turn the other around."""
    parts = _subject_parts(run)
    if not parts:
        return Markup(timefmt.NONE)
    return Markup(" ".join(f"<bdi>{escape(part)}</bdi>" for part in parts))


def json_value(value: Any) -> str:
    """A value as the run page shows it: objects and arrays as compact JSON,
    everything else as text (None as empty, booleans as true/false); JSON
    Python could not read (RawJson) as the text stored."""
    if isinstance(value, (dict, list, tuple)):
        try:
            return json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str)
        except (RecursionError, ValueError):
            return repr(value)
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def stored_json(value: Any, *, object_expected: bool = False) -> Markup:
    """A stored JSON value as ``<code>``, as json_value writes it, cut at
    odd.JSON_SHOWN_LIMIT characters. Marked as unusual (odd.marked) when
    Python could not read it, when it was cut, or when an object was
    expected (a run's arguments, a signal's payload, an event's details)
    and it is not one: then it is written as raw JSON (``null``,
    ``"text"``, ``[1,2]``), so the page says exactly what is stored."""
    unusual = isinstance(value, RawJson) or (object_expected and not isinstance(value, dict))
    if unusual and not isinstance(value, RawJson):
        try:
            text = json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str)
        except (RecursionError, ValueError):
            text = repr(value)
    else:
        text = json_value(value)
    text, cut = odd.shortened(text)
    shown = Markup('<code class="pgbus-code pgbus-json" dir="auto">{}</code>').format(text)
    if cut is not None:
        shown, unusual = shown + cut, True
    return odd.marked(shown, kind="json") if unusual else shown


def event_operation(event: Mapping[str, Any]) -> int | None:
    """The operation an audit event was written by (details.operation_id),
    when it is a plain id."""
    details = event.get("details")
    value = details.get("operation_id") if isinstance(details, Mapping) else None
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        return None
    return value
