"""The runs' filters: one model read by the index, the operations, the
command line and every other door, parsed from and written back to a query
string, so that every view of the index is a link to share.

Parameters: ``q`` (one search box: a run id whole, by the prefix the
list shows or by a fragment from anywhere in it, an idempotency key, or a
subject, docs/search.md "Finding a run"), ``workflow_class``, ``status``, ``reason`` (a stuck reason),
``subject`` ("Order 1042", or just "Order"), ``step``, ``error_class`` or
``no_error_class=1`` (runs whose latest step has no error class: a
needs-attention group without one links to exactly its runs this way),
``since`` (a preset range: 1h, 24h, 7d, 30d) or ``from``/``to`` (a moment
in the operator's time zone), ``operation`` (the runs an operation acted
on), the searches inside the run's arguments and its signals' payloads
(``arg.<path>=<value>``, ``signal.<path>=<value>``: docs/search.md),
``worker`` (the runs whose step in progress that worker started: the
runs a gone worker left behind, docs/workers.md), and the keyset cursors
``before``/``after``.
A value that cannot be right is reported back, never silently dropped, and
so is a name that is not a filter's.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from ..i18n import LOCALE_PARAM, current_timezone, t, tn
from . import states
from .limits import ID_MAX, ID_MIN

# The preset ranges offered on the index and the insights page.
RANGES = {
    "1h": timedelta(hours=1),
    "24h": timedelta(hours=24),
    "7d": timedelta(days=7),
    "30d": timedelta(days=30),
}
# Longest text filter accepted: longer is certainly not a class, step or subject.
MAX_TEXT = 200
# The one value of no_error_class (a separate parameter rather than a
# special error_class: any text can be a stored error class).
NO_ERROR_CLASS = "1"


# Every filter's query parameter (the cursors aside): what a door other
# than the index (the command line's --filter NAME=VALUE) accepts.
NAMES = (
    "q",
    "workflow_class",
    "status",
    "reason",
    "subject",
    "step",
    "error_class",
    "no_error_class",
    "since",
    "from",
    "to",
    "operation",
    "worker",
)
# The keyset cursors: a page of the index, not a filter (an operation
# takes every run its filters match, so its filters never carry them).
CURSORS = ("before", "after")
# What a page's query string carries besides the filters and the cursors:
# the language picked from the menu (i18n.py).
PAGE_EXTRAS = (LOCALE_PARAM,)
# Longest unknown name shown back in the sentence about it.
NAME_SHOWN = 50

# What each parameter takes, read by parse below and by the API's OpenAPI
# document (api/openapi.py): one of a few words, an id (ID_MIN to ID_MAX),
# a moment (MOMENT_PATTERN), or else text up to MAX_TEXT without a NUL. A
# blank value is no filter at all (a plain HTML form sends one for every
# field left empty), so "" is one of the words too.
CHOICES: dict[str, tuple[str, ...]] = {
    "status": states.RUN,
    "reason": states.STUCK_REASONS,
    "since": tuple(RANGES),
    "no_error_class": (NO_ERROR_CLASS,),
}
IDS = ("operation", "worker", "before", "after")
MOMENTS = ("from", "to")
# The pairs parse refuses together; and "from" must come before "to".
APART = (("since", "from"), ("since", "to"), ("error_class", "no_error_class"), ("before", "after"))
# Text without a NUL (PostgreSQL text cannot hold one), as a pattern.
NO_NUL = "^[^\\x00]*$"


def moment_pattern(years: str) -> str:
    """A pattern of ISO 8601 moments in the *years* (a pattern of four
    digits) that datetime.fromisoformat reads: a date, or a date and a time
    to the minute, second or microsecond, with Z or an offset or neither;
    its days stop at 28 so that every match is a real date."""
    time = r"T([01][0-9]|2[0-3]):[0-5][0-9](:[0-5][0-9](\.[0-9]{1,6})?)?(Z|[+-](0[0-9]|1[0-3]):[0-5][0-9])?"
    return rf"^({years})-(0[1-9]|1[0-2])-(0[1-9]|1[0-9]|2[0-8])({time})?$"


# The moments a from/to filter surely reads (it reads any ISO 8601 moment);
# or blank.
MOMENT_PATTERN = "^$|" + moment_pattern("19[7-9][0-9]|2[01][0-9][0-9]")

# The searches inside JSON (docs/search.md): ``arg.<path>=<value>`` over
# the run's arguments, ``signal.<path>=<value>`` over the payload of any
# signal it received; a path is dot-separated keys, a key ending in "[]"
# an array holding what follows. Each is one containment (``@>``) that the
# GIN jsonb_path_ops index of the column answers; what no containment can
# say is refused, never run as a scan.
# The search box: the shortest run id prefix taken as one (the
# list shows eight characters); a shorter text matches a whole id only.
SEARCH_ID_PREFIX_MIN = 4
# The shortest text found anywhere in a run id (a fragment from the middle
# or the end): the shortest that, among random uuid ids, is inside no more
# runs by chance than a prefix of SEARCH_ID_PREFIX_MIN starts (docs/search.md,
# "Finding a run"). One word: a text with a space in it is no fragment.
SEARCH_ID_FRAGMENT_MIN = 6
ARG_PREFIX = "arg."
SIGNAL_PREFIX = "signal."
JSON_PREFIXES = (ARG_PREFIX, SIGNAL_PREFIX)
# Keys of a path: letters, digits, "_" and "-", at most PATH_KEY_MAX long.
PATH_KEY = re.compile(r"[A-Za-z0-9_-]{1,64}(\[\])?")
PATH_KEY_MAX = 64
# The deepest path: beyond it is a mistake, not a shape arguments have.
MAX_PATH_DEPTH = 6
# Longest value: an id or a name, not a document.
MAX_JSON_VALUE = 200
# At most this many searches inside JSON in one filter.
MAX_JSON_FILTERS = 6
# A value starting so asks for a comparison or a pattern, which a
# containment cannot answer (quote the value to match those characters).
NOT_EQUALITY = ("<", ">", "!", "~", "=")
WILDCARDS = ("*", "%")
# A JSON number as typed: matched as the number and as the same text.
_NUMBER = re.compile(r"-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?")
_LITERALS = {"true": True, "false": False, "null": None}
# The search box's form of an argument search: ``customer_id:42``.
_Q_ARGUMENT = re.compile(r"([A-Za-z0-9_.\[\]-]+):(\S.*)")


@dataclass(frozen=True)
class JsonMatch:
    """One search inside JSON: the parameter's name and value as given,
    and the documents any of which the column must contain."""

    name: str
    value: str
    documents: tuple[str, ...]

    @property
    def path(self) -> str:
        return self.name.split(".", 1)[1]


class FilterError(ValueError):
    """A query parameter that cannot be right; the message says which and
    why. *field*: the parameter whose own box says it beside its text (the
    search box's ``q``), None for the others."""

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


@dataclass(frozen=True)
class RunFilters:
    q: str | None = None
    workflow_class: str | None = None
    status: str | None = None
    reason: str | None = None
    subject: str | None = None
    step: str | None = None
    error_class: str | None = None
    no_error_class: bool = False
    since: str | None = None
    created_from: datetime | None = None
    created_to: datetime | None = None
    before: int | None = None
    after: int | None = None
    operation: int | None = None
    # arg.<path>=<value> and signal.<path>=<value>, in the order given.
    arguments: tuple[JsonMatch, ...] = ()
    signals: tuple[JsonMatch, ...] = ()
    worker: int | None = None
    # The raw from/to text, so a link keeps what the operator typed.
    raw_from: str | None = field(default=None, compare=False)
    raw_to: str | None = field(default=None, compare=False)

    @property
    def subject_type(self) -> str | None:
        return self.subject.split(None, 1)[0] if self.subject else None

    @property
    def subject_id(self) -> str | None:
        parts = self.subject.split(None, 1) if self.subject else []
        return parts[1].strip() if len(parts) == 2 else None

    @property
    def active(self) -> bool:
        """True when any filter (not a cursor) narrows the list."""
        return any(
            (
                self.q,
                self.workflow_class,
                self.status,
                self.reason,
                self.subject,
                self.step,
                self.error_class,
                self.no_error_class,
                self.since,
                self.created_from,
                self.created_to,
                self.operation,
                self.arguments,
                self.signals,
                self.worker,
            )
        )

    def query(self, **changes: Any) -> dict[str, str]:
        """The query parameters of this view, with *changes* applied (None
        drops a parameter). Changing a filter drops the cursors: the new
        list starts at its newest run."""
        values = {
            "q": self.q,
            "workflow_class": self.workflow_class,
            "status": self.status,
            "reason": self.reason,
            "subject": self.subject,
            "step": self.step,
            "error_class": self.error_class,
            "no_error_class": NO_ERROR_CLASS if self.no_error_class else None,
            "since": self.since,
            "from": self.raw_from,
            "to": self.raw_to,
            "operation": self.operation,
            "worker": self.worker,
            "before": self.before,
            "after": self.after,
        }
        for match in self.arguments + self.signals:
            values[match.name] = match.value
        if set(changes) - {"before", "after"}:
            values.update(before=None, after=None)
        values.update(changes)
        return {name: str(value) for name, value in values.items() if value not in (None, "")}

    def page_binds(self, now: datetime) -> dict[str, Any]:
        """The keyword arguments of models.workflow_index.page for these filters."""
        created_from = self.created_from
        if self.since is not None:
            created_from = now - RANGES[self.since]
        return {
            "search": self.q,
            "workflow_class": self.workflow_class,
            "status": self.status,
            "reason": self.reason,
            "subject_type": self.subject_type,
            "subject_id": self.subject_id,
            "step_name": self.step,
            "error_class": self.error_class,
            "no_error_class": self.no_error_class,
            "created_from": created_from,
            "created_to": self.created_to,
            "before_id": self.before,
            "after_id": self.after,
            "operation": self.operation,
            "arguments": [match.documents for match in self.arguments],
            "signals": [match.documents for match in self.signals],
            "search_arguments": q_argument_documents(self.q) if self.q else (),
            "worker": self.worker,
        }


def text(args: Mapping[str, str], name: str, limit: int = MAX_TEXT, *, strip: bool = True) -> str | None:
    """A query parameter's text, None when blank. *strip*: spaces around it
    dropped (a lock key keeps its own). Refused when longer than *limit* or
    holding a NUL: PostgreSQL text cannot hold one, so nothing stored has
    one; refused here rather than failing in the query."""
    raw = args.get(name) or ""
    if not raw.strip():
        return None
    value = raw.strip() if strip else raw
    if len(value) > limit:
        raise FilterError(t("pgbus.workflows.filters.errors.too_long", name=name, limit=limit))
    if "\x00" in value:
        raise FilterError(t("pgbus.workflows.filters.errors.nul_character", name=name))
    return value


def _text(args: Mapping[str, str], name: str) -> str | None:
    return text(args, name)


def _search(args: Mapping[str, str]) -> str | None:
    """The search box's text. Too long, it is refused in the box's own
    words with its length: a paste of a whole log line is no id, key or
    subject, and the box keeps all of it rather than cutting it silently."""
    raw = (args.get("q") or "").strip()
    if len(raw) > MAX_TEXT:
        raise FilterError(tn("pgbus.workflows.search.too_long", len(raw), limit=MAX_TEXT), field="q")
    return _text(args, "q")


def _choice(args: Mapping[str, str], name: str, allowed: Iterable[str]) -> str | None:
    value = _text(args, name)
    if value is not None and value not in allowed:
        raise FilterError(
            t("pgbus.workflows.filters.errors.choice", name=name, value=value, allowed=", ".join(allowed))
        )
    return value


def _cursor(args: Mapping[str, str], name: str) -> int | None:
    value = _text(args, name)
    if value is None:
        return None
    # isascii: "²" is a digit to str.isdigit, and not to int().
    if not (value.isascii() and value.isdigit()) or not ID_MIN <= int(value) <= ID_MAX:
        raise FilterError(t("pgbus.workflows.filters.errors.cursor", name=name, value=value))
    return int(value)


def parse_moment(value: str | None) -> datetime | None:
    """A date or date-time as typed in a form (``2026-03-01`` or
    ``2026-03-01T14:05``), in the operator's time zone unless it carries
    its own offset; returned in UTC."""
    if value is None:
        return None
    moment = datetime.fromisoformat(value)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=current_timezone())
    return moment.astimezone(UTC)


