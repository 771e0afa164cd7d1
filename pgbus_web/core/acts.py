"""What the command line (cli/runs.py) and the MCP server (mcp/server.py)
read and do, without Flask: the pages' own context builders and verbs,
shaped by core/representations.py, so these doors answer what the pages show.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy.engine import Engine

from ..rules import run_filters, verb_table
from ..runtime import operation_record, verbs
from ..runtime.clock import utcnow
from ..runtime.errors import (
    InvalidPayload,
    InvalidSignalName,
    InvalidTime,
    UnknownStep,
    UnknownVerb,
    WorkflowError,
)
from . import checks, page_reads, permissions
from . import compare as comparing
from . import representations as rep
from . import reveal as revealing
from .settings import Settings
from .words import done

# Refusals that are the caller's input, not the run's state (exit code 2).
BAD_INPUT = (InvalidTime, InvalidPayload, InvalidSignalName, UnknownStep, UnknownVerb)
# The verbs a caller names with a reason (signal has its own fields).
REASONED = tuple(verb.name for verb in verb_table.TABLE if verb_table.REASON in verb.fields)


class NotFound(LookupError):
    """No run has this workflow_id."""


@dataclass
class Page:
    runs: list[dict[str, Any]]
    next_before: int | None


def _stuck(engine: Engine, now: datetime) -> Callable[[Mapping[str, Any]], str | None]:
    kept = page_reads.policy_of(engine)

    def stuck(run: Mapping[str, Any]) -> str | None:
        return rep.stuck_reason(
            run, now=now, stall_threshold=kept.stall_threshold, waiting_threshold=kept.waiting_threshold
        )

    return stuck


def filters_from(values: Mapping[str, Any]) -> run_filters.RunFilters:
    """The index's filters from named values, the cursors allowed (None is
    not given); run_filters.FilterError names the first bad one: an
    unknown name or an empty value is refused, never read as no filter."""
    return run_filters.parse_strict(values, cursors=True)


def runs(engine: Engine, settings: Settings, filters: run_filters.RunFilters) -> Page:
    """One page of the index (settings.page_size runs), newest first."""
    now = utcnow()
    with engine.connect() as conn:
        page = page_reads.index_runs(conn, settings, filters, now)
    stuck = _stuck(engine, now)
    return Page([rep.run_row(run, stuck=stuck(run)) for run in page["runs"]], page["pagination"].older)


def run(engine: Engine, settings: Settings, workflow_id: str, *, row: dict[str, Any] | None = None) -> dict[str, Any]:
    """One run as its page shows it (representations.run_detail)."""
    now = utcnow()
    if not page_reads.storable(workflow_id):
        raise NotFound(workflow_id)
    with engine.connect() as conn:
        try:
            page = page_reads.run_context(conn, settings, workflow_id, now=now, run=row)
        except page_reads.NotFound:
            raise NotFound(workflow_id) from None
    return rep.run_detail(page, stuck=_stuck(engine, now)(page["run"]))


def reveal(
    engine: Engine, settings: Settings, workflow_id: str, *, principal: permissions.Principal, reason: str | None = None
) -> dict[str, Any]:
    """One run with the values the policy redacts in clear, for a principal
    who may reveal them on its class, after the audit line is written
    (core/reveal.py); NotFound, or permissions.NotPermitted (nothing written)."""
    now = utcnow()
    if not page_reads.storable(workflow_id):
        raise NotFound(workflow_id)
    try:
        page = revealing.reveal(engine, settings, workflow_id, principal=principal, reason=reason, now=now)
    except page_reads.NotFound:
        raise NotFound(workflow_id) from None
    return rep.run_detail(page, stuck=_stuck(engine, now)(page["run"]))


def compare_runs(engine: Engine, settings: Settings, a_id: str, b_id: str) -> dict[str, Any]:
    """Two runs compared (core/compare.py), as representations.comparison
    shapes it; compare.CompareRefused for what the comparison refuses."""
    a_id, b_id = comparing.parse({"a": [a_id], "b": [b_id]})
    with engine.connect() as conn:
        return rep.comparison(comparing.compare(conn, settings, a_id, b_id))


def attention(engine: Engine, settings: Settings) -> list[dict[str, Any]]:
    """The needs-attention groups, biggest first."""
    with engine.connect() as conn:
        page = page_reads.index_context(conn, settings, None, parts=("attention",))
    return [
        rep.attention_group(group, page_reads.definition_of(settings, group["workflow_class"]) is not None)
        for group in page["attention_groups"]
    ]


def permit_class(engine: Engine, principal: permissions.Principal, verb: str, workflow_class: str) -> None:
    """NotPermitted when *principal* may not use *verb* on runs of
    *workflow_class* (for a door that has read the run already)."""
    permissions.require(principal, verb, workflow_class, page_reads.policy_of(engine))


def permit_run(engine: Engine, principal: permissions.Principal, verb: str, workflow_id: str) -> None:
    """NotPermitted when *principal* may not use *verb* on the run's class
    (a run's class never changes, so it is read before the verb's own
    transaction). A run that is not there is the verb's to refuse."""
    row = _stored(engine, workflow_id)
    if row is not None:
        permissions.require(principal, verb, row["workflow_class"], page_reads.policy_of(engine))


