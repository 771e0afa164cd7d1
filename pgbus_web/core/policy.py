"""The policy: the rules that decide what may happen, as rows in
PostgreSQL that every process and every door reads (docs/policy.md).

- ``current(engine)`` is the policy now: kept in memory and checked
  against the history's last id at most every CHECK_EVERY seconds, so a
  change made by any process reaches every other within a second or two.
- ``change(engine, key, value, ...)`` checks a new value, refuses what is
  wrong with a PolicyError (nothing written), and keeps the old and the
  new value in the history with who and why.

A rule without a row has its default: an empty policy is the dashboard's
defaults. A process option may tighten a rule (``Approval.tightened``);
no option loosens one.
"""

from __future__ import annotations

import fnmatch
import json
import logging
import re
import threading
import time
from collections.abc import Callable, Mapping
from contextlib import nullcontext
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.pool import NullPool

from .. import bounded, db, defaults
from ..models import changes, policy_rows
from ..models.text import truncate
from ..rules import redaction, roles
from ..rules.approval import Approval
from ..rules.limits import RATE_MAX, REASON_LIMIT
from ..rules.stuck import Thresholds
from ..runtime.clock import utcnow
from .settings import STALL_FLOOR

log = logging.getLogger(__name__)

# How often a process asks whether the policy changed (one tiny read).
CHECK_EVERY = 1.0
# The largest value a rule may hold, as JSON text.
MAX_VALUE_BYTES = 64 * 1024
MAX_GRANTS = 500

STALL_THRESHOLD = "stall_threshold"
WAITING_THRESHOLD = "waiting_threshold"
APPROVAL = "approval"
MAX_RATE = "max_rate"
REDACT = "redact"
GRANTS = "grants"
KEYS = (STALL_THRESHOLD, WAITING_THRESHOLD, APPROVAL, MAX_RATE, REDACT, GRANTS)

# The bounds of the thresholds, in seconds. The stall threshold's floor is
# twice the longest silence after which a worker is gone, so a dead
# worker is flagged before its runs stall.
STALL_BOUNDS = (int(STALL_FLOOR.total_seconds()), 7 * 86400)
WAITING_BOUNDS = (60, 365 * 86400)
APPROVAL_MAX = 1_000_000_000
CLASS_PATTERN = re.compile(r"^[A-Za-z0-9_:.*?-]{1,200}$")
PRINCIPAL = re.compile(r"^(user|group|token):[A-Za-z0-9._@-]{1,64}$")


class PolicyError(ValueError):
    """A change the policy refuses. *kind* names the sentence
    (core/problems.py), *values* fill it; the message is its English."""

    def __init__(self, kind: str, message: str, **values: Any) -> None:
        self.kind = kind
        self.values = values
        super().__init__(message)


class ChangedUnderYou(PolicyError):
    def __init__(self, key: str, found: Mapping[str, Any] | None) -> None:
        actor = found["changed_by"] if found else "someone"
        super().__init__(
            "changed_under", f"{key} was changed by {actor} since it was read; read it again", rule=key, actor=actor
        )


@dataclass(frozen=True)
class Grant:
    """A role's powers, narrowed: to whom (``user:``, ``group:`` or
    ``token:`` and a name), which classes (names or patterns with ``*``
    and ``?``) and which powers (None: every power of the role)."""

    to: str
    role: str
    classes: tuple[str, ...] = ("*",)
    verbs: tuple[str, ...] | None = None

    def powers(self) -> frozenset[str]:
        held = roles.powers(self.role)
        return held if self.verbs is None else held & frozenset(self.verbs)

    def covers(self, workflow_class: str | None) -> bool:
        """True when the grant reaches *workflow_class* (None: a power
        asked of no class, which only a grant of every class reaches)."""
        if workflow_class is None:
            return "*" in self.classes
        return any(fnmatch.fnmatchcase(workflow_class, pattern) for pattern in self.classes)


