"""The input checks every door reads: the action forms of the pages, the
API's bodies (as form text, api/body.py), the command line's options and
the MCP tools' arguments (as_form): each field checked, turned into what
the runtime takes, and refused with a translated message that names the
field, so one bad input gets one sentence at every door.

Nothing here touches the database. A FormError carries the field, the
message and the HTTP status that fits (422 for a value that cannot be
used, 413 for one that is too large), so the route can show the form back.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, tzinfo
from typing import Any

from ..i18n import current_locale, parse_timezone, t
from ..models import values
from ..rules import run_filters, states, verb_table
from ..rules.limits import ID_MAX, ID_MIN, RATE_MAX, REASON_LIMIT
from ..runtime import errors, operation_record
from .words import timefmt

# Longest signal name and idempotency key accepted: names are identifiers,
# keys are ids; anything longer is a mistake, not data.
NAME_LIMIT = 200
KEY_LIMIT = 200
# Largest signal payload, as JSON text: a signal says something happened,
# it does not carry files.
PAYLOAD_LIMIT = 64 * 1024
# How far ahead a run may be resumed or rescheduled. Further is a typo (a
# year 9999 for 2029), not a plan: the run would sit unseen for decades,
# and its page would draw decades of timeline.
MAX_AHEAD = timedelta(days=5 * 365)
# Longest retention period: the cutoff of a longer one falls before any
# run was stored, or before the calendar's first day (datetime's range).
MAX_DURATION = timedelta(days=100 * 365)
# The value an <input type="datetime-local"> sends and shows, to the minute.
LOCAL_FORMAT = "%Y-%m-%dT%H:%M"

# The hidden field of a time form naming the zone it was drawn in: the
# first page a browser loads is drawn in UTC, before timezone.js has set
# the zone cookie, so the cookie alone would read the typed time in a zone
# the form never showed.
ZONE_FIELD = "tz"

# Text a field takes, as the API's document says it (api/openapi.py): no
# NUL anywhere; NOT_BLANK: something besides spaces too (a field is read
# stripped, and a required one blank is missing).
NO_NUL = run_filters.NO_NUL
NOT_BLANK = "^[^\\x00]*[^\\s\\x00][^\\x00]*$"

# The fields each outside verb reads, besides the CSRF token (the verb
# table's; sending a signal has its own route and form).
VERB_FIELDS: dict[str, tuple[str, ...]] = {
    verb.name: verb.fields for verb in verb_table.TABLE if verb.name != verb_table.SIGNAL
}
SIGNAL_FIELDS = verb_table.BY_NAME[verb_table.SIGNAL].fields
GROUP_FIELDS = ("workflow_class", "step_name", "reason", "error_class")


class FormError(ValueError):
    """A field that cannot be used. ``status``: 422, or 413 when too large."""

    def __init__(self, field_name: str, message: str, status: int = 422) -> None:
        super().__init__(message)
        self.field = field_name
        self.message = message
        self.status = status


@dataclass(frozen=True)
class VerbForm:
    reason: str | None = None
    at: datetime | None = None  # aware, UTC
    from_step: str | None = None

    def options(self) -> dict[str, Any]:
        """The keyword options runtime.verbs.perform takes."""
        return {"reason": self.reason, "at": self.at, "from_step": self.from_step}


@dataclass(frozen=True)
class SignalForm:
    name: str
    payload: dict[str, Any] = field(default_factory=dict)
    idempotency_key: str | None = None


def _text(form: Mapping[str, str], name: str) -> str:
    value = (form.get(name) or "").strip()
    if "\x00" in value:
        # PostgreSQL text cannot hold a NUL; refuse it here rather than fail there.
        raise FormError(name, t("pgbus.workflows.forms.errors.nul_character"))
    return value


class _UnstorableNumber(ValueError):
    """A JSON number the payload cannot keep as written."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text


# Longest number shown back in the message about it.
NUMBER_SHOWN = 40