def _stored(engine: Engine, workflow_id: str) -> Mapping[str, Any] | None:
    """The run's row as it is now (None: there is none)."""
    if not page_reads.storable(workflow_id):
        return None
    with engine.connect() as conn:
        return page_reads.find_run(conn, workflow_id)


def act(
    engine: Engine,
    settings: Settings,
    verb: str,
    workflow_id: str,
    *,
    principal: permissions.Principal,
    reason: str | None,
    at: str | None = None,
    from_step: str | None = None,
) -> dict[str, Any]:
    """*verb* on one run, as its page's button does; the run after it.
    The reason is required (these doors have no form to show it was
    forgotten). Raises checks.FormError for the input (the pages' checks)
    and the runtime's WorkflowError (RunNotFound, WrongStatus, ...)."""
    return act_said(
        engine, settings, verb, workflow_id, principal=principal, reason=reason, at=at, from_step=from_step
    )[0]


def act_said(
    engine: Engine,
    settings: Settings,
    verb: str,
    workflow_id: str,
    *,
    principal: permissions.Principal,
    reason: str | None,
    at: str | None = None,
    from_step: str | None = None,
) -> tuple[dict[str, Any], str]:
    """act(), and the sentence every door says once the verb went through
    (words/done.py: the pages' message, the API's)."""
    if verb not in checks.VERB_FIELDS:
        raise UnknownVerb(str(verb)[:50])
    checks.workflow_id(workflow_id)
    form = checks.as_form(reason=reason, at=at, from_step=from_step)
    options = checks.parse_verb(verb, form, tz=UTC, now=utcnow())
    checks.require_reason(form)
    before = _stored(engine, workflow_id)
    if before is not None:
        permissions.require(principal, verb, before["workflow_class"], page_reads.policy_of(engine))
    row = verbs.perform(
        engine, verb, workflow_id, actor=principal.actor, registry=settings.registry, **options.options()
    )
    return run(engine, settings, workflow_id, row=row), done.verb_done(verb, before or {}, row, options.at)


def send_signal(
    engine: Engine,
    settings: Settings,
    workflow_id: str,
    name: str,
    payload: Any,
    *,
    principal: permissions.Principal,
    idempotency_key: str | None = None,
    reason: str | None = None,
    require_reason: bool = False,
) -> dict[str, Any]:
    """Signal *name* to one run; its signal, whether it was a duplicate, and
    the run after it. *reason* goes on its audit event (*require_reason*:
    the door asks for one). Raises checks.FormError for the input."""
    return signal_said(
        engine,
        settings,
        workflow_id,
        name,
        payload,
        principal=principal,
        idempotency_key=idempotency_key,
        reason=reason,
        require_reason=require_reason,
    )[0]


def signal_said(
    engine: Engine,
    settings: Settings,
    workflow_id: str,
    name: str,
    payload: Any,
    *,
    principal: permissions.Principal,
    idempotency_key: str | None = None,
    reason: str | None = None,
    require_reason: bool = False,
) -> tuple[dict[str, Any], str]:
    """send_signal(), and the sentence every door says once it went
    through (words/done.py)."""
    checks.workflow_id(workflow_id)
    signal = checks.parse_signal(checks.as_form(name=name, payload=payload, idempotency_key=idempotency_key))
    form = checks.as_form(reason=reason)
    checked = checks.require_reason(form) if require_reason else checks.reason(form)
    permit_run(engine, principal, verb_table.SIGNAL, workflow_id)
    result = verbs.signal(
        engine, workflow_id, signal.name, signal.payload, signal.idempotency_key, actor=principal.actor, reason=checked
    )
    answer = {
        "signal": rep.signal(result.signal),
        "duplicate": result.duplicate,
        "run": run(engine, settings, workflow_id),
    }
    return answer, done.signal_done(result, signal.name, signal.idempotency_key)[0]


def operation_input(
    verb: str, filters: Mapping[str, Any], *, reason: str | None, require_reason: bool, now: datetime, **fields: Any
) -> tuple[run_filters.RunFilters, checks.OperationForm]:
    """An operation as a structured door was given it (the verb, its
    filters, the reason and the verb's fields: at, from_step, name,
    payload), read by the checks the pages' operation form goes through;
    FilterError or checks.FormError names what is wrong. A time is never
    proposed here: nobody saw a default to confirm it."""
    found = run_filters.parse_strict(filters or {})
    form = checks.as_form(verb=verb, reason=reason, confirmed=True, **fields)
    parsed = checks.parse_operation(form, tz=UTC, now=now, verbs=operation_record.VERBS)
    if require_reason:
        checks.require_reason(form)
    return found, parsed


__all__ = [
    "BAD_INPUT",
    "REASONED",
    "NotFound",
    "Page",
    "WorkflowError",
    "act",
    "attention",
    "filters_from",
    "operation_input",
    "run",
    "runs",
    "send_signal",
]