@dataclass(frozen=True)
class Policy:
    stall_threshold: timedelta = defaults.STALL_THRESHOLD
    waiting_threshold: timedelta = defaults.WAITING_THRESHOLD
    approval: Approval = Approval()
    max_rate: float | None = None
    redact: tuple[redaction.Rule, ...] = ()
    grants: tuple[Grant, ...] = ()
    # The history's last id when read: two reads with the same marker saw the same policy.
    marker: int = 0
    # The stored rows (key -> row), for the Policy page and its versions.
    rows: Mapping[str, Mapping[str, Any]] = field(default_factory=dict, compare=False, repr=False)

    def thresholds(self) -> Thresholds:
        """The stuck-run thresholds, as the models' queries take them."""
        return {"threshold": self.stall_threshold, "waiting_threshold": self.waiting_threshold}

    def value_of(self, key: str) -> Any:
        """The rule's value as JSON (its default when not stored)."""
        row = self.rows.get(key)
        return row["value"] if row is not None else DEFAULTS[key]

    def version_of(self, key: str) -> int:
        """The history id that wrote the rule (0: never changed)."""
        row = self.rows.get(key)
        return int(row["version"]) if row is not None else 0


# Each rule's default, as stored JSON.
DEFAULTS: dict[str, Any] = {
    STALL_THRESHOLD: int(defaults.STALL_THRESHOLD.total_seconds()),
    WAITING_THRESHOLD: int(defaults.WAITING_THRESHOLD.total_seconds()),
    APPROVAL: {"threshold": None, "verbs": None},
    MAX_RATE: None,
    REDACT: [],
    GRANTS: [],
}


# --- checking a value ---------------------------------------------------------


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value == value


def _seconds(key: str, value: Any, bounds: tuple[int, int]) -> timedelta:
    low, high = bounds
    if not _number(value) or not low <= value <= high:
        raise PolicyError(
            "bad_seconds", f"{key} must be a number of seconds from {low} to {high}", rule=key, low=low, high=high
        )
    return timedelta(seconds=value)


def _verbs(key: str, value: Any, allowed: tuple[str, ...]) -> tuple[str, ...]:
    if not isinstance(value, list) or not value or len(value) > len(allowed):
        raise PolicyError(
            "bad_verbs",
            f"{key}: verbs must be a list of some of {', '.join(allowed)}",
            rule=key,
            verbs=", ".join(allowed),
        )
    for name in value:
        if name not in allowed:
            raise PolicyError(
                "unknown_verb",
                f"{key}: {str(name)[:50]!r} is not one of {', '.join(allowed)}",
                rule=key,
                value=str(name)[:50],
                verbs=", ".join(allowed),
            )
    return tuple(dict.fromkeys(value))


def _approval(value: Any) -> Approval:
    if not isinstance(value, dict) or set(value) - {"threshold", "verbs"}:
        raise PolicyError("bad_approval", 'approval must be {"threshold": runs or null, "verbs": verbs or null}')
    threshold = value.get("threshold")
    if threshold is not None and (
        not isinstance(threshold, int) or isinstance(threshold, bool) or not 0 <= threshold <= APPROVAL_MAX
    ):
        raise PolicyError(
            "bad_approval_threshold",
            f"approval's threshold must be a whole number of runs from 0 to {APPROVAL_MAX}, or null",
            high=APPROVAL_MAX,
        )
    verbs = value.get("verbs")
    return Approval(threshold, None if verbs is None else _verbs(APPROVAL, verbs, roles.RUN_VERBS))


def _rate(value: Any) -> float | None:
    if value is None:
        return None
    if not _number(value) or not 0 < value <= RATE_MAX:
        raise PolicyError(
            "bad_rate", f"max_rate must be runs a second above 0 and at most {RATE_MAX}, or null", high=RATE_MAX
        )
    return float(value)