def _moment(args: Mapping[str, str], name: str) -> tuple[str | None, datetime | None]:
    raw = _text(args, name)
    try:
        return raw, parse_moment(raw)
    except (ValueError, OverflowError):  # Overflow: year 1 or 9999 moved past the calendar's edge
        raise FilterError(t("pgbus.workflows.filters.errors.moment", name=name, value=raw)) from None


def _documents(path: str, value: Any) -> str:
    """The JSON text of the document holding *value* at *path*'s keys."""
    for key in reversed(path.split(".")):
        if key.endswith("[]"):
            value = {key[:-2]: [value]}
        else:
            value = {key: value}
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _path_problem(path: str) -> bool:
    keys = path.split(".")
    return len(keys) > MAX_PATH_DEPTH or not all(PATH_KEY.fullmatch(key) for key in keys)


def _typed(value: str) -> tuple[Any, ...]:
    """What *value* matches: a quoted value the string only; a JSON number,
    true, false or null that and the same text (a number stored as "42" is
    the customer 42 too); anything else the string."""
    if len(value) >= 2 and value[0] == value[-1] == '"':
        return (value[1:-1],)
    if _NUMBER.fullmatch(value):
        number = json.loads(value)
        if isinstance(number, float) and (number != number or number in (float("inf"), float("-inf"))):
            return (value,)
        return (number, value)
    if value in _LITERALS:
        return (_LITERALS[value], value)
    return (value,)


