"""Two runs side by side: their arguments as a structural diff, their
steps in one order, and the first step where they part (docs/compare.md).

The pages (``/workflows/compare``), the API (``/api/v1/runs/compare``) and
the command line (``pgbus-web runs compare``) all call ``parse`` then
``compare``; what they refuse is a ``CompareRefused`` (problems.py words
it). No Flask request in here.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.engine import Connection

from ..models import steps, workflow_rows
from ..models.values import RawJson, json_kind
from ..rules.run_filters import PAGE_EXTRAS
from . import redacting
from .page_reads import definition_of, find_run, runs_by_prefix
from .settings import Settings

# The parameters the comparison takes: the two runs (and the language
# every page takes).
PARAMETERS = ("a", "b")
ACCEPTED = PARAMETERS + PAGE_EXTRAS
# A run id longer than this is not one a person pastes: refused before
# the database is asked.
ID_LIMIT = 1000
# Rows of the arguments' diff (changed, added, removed and equal paths
# together): past it the rest is summed up, so huge arguments cost a
# bounded page.
DIFF_ROWS_LIMIT = 500
# Nested deeper than this, a value is compared as a whole.
DIFF_DEPTH_LIMIT = 32

ADDED, REMOVED, CHANGED, EQUAL = "added", "removed", "changed", "equal"
_PLAIN_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class CompareRefused(ValueError):
    """What the comparison cannot be asked: ``reason`` is one of MISSING,
    UNKNOWN, REPEATED, MALFORMED, AMBIGUOUS, SAME, NOT_FOUND; ``name`` the
    parameter at fault, ``value`` what it held."""

    MISSING, UNKNOWN, REPEATED, MALFORMED = "missing", "unknown", "repeated", "malformed"
    AMBIGUOUS, SAME, NOT_FOUND = "ambiguous", "same", "not_found"

    def __init__(self, reason: str, name: str | None = None, value: str = "") -> None:
        super().__init__(f"{reason}: {name}={value!r}")
        self.reason, self.name, self.value = reason, name, value


def parse(args: Mapping[str, Iterable[str]]) -> tuple[str, str]:
    """The two ids of a query (each name to its list of values): both
    given once, nothing else given, each a plausible id."""
    for name in args:
        if name not in ACCEPTED:
            raise CompareRefused(CompareRefused.UNKNOWN, name)
    ids = []
    for name in PARAMETERS:
        values = list(args.get(name) or [])
        if len(values) > 1:
            raise CompareRefused(CompareRefused.REPEATED, name)
        value = values[0].strip() if values else ""
        if not value:
            raise CompareRefused(CompareRefused.MISSING, name)
        if "\x00" in value or len(value) > ID_LIMIT or not value.isprintable():
            raise CompareRefused(CompareRefused.MALFORMED, name, value[:80])
        ids.append(value)
    return ids[0], ids[1]


# --- the arguments' diff -----------------------------------------------------


@dataclass(frozen=True)
class Change:
    path: str
    kind: str
    a: Any = None
    b: Any = None
    # A changed value whose JSON type changed too (1 and "1").
    type_changed: bool = False


def json_type(value: Any) -> str:
    """A value's JSON type: object, array, string, number, boolean, null
    (values.json_kind's words), or raw for text Python could not read."""
    readable = value is None or isinstance(value, (bool, int, float, str, Mapping, list, tuple))
    if isinstance(value, RawJson) or not readable:
        return "raw"
    return json_kind(value)


def same(a: Any, b: Any) -> bool:
    """True when two JSON values are equal as JSON: of one type (1 is not
    true, "1" is not 1) and equal all the way down."""
    kind = json_type(a)
    if kind != json_type(b):
        return False
    if kind == "object":
        return a.keys() == b.keys() and all(same(a[key], b[key]) for key in a)
    if kind == "array":
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if kind == "raw":
        return str(a) == str(b)
    return bool(a == b)


def child_path(path: str, key: Any) -> str:
    """The path of *key* under *path*: ``customer.id``, ``items[0]``,
    ``["odd key"]`` for a key that is not a plain name."""
    if isinstance(key, int):
        return f"{path}[{key}]"
    key = str(key)
    if _PLAIN_KEY.match(key):
        return f"{path}.{key}" if path else key
    return f"{path}[{json.dumps(key, ensure_ascii=False)}]"


def diff(a: Any, b: Any, path: str = "", depth: int = 0) -> list[Change]:
    """Every path where *a* and *b* differ, and the largest equal parts
    (a whole equal subtree is one EQUAL row), in A's key order then B's
    new keys; arrays index by index."""
    if same(a, b):
        return [Change(path, EQUAL, a, b)]
    kind_a, kind_b = json_type(a), json_type(b)
    if kind_a == kind_b == "object" and depth < DIFF_DEPTH_LIMIT:
        rows: list[Change] = []
        for key in a:
            where = child_path(path, key)
            rows += diff(a[key], b[key], where, depth + 1) if key in b else [Change(where, REMOVED, a[key])]
        rows += [Change(child_path(path, key), ADDED, None, b[key]) for key in b if key not in a]
        return rows
    if kind_a == kind_b == "array" and depth < DIFF_DEPTH_LIMIT:
        rows = []
        for index in range(max(len(a), len(b))):
            where = child_path(path, index)
            if index >= len(b):
                rows.append(Change(where, REMOVED, a[index]))
            elif index >= len(a):
                rows.append(Change(where, ADDED, None, b[index]))
            else:
                rows += diff(a[index], b[index], where, depth + 1)
        return rows
    return [Change(path, CHANGED, a, b, type_changed=kind_a != kind_b)]


def arguments_diff(a: Any, b: Any) -> dict[str, Any]:
    """The diff of two runs' arguments, shaped for a page: the differing
    rows and the equal ones apart, each at most DIFF_ROWS_LIMIT in all."""
    try:
        rows = diff(a, b)
    except RecursionError:
        rows = [Change("", CHANGED, a, b)]
    shown = rows[:DIFF_ROWS_LIMIT]
    return {
        "changes": [row for row in shown if row.kind != EQUAL],
        "equal": [row for row in shown if row.kind == EQUAL],
        "identical": len(rows) == 1 and rows[0].kind == EQUAL,
        "left_out": len(rows) - len(shown),
    }


# --- the steps, side by side ---------------------------------------------------


@dataclass
class Side:
    """One run's part of one step: None fields when it never reached it."""

    attempts: int = 0
    status: str | None = None
    started_at: Any = None
    finished_at: Any = None
    error_class: str | None = None
    error_line: str | None = None

    @property
    def reached(self) -> bool:
        return self.attempts > 0


@dataclass
class StepRow:
    name: str
    a: Side
    b: Side
    diverges: bool = False


def _side(entry: Mapping[str, Any] | None) -> Side:
    if entry is None:
        return Side()
    latest = entry["latest"]
    message = latest.get("error_message")
    line = message.strip().split("\n", 1)[0] if isinstance(message, str) and message.strip() else None
    return Side(
        entry["attempts"],
        latest.get("status"),
        latest.get("started_at"),
        latest.get("finished_at"),
        latest.get("error_class"),
        line,
    )


def step_order(named_a: list[dict[str, Any]], named_b: list[dict[str, Any]], defined: Iterable[str] = ()) -> list[str]:
    """The steps' order: the definition's (when loaded), then every other
    step either run attempted, in the order A first met them, then B."""
    order: list[str] = []
    for name in [*defined, *(entry["name"] for entry in named_a), *(entry["name"] for entry in named_b)]:
        if name not in order:
            order.append(name)
    return order


def parts_at(a: Side, b: Side) -> bool:
    """True when the two runs ended a step differently: one reached it and
    the other did not, or their latest attempts' status or error class
    differ. How many attempts each took is shown, not counted as parting."""
    return (a.reached, a.status, a.error_class) != (b.reached, b.status, b.error_class)


@dataclass
class Comparison:
    a: dict[str, Any]
    b: dict[str, Any]
    arguments: dict[str, Any]
    steps: list[StepRow]
    # The first step where they part, or None.
    divergence: StepRow | None
    # The runs' statuses differ though no step parts them (one still running).
    status_differs: bool
    same_class: bool
    digest_changed: bool
    current_digest: dict[str, str | None] = field(default_factory=dict)

    @property
    def diverges(self) -> bool:
        return self.divergence is not None or self.status_differs


def resolve(conn: Connection, name: str, value: str) -> dict[str, Any]:
    """The run *value* names, as the run page takes it: its whole id, or
    the short id the pages print when it names one run."""
    run = find_run(conn, value)
    if run is not None:
        return run
    found = runs_by_prefix(conn, value)
    if len(found) > 1:
        raise CompareRefused(CompareRefused.AMBIGUOUS, name, value)
    run = find_run(conn, found[0]) if found else None
    if run is None:
        raise CompareRefused(CompareRefused.NOT_FOUND, name, value)
    return run


def compare(conn: Connection, settings: Settings, a_id: str, b_id: str) -> Comparison:
    """Runs *a_id* and *b_id* compared (CompareRefused when either is
    missing or both are one run)."""
    run_a, run_b = resolve(conn, "a", a_id), resolve(conn, "b", b_id)
    if run_a["workflow_id"] == run_b["workflow_id"]:
        raise CompareRefused(CompareRefused.SAME, "b", run_a["workflow_id"])
    # Diffed redacted: two hidden values read as equal, so the comparison
    # cannot tell a viewer whether two runs share a secret.
    rules = redacting.rules_of(conn)
    redacting.run_row(run_a, rules)
    redacting.run_row(run_b, rules)
    named_a = steps.names_for_run(conn, run_a["workflow_id"])
    named_b = steps.names_for_run(conn, run_b["workflow_id"])
    definition = definition_of(settings, run_a["workflow_class"])
    defined = definition.step_names if definition is not None else ()
    by_a = {entry["name"]: entry for entry in named_a}
    by_b = {entry["name"]: entry for entry in named_b}
    rows = [
        StepRow(name, _side(by_a.get(name)), _side(by_b.get(name))) for name in step_order(named_a, named_b, defined)
    ]
    # Steps neither run reached (only the definition names them) say nothing.
    rows = [row for row in rows if row.a.reached or row.b.reached]
    divergence = next((row for row in rows if parts_at(row.a, row.b)), None)
    if divergence is not None:
        divergence.diverges = True
    digest_a, digest_b = run_a.get("definition_digest"), run_b.get("definition_digest")
    current = {}
    for run in (run_a, run_b):
        found = definition_of(settings, run["workflow_class"])
        current[run["workflow_id"]] = found.digest if found is not None else None
    return Comparison(
        a=run_a,
        b=run_b,
        arguments=arguments_diff(run_a.get("arguments"), run_b.get("arguments")),
        steps=rows,
        divergence=divergence,
        status_differs=divergence is None and run_a["status"] != run_b["status"],
        same_class=run_a["workflow_class"] == run_b["workflow_class"],
        digest_changed=digest_a != digest_b,
        current_digest=current,
    )


def last_completed(conn: Connection, run: Mapping[str, Any]) -> str | None:
    """The id of the newest completed run of *run*'s class other than it:
    what the run page offers to compare with."""
    return workflow_rows.newest_completed(conn, run["workflow_class"], other_than=run["workflow_id"])