def _redact(value: Any) -> tuple[redaction.Rule, ...]:
    if not isinstance(value, list) or len(value) > redaction.MAX_RULES:
        raise PolicyError(
            "bad_redact",
            f"redact must be a list of at most {redaction.MAX_RULES} keys or paths",
            high=redaction.MAX_RULES,
        )
    try:
        return redaction.parse_all(dict.fromkeys(value))
    except redaction.BadRule as problem:
        raise PolicyError("bad_path", str(problem), value=problem.rule) from None
    except TypeError:
        raise PolicyError("bad_redact", "redact must be a list of keys or paths", high=redaction.MAX_RULES) from None


def _grant(value: Any) -> Grant:
    if (
        not isinstance(value, dict)
        or set(value) - {"to", "role", "classes", "verbs"}
        or not isinstance(value.get("to"), str)
        or not PRINCIPAL.match(value["to"])
    ):
        raise PolicyError(
            "bad_grant",
            'a grant is {"to": "user:<name>", "group:<name>" or "token:<name>",'
            ' "role", "classes": [patterns], "verbs": [verbs]}',
        )
    role = value.get("role")
    if role not in roles.ROLES:
        raise PolicyError(
            "unknown_role",
            f"{str(role)[:50]!r} is not a role: use {', '.join(roles.ROLES)}",
            value=str(role)[:50],
            roles=", ".join(roles.ROLES),
        )
    classes = value.get("classes", ["*"])
    if not isinstance(classes, list) or not classes or len(classes) > 100:
        raise PolicyError("bad_grant", "a grant's classes are a list of class names or patterns")
    for pattern in classes:
        if not isinstance(pattern, str) or not CLASS_PATTERN.match(pattern):
            raise PolicyError(
                "bad_pattern", f"{str(pattern)[:80]!r} is not a class name or pattern", value=str(pattern)[:80]
            )
    verbs = value.get("verbs")
    # A grant's verbs are some of its role's powers: one beyond them would grant nothing.
    held = tuple(power for power in roles.POWERS if power in roles.powers(role))
    return Grant(
        value["to"], role, tuple(dict.fromkeys(classes)), None if verbs is None else _verbs(GRANTS, verbs, held)
    )


def _grants(value: Any) -> tuple[Grant, ...]:
    if not isinstance(value, list) or len(value) > MAX_GRANTS:
        raise PolicyError("bad_grants", f"grants must be a list of at most {MAX_GRANTS} grants", high=MAX_GRANTS)
    return tuple(_grant(item) for item in value)


_PARSERS: dict[str, Callable[[Any], Any]] = {
    STALL_THRESHOLD: lambda value: _seconds(STALL_THRESHOLD, value, STALL_BOUNDS),
    WAITING_THRESHOLD: lambda value: _seconds(WAITING_THRESHOLD, value, WAITING_BOUNDS),
    APPROVAL: _approval,
    MAX_RATE: _rate,
    REDACT: _redact,
    GRANTS: _grants,
}


def check(key: Any, value: Any) -> Any:
    """The rule *key*'s value read from its JSON *value*; PolicyError
    naming what is wrong otherwise."""
    if key not in _PARSERS:
        raise PolicyError(
            "unknown_rule",
            f"there is no policy rule {str(key)[:50]!r}: the rules are {', '.join(KEYS)}",
            rule=str(key)[:50],
            keys=", ".join(KEYS),
        )
    try:
        size = len(json.dumps(value, allow_nan=False))
    except (TypeError, ValueError):
        raise PolicyError("not_json", f"{key}'s value is not JSON", rule=key) from None
    if size > MAX_VALUE_BYTES:
        raise PolicyError(
            "too_large", f"{key}'s value is larger than {MAX_VALUE_BYTES} bytes", rule=key, high=MAX_VALUE_BYTES
        )
    return _PARSERS[key](value)