def json_match(name: str, raw: str) -> JsonMatch:
    """One ``arg.``/``signal.`` filter, or FilterError naming why no index
    can answer it: a malformed or too deep path, a value too long, holding
    a NUL, or asking for a comparison or a pattern."""
    path = name.split(".", 1)[1]
    if any(mark in path for mark in NOT_EQUALITY):
        # arg.amount>=100 arrives as the name "arg.amount>": a comparison.
        raise FilterError(t("pgbus.workflows.filters.errors.json_operator", name=name[:NAME_SHOWN]))
    if _path_problem(path):
        raise FilterError(
            t(
                "pgbus.workflows.filters.errors.json_path",
                name=name[:NAME_SHOWN],
                depth=MAX_PATH_DEPTH,
                length=PATH_KEY_MAX,
            )
        )
    value = raw.strip()
    if len(value) > MAX_JSON_VALUE:
        raise FilterError(t("pgbus.workflows.filters.errors.too_long", name=name[:NAME_SHOWN], limit=MAX_JSON_VALUE))
    if "\x00" in value:
        raise FilterError(t("pgbus.workflows.filters.errors.nul_character", name=name[:NAME_SHOWN]))
    quoted = len(value) >= 2 and value[0] == value[-1] == '"'
    if not quoted and (value.startswith(NOT_EQUALITY) or any(mark in value for mark in WILDCARDS)):
        raise FilterError(t("pgbus.workflows.filters.errors.json_operator", name=name[:NAME_SHOWN]))
    documents = tuple(_documents(path, typed) for typed in _typed(value))
    return JsonMatch(name=name, value=value, documents=documents)