def _reject_constant(name: str) -> Any:
    # NaN and Infinity are not JSON, and jsonb refuses them.
    raise _UnstorableNumber(name)


def _storable_float(text: str) -> float:
    # Python reads a JSON number as a float: past its range 1e400 would be
    # stored as Infinity (which jsonb refuses) and 1e-400 as 0, a number
    # nobody typed.
    value = float(text)
    mantissa = text.lower().split("e")[0]
    if math.isinf(value) or (value == 0 and any(digit in "123456789" for digit in mantissa)):
        raise _UnstorableNumber(text)
    return value


def _storable_int(text: str) -> int:
    # Longer than Python converts (sys.get_int_max_str_digits): refused
    # with our words rather than Python's.
    try:
        return int(text)
    except ValueError:
        raise _UnstorableNumber(text) from None


def _limit(value: str, field_name: str, limit: int) -> str:
    if len(value) > limit:
        raise FormError(field_name, t("pgbus.workflows.forms.errors.too_long", max=limit))
    return value


def reason(form: Mapping[str, str], name: str = "reason") -> str | None:
    """The operator's optional reason, for the audit trail (a bulk form
    calls it ``note``: its ``reason`` is the group's stuck reason)."""
    return _limit(_text(form, name), name, REASON_LIMIT) or None


def require_reason(form: Mapping[str, str], name: str = "reason") -> str:
    """A reason the door or the verb requires (the command line, MCP, a
    confirmed operation): the reason's checks, and a blank one refused."""
    text = reason(form, name)
    if text is None:
        raise FormError(name, t("pgbus.operations.errors.reason_missing"))
    return text


def as_form(**given: Any) -> dict[str, str]:
    """What a structured door was given (command-line options, MCP tool
    arguments) as the form text the checks read: None is absent, a boolean
    the checkbox's "1" or "", text as it is, anything else as its JSON (so
    a payload that is not an object is refused by the same check as the
    page's)."""
    form: dict[str, str] = {}
    for name, value in given.items():
        if value is None:
            continue
        if isinstance(value, bool):
            form[name] = "1" if value else ""
        elif isinstance(value, str):
            form[name] = value
        else:
            form[name] = json.dumps(value, ensure_ascii=False)
    return form


def workflow_id(value: str) -> str:
    """A run's id as a door was given it: one PostgreSQL text cannot hold
    (a NUL) names no run, and asking the database would fail, not answer."""
    if not isinstance(value, str) or "\x00" in value:
        raise errors.RunNotFound(str(value))
    return value


def operation_id(value: Any) -> int:
    """An operation's id: a bigserial, so past 2**63-1 (or not a whole
    number above 0) it names no operation; PostgreSQL would refuse the
    query rather than answer none."""
    text = str(value).strip()
    if not (text.isascii() and text.isdigit()) or not ID_MIN <= int(text) <= ID_MAX:
        raise operation_record.OperationNotFound(text[:50])
    return int(text)


def duration(value: timedelta, shown: str, field_name: str = "older_than") -> timedelta:
    """A retention period no longer than MAX_DURATION; *shown* is what was typed."""
    if value > MAX_DURATION:
        raise FormError(
            field_name, t("pgbus.workflows.forms.errors.duration_too_long", value=shown[:50], max=MAX_DURATION.days)
        )
    return value


def local_input(moment: datetime, tz: tzinfo) -> str:
    """*moment* as a datetime-local input shows it in zone *tz*."""
    return moment.astimezone(tz).strftime(LOCAL_FORMAT)