def _build(marker: int, rows: list[dict[str, Any]]) -> Policy:
    kept = {row["key"]: row for row in rows}
    read: dict[str, Any] = {}
    for key in KEYS:
        try:
            read[key] = check(key, kept[key]["value"] if key in kept else DEFAULTS[key])
        except PolicyError:
            # A row written past the checks (by hand): the default, which
            # db check reports; never a broken page.
            read[key] = check(key, DEFAULTS[key])
    return Policy(
        stall_threshold=read[STALL_THRESHOLD],
        waiting_threshold=read[WAITING_THRESHOLD],
        approval=read[APPROVAL],
        max_rate=read[MAX_RATE],
        redact=read[REDACT],
        grants=read[GRANTS],
        marker=marker,
        rows=kept,
    )


# --- reading it, kept ---------------------------------------------------------


class _Kept:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.policy: Policy | None = None
        self.checked = 0.0
        # A statement of the caller's saw the history move (seen()): the
        # next current() reads before it answers.
        self.stale = False
        # A check is out in the background (current() without a connection).
        self.checking = False
        # Its own engine, unpooled: a check behind never takes a connection
        # from the pages' pool (on a frozen server it would hold one).
        self.checker: Engine | None = None


# By database address: every engine of one database in a process shares it.
_KEPT: dict[str, _Kept] = {}
_KEPT_LOCK = threading.Lock()


def _kept(engine: Engine) -> _Kept:
    key = engine.url.render_as_string(hide_password=False)
    with _KEPT_LOCK:
        found = _KEPT.get(key)
        if found is None:
            found = _KEPT[key] = _Kept()
        return found


def read(engine: Engine) -> Policy:
    """The policy as stored now, read anew."""
    with engine.connect() as conn:
        marker, rows = policy_rows.read_all(conn)
    return _build(marker, rows)


def _check(kept: _Kept, on: Connection) -> Policy:
    """Ask on *on* whether the history moved; read the rules when it did.
    The caller holds kept.lock."""
    if kept.policy is None or kept.stale or policy_rows.marker(on) != kept.policy.marker:
        marker, rows = policy_rows.read_all(on)
        kept.policy = _build(marker, rows)
        kept.stale = False
    kept.checked = time.monotonic()
    return kept.policy


def _check_behind(engine: Engine, kept: _Kept, known: Policy) -> None:
    """The check current() did not wait for, on a connection of its own,
    holding no lock while it waits on the database. It never clears
    `stale`: a caller that saw the history move reads for itself."""
    try:
        if kept.checker is None:
            kept.checker = db.create_engine(engine.url.render_as_string(hide_password=False), poolclass=NullPool)
        with kept.checker.connect() as conn:
            marker = policy_rows.marker(conn)
            fresh = known if marker == known.marker else _build(*policy_rows.read_all(conn))
        with kept.lock:
            if kept.policy is known and not kept.stale:
                kept.policy = fresh
                kept.checked = time.monotonic()
    except Exception:  # noqa: BLE001 - the kept policy stands; the next call asks again
        log.warning("pgbus-web: could not check the policy; the kept one stands", exc_info=True)
    finally:
        kept.checking = False


def current(engine: Engine, conn: Connection | None = None) -> Policy:
    """The policy, as this process keeps it. Checked against the history
    at most every CHECK_EVERY seconds: on *conn* when the caller holds one
    (no second connection; a command's pool has one), else in a thread
    while the kept policy answers, so a request never waits on a second
    connection for it (a frozen database costs a page one wait, not two).
    Read before answering when none is kept yet (a command's first call:
    cli/common.engine_from forgets what the process kept; an MCP tool call
    likewise), or when a statement of the caller's saw the history move
    (seen())."""
    kept = _kept(engine)
    policy = kept.policy
    if policy is not None and not kept.stale:
        if kept.checking or time.monotonic() - kept.checked < CHECK_EVERY:
            return policy
        if conn is None:
            kept.checking = True
            threading.Thread(
                target=_check_behind, args=(engine, kept, policy), name="pgbus-policy-check", daemon=True
            ).start()
            return policy
    _take(kept.lock)
    try:
        if kept.policy is not None and not kept.stale and time.monotonic() - kept.checked < CHECK_EVERY:
            return kept.policy
        with nullcontext(conn) if conn is not None else engine.connect() as on:
            return _check(kept, on)
    finally:
        kept.lock.release()