def q_argument_documents(q: str) -> tuple[str, ...]:
    """The documents of the search box's ``path:value`` form (an argument
    search, OR-ed with the box's other searches), none when *q* is not one
    or could not be answered by the index (then it is only the box's other
    searches)."""
    found = _Q_ARGUMENT.fullmatch(q)
    if found is None:
        return ()
    try:
        return json_match(ARG_PREFIX + found.group(1), found.group(2)).documents
    except FilterError:
        return ()


def q_argument_path(q: str) -> str | None:
    """The path of the search box's ``path:value`` form, None when *q* is
    not one (what a redaction rule is checked against)."""
    found = _Q_ARGUMENT.fullmatch(q)
    return found.group(1) if found is not None else None


def _json_matches(args: Mapping[str, str]) -> tuple[tuple[JsonMatch, ...], tuple[JsonMatch, ...]]:
    found: dict[str, list[JsonMatch]] = {ARG_PREFIX: [], SIGNAL_PREFIX: []}
    for name in args:
        prefix = next((p for p in JSON_PREFIXES if str(name).startswith(p)), None)
        if prefix is None or not (args.get(name) or "").strip():
            continue
        found[prefix].append(json_match(name, args[name]))
    if len(found[ARG_PREFIX]) + len(found[SIGNAL_PREFIX]) > MAX_JSON_FILTERS:
        raise FilterError(t("pgbus.workflows.filters.errors.json_too_many", max=MAX_JSON_FILTERS))
    return tuple(found[ARG_PREFIX]), tuple(found[SIGNAL_PREFIX])