def parse_at(value: str | None, *, tz: tzinfo, now: datetime) -> datetime:
    """A datetime-local value ("2030-01-31T14:05", seconds optional) read in
    the operator's zone *tz*, or an ISO 8601 time with its own offset; as
    an aware UTC datetime strictly after *now*."""
    text = (value or "").strip()
    if not text:
        raise FormError("at", t("pgbus.workflows.forms.errors.time_missing"))
    if "\x00" in text:
        # Python's fromisoformat reads "10:00\x00" as 10:00: refuse what
        # was sent rather than store something else.
        raise FormError("at", t("pgbus.workflows.forms.errors.nul_character"))
    if len(text) > 64:
        raise FormError("at", t("pgbus.workflows.forms.errors.time_unreadable", value=text[:64]))
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        raise FormError("at", t("pgbus.workflows.forms.errors.time_unreadable", value=text)) from None
    if parsed.tzinfo is None:
        # A wall-clock time in the operator's zone; in a DST gap or fold
        # zoneinfo picks the earlier reading, as the browser does.
        parsed = parsed.replace(tzinfo=tz)
    try:
        moment = parsed.astimezone(UTC)
    except OverflowError:
        # Year 9999 east of UTC, year 1 west of it: past the calendar's edge.
        raise FormError("at", t("pgbus.workflows.forms.errors.time_unreadable", value=text)) from None
    if moment <= now:
        raise FormError("at", t("pgbus.workflows.forms.errors.time_past", value=text))
    if moment > now + MAX_AHEAD:
        latest = timefmt.absolute(now + MAX_AHEAD, locale=current_locale(), tz=tz)
        try:
            # Written as the page writes times, not as the field sent it.
            shown = timefmt.absolute(moment, locale=current_locale(), tz=tz)
        except OverflowError:
            shown = text
        raise FormError("at", t("pgbus.workflows.forms.errors.time_too_far", value=shown, latest=latest))
    return moment


def at_pattern(now: datetime) -> str:
    """Moments parse_at takes whatever the hour at *now* and the offset:
    from the year after next to the years MAX_AHEAD reaches, short of its
    last two (the API's document, api/openapi.py)."""
    years = range(now.year + 2, (now + MAX_AHEAD).year - 1)
    return run_filters.moment_pattern("|".join(str(year) for year in years))


def form_zone(form: Mapping[str, str], fallback: tzinfo) -> tzinfo:
    """The zone the form was drawn in (its ZONE_FIELD), when that names a
    real zone; *fallback* (the cookie's zone) otherwise."""
    return parse_timezone((form.get(ZONE_FIELD) or "").strip()) or fallback


def parse_verb(
    verb: str, form: Mapping[str, str], *, tz: tzinfo, now: datetime, step_names: tuple[str, ...] = ()
) -> VerbForm:
    """The options of *verb* from its form. *tz*: the operator's zone as
    the request knows it, for a form that does not say which zone it was
    drawn in. *step_names*: the run's definition's steps, which from_step
    must be one of (empty: any name, the runtime checks)."""
    fields = VERB_FIELDS[verb]
    at = parse_at(form.get("at"), tz=form_zone(form, tz), now=now) if "at" in fields else None
    from_step = None
    if "from_step" in fields:
        from_step = _text(form, "from_step") or None
        if from_step is not None and step_names and from_step not in step_names:
            raise FormError(
                "from_step",
                t(
                    "pgbus.workflows.forms.errors.unknown_step",
                    step=from_step[:NAME_LIMIT],
                    steps=", ".join(step_names),
                ),
            )
    return VerbForm(reason=reason(form), at=at, from_step=from_step)