def _take(lock: threading.Lock) -> None:
    """*lock*, waited for within what is left of the caller's budget (a page
    request's one wait, bounded.waiting) and spent from it: requests that
    queue behind another's read of a frozen server answer 503 within their
    own wait, not one after the other."""
    budget = bounded.current()
    if budget is None:
        lock.acquire()
        return
    with budget.spending():
        taken = lock.acquire(timeout=max(0.0, budget.left))
    if not taken:
        raise sa_exc.TimeoutError("no time was left to wait for another request's read of the policy")


def seen(engine: Engine, marker: int) -> None:
    """The history's last id, as a statement of the caller's read it: the
    kept policy is fresh when it was read at that id (no read of its own
    until CHECK_EVERY passes again), stale otherwise (read at the next
    current() before it answers). Takes no lock: a check out in the
    background never holds up the request that calls this."""
    kept = _kept(engine)
    policy = kept.policy
    if policy is not None and policy.marker == marker:
        kept.checked = time.monotonic()
    else:
        kept.stale = True


def forget(engine: Engine | None = None) -> None:
    """Drop what this process keeps (after a change of its own, and in tests)."""
    with _KEPT_LOCK:
        if engine is None:
            _KEPT.clear()
        else:
            _KEPT.pop(engine.url.render_as_string(hide_password=False), None)


# --- changing it ----------------------------------------------------------------


class ReasonMissing(PolicyError):
    def __init__(self) -> None:
        super().__init__("reason_missing", "a policy change needs a reason")


def change(
    engine: Engine,
    key: str,
    value: Any,
    *,
    actor: str,
    reason: str | None,
    expected_version: int | None = None,
    now: datetime | None = None,
) -> dict[str, Any]:
    """Set the rule *key* to *value* (JSON; None for a rule whose value
    may not be null resets it to its default) for *actor* (the caller has
    checked they may). *expected_version*: the version the caller read
    (Policy.version_of); a rule changed since is refused with
    ChangedUnderYou. Returns the history row. The change marker moves too,
    so the pages kept with the old rules are read anew."""
    text = (reason or "").strip()
    if not text:
        raise ReasonMissing()
    # Cut as the audit trail cuts a reason (the column's CHECK).
    why = truncate(text, REASON_LIMIT)
    reset = value is None and DEFAULTS.get(key, 0) is not None
    if not reset or key not in _PARSERS:
        check(key, value)
    now = now or utcnow()
    with engine.begin() as conn:
        policy_rows.lock(conn)
        found = policy_rows.find_for_update(conn, key)
        version = int(found["version"]) if found else 0
        if expected_version is not None and int(expected_version) != version:
            raise ChangedUnderYou(key, found)
        old = found["value"] if found else None
        new = None if reset else value
        stamp = policy_rows.record(conn, key=key, old=old, new=new, actor=actor, reason=why, now=now)
        if reset:
            policy_rows.delete(conn, key)
        else:
            policy_rows.put(conn, key=key, value=value, version=stamp, actor=actor, reason=why, now=now)
        changes.mark(conn)
    forget(engine)
    return {
        "id": stamp,
        "key": key,
        "old_value": old,
        "new_value": new,
        "actor": actor,
        "reason": why,
        "changed_at": now,
    }


def stored_problems(engine: Engine) -> list[tuple[str, str]]:
    """Each stored rule the checks refuse (written past them, by hand or by
    an older release), as (rule, what is wrong): processes read its default
    meanwhile; `db check` reports it."""
    with engine.connect() as conn:
        _, rows = policy_rows.read_all(conn)
    found = []
    for row in rows:
        try:
            check(row["key"], row["value"])
        except PolicyError as problem:
            found.append((row["key"], str(problem)))
    return found


def history(engine: Engine, *, key: str | None = None, limit: int = 100) -> list[dict[str, Any]]:
    with engine.connect() as conn:
        return policy_rows.history(conn, key=key, limit=limit)
