"""The policy's redaction rules at every door (docs/redaction.md): what a
run's arguments, its signals' payloads and its steps' results show, the
Reveal that shows them in clear, and the refusal of a search by a value
the rules hide.

Every door reads a run through the core (reads.run_context, compare,
exports), and those redact before they hand a value on: a door never sees
the value unless it asked ``reveal`` (core/reveal.py), which checks the
principal's reveal power on the run's class and writes the audit line
first (record_reveal). The rules themselves (their grammar, the walk) are
rules/redaction.py.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, overload

from sqlalchemy.engine import Connection, Engine

from ..i18n import t
from ..models import events, workflow_rows
from ..rules import redaction, roles, run_filters
from ..runtime.clock import utcnow
from . import permissions
from . import policy as policy_rules

# The audit trail's event for a Reveal (rules/states.EVENTS).
REVEALED = "revealed"


def rules_of(source: Connection | Engine) -> tuple[redaction.Rule, ...]:
    """The policy's redaction rules. A page's read is kept under the
    change marker (web/answering/page_cache.py), which carries the policy's
    last change (worker_reads.poll_markers) and made the kept policy fresh
    as of that statement: a read made with older rules is never shown
    after a change that added one."""
    if isinstance(source, Connection):
        return policy_rules.current(source.engine, source).redact
    return policy_rules.current(source).redact


def texts(rules: Iterable[redaction.Rule]) -> list[str]:
    """The rules as the policy writes them (``card_number``, ``*.email``)."""
    return [rule.text for rule in rules]


# --- redacting what a run shows ----------------------------------------------


def _field(row: dict[str, Any] | None, name: str, rules: tuple[redaction.Rule, ...]) -> bool:
    """Redact row[name] in place; True when a value was hidden."""
    if row is None or row.get(name) is None:
        return False
    value = row[name]
    hidden = redaction.redact(value, rules)
    if hidden == value:
        return False
    row[name] = hidden
    return True


def run_row(run: dict[str, Any] | None, rules: tuple[redaction.Rule, ...]) -> bool:
    """The run's arguments (and its latest step's result, when it carries
    one) redacted in place; True when something was hidden."""
    if not rules or run is None:
        return False
    hidden = _field(run, "arguments", rules)
    return _field(run.get("step"), "result", rules) or hidden


def run_page(page: Mapping[str, Any], rules: tuple[redaction.Rule, ...]) -> bool:
    """A run page's context (reads.run_context) redacted in place: the
    run's arguments, every attempt's result wherever the context holds one
    (the attempts shown, each step's latest, the steps signals name) and
    every signal's payload. The rows are this read's own, so changing them
    in place changes every view of them at once. True when anything was
    hidden."""
    if not rules:
        return False
    hidden = run_row(page["run"], rules)
    attempts = list(page.get("steps") or ())
    attempts += [group["latest"] for group in page.get("step_groups") or () if group.get("latest")]
    attempts += list((page.get("steps_by_id") or {}).values())
    for row in attempts:
        hidden = _field(row, "result", rules) or hidden
    for row in page.get("signals") or ():
        hidden = _field(row, "payload", rules) or hidden
    return hidden


# --- Reveal ----------------------------------------------------------------------


def may_reveal(
    principal: permissions.Principal | None, workflow_class: str | None, policy: policy_rules.Policy
) -> bool:
    """May *principal* see the values the policy redacts on runs of
    *workflow_class* (None: of every class)? No principal: no."""
    return principal is not None and permissions.may(principal, roles.REVEAL, workflow_class, policy)


def record_reveal(
    engine: Engine, principal: permissions.Principal, workflow_id: str, *, reason: str | None = None
) -> dict[str, Any]:
    """Check that *principal* may reveal the run's values and write the
    audit line saying they did (before anything is shown). The run's row;
    LookupError when there is none, permissions.NotPermitted (nothing
    written) when they may not."""
    with engine.begin() as conn:
        policy = policy_rules.current(engine, conn)
        # A NUL no stored id holds: no run, not a failing query.
        run = workflow_rows.find(conn, workflow_id) if "\x00" not in workflow_id else None
        if run is None:
            raise LookupError(workflow_id)
        permissions.require(principal, roles.REVEAL, run["workflow_class"], policy)
        events.record(
            conn,
            workflow_id=run["workflow_id"],
            event=REVEALED,
            actor=principal.actor,
            reason=(reason or "").strip() or None,
            details={"rules": texts(policy.redact)},
            created_at=utcnow(),
        )
    return run


# --- searching by a redacted value -------------------------------------------------


class SearchRefused(run_filters.FilterError):
    """A search by a value the policy redacts, asked by a principal who may
    not reveal it: refused with a sentence, never answered with an empty
    list (which would tell them what the value is not). ``name`` is the
    filter as given (``arg.card_number``, ``q``)."""

    def __init__(self, name: str) -> None:
        self.name = name
        super().__init__(t("pgbus.workflows.filters.errors.redacted", name=name[: run_filters.NAME_SHOWN]))


def _keys(path: str) -> tuple[str, ...]:
    # The array marks ("lines[]") are not part of the value's path.
    return tuple(key[:-2] if key.endswith("[]") else key for key in path.split("."))


def searched_paths(filters: run_filters.RunFilters) -> list[tuple[str, tuple[str, ...]]]:
    """Each search inside JSON the filters ask: (the filter's name, the
    path's keys): the ``arg.`` and ``signal.`` filters and the search
    box's ``path:value`` form."""
    found = [(match.name, _keys(match.path)) for match in filters.arguments + filters.signals]
    if filters.q and run_filters.q_argument_documents(filters.q):
        path = run_filters.q_argument_path(filters.q)
        if path is not None:
            found.append(("q", _keys(path)))
    return found


def refused_search(
    filters: run_filters.RunFilters | None, principal: permissions.Principal | None, policy: policy_rules.Policy
) -> str | None:
    """The first filter of *filters* (its name) that searches by a value
    the policy redacts, when *principal* may not reveal it on the filter's
    class (on every class when the filter names none); None when all may
    be asked."""
    if filters is None or not policy.redact:
        return None
    for name, keys in searched_paths(filters):
        if redaction.names(policy.redact, keys) and not may_reveal(principal, filters.workflow_class, policy):
            return name
    return None


@overload
def check_search(
    filters: run_filters.RunFilters, principal: permissions.Principal | None, policy: policy_rules.Policy
) -> run_filters.RunFilters: ...
@overload
def check_search(
    filters: run_filters.RunFilters | None, principal: permissions.Principal | None, policy: policy_rules.Policy
) -> run_filters.RunFilters | None: ...
def check_search(
    filters: run_filters.RunFilters | None, principal: permissions.Principal | None, policy: policy_rules.Policy
) -> run_filters.RunFilters | None:
    """*filters*, when *principal* may ask them; SearchRefused (a
    FilterError: 400, exit 2) naming the first that may not be."""
    name = refused_search(filters, principal, policy)
    if name is not None:
        raise SearchRefused(name)
    return filters


def require_search(
    filters: run_filters.RunFilters, principal: permissions.Principal, policy: policy_rules.Policy
) -> None:
    """check_search for an operation's filters, refused as the operation's
    other permissions are (permissions.NotPermitted for the reveal power,
    403): its preview would count the runs holding the value."""
    if refused_search(filters, principal, policy) is not None:
        raise permissions.NotPermitted(principal, roles.REVEAL, filters.workflow_class)