def parse(args: Mapping[str, str]) -> RunFilters:
    """The filters of a query string; FilterError names the first bad one."""
    raw_from, created_from = _moment(args, "from")
    raw_to, created_to = _moment(args, "to")
    since = _choice(args, "since", CHOICES["since"])
    if since is not None and (created_from or created_to):
        raise FilterError(t("pgbus.workflows.filters.errors.since_and_range"))
    if created_from and created_to and created_from >= created_to:
        raise FilterError(t("pgbus.workflows.filters.errors.range_order"))
    error_class = _text(args, "error_class")
    no_error_class = _choice(args, "no_error_class", CHOICES["no_error_class"]) is not None
    if error_class is not None and no_error_class:
        raise FilterError(t("pgbus.workflows.filters.errors.error_class_and_none"))
    before = _cursor(args, "before")
    after = _cursor(args, "after")
    if before is not None and after is not None:
        raise FilterError(t("pgbus.workflows.filters.errors.two_cursors"))
    arguments, signals = _json_matches(args)
    return RunFilters(
        q=_search(args),
        workflow_class=_text(args, "workflow_class"),
        status=_choice(args, "status", CHOICES["status"]),
        reason=_choice(args, "reason", CHOICES["reason"]),
        subject=_text(args, "subject"),
        step=_text(args, "step"),
        error_class=error_class,
        no_error_class=no_error_class,
        since=since,
        created_from=created_from,
        created_to=created_to,
        before=before,
        after=after,
        operation=_cursor(args, "operation"),
        arguments=arguments,
        signals=signals,
        worker=_cursor(args, "worker"),
        raw_from=raw_from,
        raw_to=raw_to,
    )


def _refuse_unknown(names: Iterable[str], allowed: tuple[str, ...]) -> None:
    # A misspelled name dropped would widen the filter to every run: an
    # operation on it would act on all of them.
    for name in names:
        if name not in allowed and not (isinstance(name, str) and name.startswith(JSON_PREFIXES)):
            shown = str(name).replace("\x00", "\ufffd")[:NAME_SHOWN]
            raise FilterError(
                t(
                    "pgbus.workflows.filters.errors.unknown_name",
                    name=shown,
                    known=", ".join(NAMES + ("arg.<path>", "signal.<path>")),
                )
            )


def parse_strict(values: Mapping[str, Any], *, cursors: bool = False) -> RunFilters:
    """The filters a structured door was given (the API body's ``filters``,
    MCP tool arguments, command-line options; None is not given): a name
    not in NAMES (nor, with *cursors*, a cursor) and an empty value are
    refused, never read as "no filter"."""
    _refuse_unknown(values, NAMES + (CURSORS if cursors else ()))
    given = {name: str(value) for name, value in values.items() if value is not None}
    for name, value in given.items():
        if not value.strip():
            raise FilterError(t("pgbus.workflows.filters.errors.empty", name=name))
    return parse(given)


def parse_query(args: Mapping[str, str]) -> RunFilters:
    """The filters of a page's query string: the filters, the cursors and
    the language parameter; an unknown name refused. A blank value is
    absent there: a plain HTML form sends one for every field left empty."""
    _refuse_unknown(args.keys(), NAMES + CURSORS + PAGE_EXTRAS)
    return parse(args)


def group_query(group: Mapping[str, Any]) -> dict[str, str]:
    """The index query that lists one needs-attention group's runs: a group
    without an error class lists the runs without one, not every run."""
    error_class = group.get("error_class")
    values = {
        "workflow_class": group.get("workflow_class"),
        "step": group.get("step_name"),
        "reason": group.get("reason"),
        "error_class": error_class,
        "no_error_class": NO_ERROR_CLASS if error_class is None else None,
    }
    return {name: str(value) for name, value in values.items() if value is not None}


def failed_group_query(group: Mapping[str, Any]) -> dict[str, str]:
    """The index query that lists one group of failed runs (class, step and
    error class of the latest step; none when the group has none), as
    workflows.failed_groups counts them."""
    error_class = group.get("error_class")
    values = {
        "status": states.FAILED,
        "workflow_class": group.get("workflow_class"),
        "step": group.get("step_name"),
        "error_class": error_class,
        "no_error_class": NO_ERROR_CLASS if error_class is None else None,
    }
    return {name: str(value) for name, value in values.items() if value is not None}