def parse_signal(form: Mapping[str, str]) -> SignalForm:
    """Name, JSON object payload (empty means {}), optional idempotency key."""
    name = _limit(_text(form, "name"), "name", NAME_LIMIT)
    if not name:
        raise FormError("name", t("pgbus.workflows.forms.errors.signal_name_missing"))
    raw = form.get("payload") or ""
    if len(raw.encode("utf-8")) > PAYLOAD_LIMIT:
        raise FormError(
            "payload", t("pgbus.workflows.forms.errors.payload_too_large", max=PAYLOAD_LIMIT // 1024), status=413
        )
    payload: Any = {}
    if raw.strip():
        payload = _json_object("payload", raw)
    key = _limit(_text(form, "idempotency_key"), "idempotency_key", KEY_LIMIT) or None
    return SignalForm(name=name, payload=payload, idempotency_key=key)


def _json_object(field_name: str, raw: str) -> dict[str, Any]:
    """A form field holding a JSON object, as values jsonb stores exactly
    as typed: FormError (422) for text that is not JSON, JSON that is not
    an object, or what jsonb cannot hold (a number past a float's range,
    NaN, a NUL, a lone surrogate, nesting deeper than values.MAX_JSON_DEPTH)."""
    try:
        value = json.loads(raw, parse_constant=_reject_constant, parse_float=_storable_float, parse_int=_storable_int)
    except json.JSONDecodeError as problem:
        raise FormError(
            field_name,
            t(
                "pgbus.workflows.forms.errors.payload_not_json_at",
                detail=problem.msg,
                line=problem.lineno,
                column=problem.colno,
            ),
        ) from None
    except _UnstorableNumber as problem:
        shown = problem.text if len(problem.text) <= NUMBER_SHOWN else problem.text[:NUMBER_SHOWN] + "…"
        raise FormError(field_name, t("pgbus.workflows.forms.errors.payload_number", value=shown)) from None
    except RecursionError:
        raise FormError(
            field_name, t("pgbus.workflows.forms.errors.payload_too_deep", max=values.MAX_JSON_DEPTH)
        ) from None
    except ValueError as problem:
        raise FormError(field_name, t("pgbus.workflows.forms.errors.payload_not_json", detail=str(problem))) from None
    if not isinstance(value, dict):
        raise FormError(field_name, t("pgbus.workflows.forms.errors.payload_not_object"))
    found = values.json_problem(value)
    if found is not None:
        kind, piece = found
        if kind == values.NUL:
            raise FormError(field_name, t("pgbus.workflows.forms.errors.nul_character"))
        if kind == values.SURROGATE:
            raise FormError(field_name, t("pgbus.workflows.forms.errors.payload_surrogate", value=piece))
        if kind == values.TOO_DEEP:
            raise FormError(field_name, t("pgbus.workflows.forms.errors.payload_too_deep", max=values.MAX_JSON_DEPTH))
        raise FormError(field_name, t("pgbus.workflows.forms.errors.payload_number", value=piece))
    return value


def parse_group(form: Mapping[str, str]) -> dict[str, Any]:
    """A needs-attention group as models.workflow_attention.attention_ids takes it:
    workflow_class, step_name, reason (a stuck reason) and error_class (an
    empty one means runs without an error)."""
    group: dict[str, Any] = {}
    for name in ("workflow_class", "step_name", "reason"):
        value = _limit(_text(form, name), name, NAME_LIMIT)
        if not value:
            raise FormError(name, t("pgbus.workflows.forms.errors.group_field_missing", field=name))
        group[name] = value
    if group["reason"] not in states.STUCK_REASONS:
        raise FormError(
            "reason",
            t(
                "pgbus.workflows.forms.errors.unknown_reason",
                reason=group["reason"],
                reasons=", ".join(states.STUCK_REASONS),
            ),
        )
    # An error class is a qualified name; the limit is generous.
    group["error_class"] = _limit(_text(form, "error_class"), "error_class", 1000) or None
    return group


def values_of(form: Mapping[str, str], names: tuple[str, ...]) -> dict[str, str]:
    """The submitted *names*, as they came (to show a refused form back)."""
    return {name: form.get(name, "") for name in names}


def default_at(now: datetime, tz: tzinfo, ahead: timedelta = timedelta(hours=1)) -> str:
    """What a time field proposes: *ahead* from now, on the minute."""
    return local_input((now + ahead).replace(second=0, microsecond=0), tz)


# --- an operation: one verb on every run a filter matches ---------------------

# The field of an operation's form holding the index's query string: the
# index's own filter names cannot be the form's fields, since its "reason"
# (a stuck reason) would collide with the operator's reason.
QUERY_FIELD = "query"


@dataclass(frozen=True)
class OperationForm:
    verb: str
    params: dict[str, Any]  # at (aware UTC), from_step, signal name and payload
    reason: str | None
    expected: int | None  # the count the operator was shown
    confirmed: bool
    # The pace asked for: rate (runs per second) and max_in_flight, each
    # present only when given (parse_pace).
    pace: dict[str, Any] = field(default_factory=dict)


def parse_operation(form: Mapping[str, str], *, tz: tzinfo, now: datetime, verbs: tuple[str, ...]) -> OperationForm:
    """An operation's form: the verb (one of *verbs*), the fields it takes,
    the reason, the count shown and whether it was confirmed. The reason
    is not required here: the preview is asked without one, and the
    runtime refuses a confirmed form without it."""
    verb = _text(form, "verb")
    if verb not in verbs:
        raise FormError("verb", t("pgbus.workflows.forms.errors.unknown_verb", verb=verb[:50]))
    fields = verb_table.BY_NAME[verb].fields
    params: dict[str, Any] = {}
    confirmed = form.get("confirmed") == "1"
    if "at" in fields:
        raw_at = form.get("at")
        if not (raw_at or "").strip() and not confirmed:
            # The first preview proposes the run page's default time.
            raw_at = default_at(now, form_zone(form, tz))
        params["at"] = parse_at(raw_at, tz=form_zone(form, tz), now=now)
    if "from_step" in fields:
        params["from_step"] = _limit(_text(form, "from_step"), "from_step", NAME_LIMIT) or None
    if verb == verb_table.SIGNAL:
        signal = parse_signal(form)
        params.update(name=signal.name, payload=signal.payload)
    raw = _text(form, "expected")
    expected = None
    if raw:
        if not (raw.isascii() and raw.isdigit()) or len(raw) > len(str(EXPECTED_MAX)):
            raise FormError("expected", t("pgbus.operations.errors.expected", value=raw[:50]))
        expected = int(raw)
    return OperationForm(
        verb=verb,
        params=params,
        reason=reason(form),
        expected=expected,
        confirmed=confirmed,
        pace={name: value for name, value in parse_pace(form).items() if value is not None},
    )


# The highest count an operation's form may say it was shown: 18 digits.
EXPECTED_MAX = 10**18 - 1

# The pace's fields and bounds (runtime/pace.py).
PACE_FIELDS = ("rate", "max_in_flight")
MAX_RATE = RATE_MAX  # the column's CHECK (rules/limits)
MAX_IN_FLIGHT = 1_000_000


def parse_pace(form: Mapping[str, str]) -> dict[str, Any]:
    """The pace fields *form* has: rate (runs per second, above 0 and at
    most MAX_RATE) and max_in_flight (a whole number, 1 to MAX_IN_FLIGHT);
    a field sent empty is None (no limit)."""
    pace: dict[str, Any] = {}
    if "rate" in form:
        raw = _text(form, "rate")
        if not raw:
            pace["rate"] = None
        else:
            try:
                value = float(raw) if raw.isascii() and len(raw) <= NUMBER_SHOWN else math.nan
            except ValueError:
                value = math.nan
            if not (0 < value <= MAX_RATE):  # NaN and infinities fail too
                raise FormError("rate", t("pgbus.operations.errors.rate", value=raw[:NUMBER_SHOWN], max=MAX_RATE))
            pace["rate"] = value
    if "max_in_flight" in form:
        raw = _text(form, "max_in_flight")
        if not raw:
            pace["max_in_flight"] = None
        elif not (raw.isascii() and raw.isdigit()) or len(raw) > 7 or not 0 < int(raw) <= MAX_IN_FLIGHT:
            raise FormError(
                "max_in_flight", t("pgbus.operations.errors.max_in_flight", value=raw[:NUMBER_SHOWN], max=MAX_IN_FLIGHT)
            )
        else:
            pace["max_in_flight"] = int(raw)
    return pace
