"""The Model Context Protocol server (``pgbus-web mcp``, docs/mcp.md): the
dashboard's reads and verbs as MCP tools over stdio, with the official
``mcp`` SDK (the ``mcp`` extra).

Read tools: the needs-attention groups, runs by the index's filters, one
run, two runs compared, the export of a filter (bounded: one answer holds
it), an operation's preview and an operation. With ``allow_actions`` also:
a verb on one run, a signal, starting an operation (one verb on every run a
filter matches, done here before the tool answers) and cancelling one.
Every act is recorded with the server's principal (``mcp:<token name>``
for the token it was given, ``mcp:break-glass`` without one) and the
reason the tool requires, under the policy like every other door.
Answers are core/representations.py's shapes; a refusal is a tool
error (``isError``) whose text says why, and writes nothing. The arguments
go through the pages' own checks (core/checks.py), and a refused input
reads as the refusal table's sentence (core/problems.py); an argument a
tool does not take is refused, not ignored.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import time
from typing import Any

from sqlalchemy.engine import Engine

from ..core import acts as scripted
from ..core import (
    checks,
    exports,
    operation_acts,
    operation_reads,
    operation_runs,
    page_reads,
    permissions,
    policy,
    problems,
    redacting,
    tokens,
    worker_reads,
)
from ..core import representations as rep
from ..core.compare import CompareRefused
from ..core.settings import Settings
from ..rules import run_filters, states
from ..runtime import errors, operation_record
from ..runtime.clock import utcnow

NAME = "pgbus-web"
# Runs find_runs lists at most.
MAX_RUNS = 200
# An operation started here is done here; waiting on another process's
# chunk is polled at this interval, for at most OPERATION_WAIT seconds.
POLL = 0.5
OPERATION_WAIT = 600.0


def _tool_error(message: str):
    from mcp.server.mcpserver.exceptions import ToolError

    return ToolError(message)


def _refused(problem: Exception, **names):
    """*problem* as a tool error: a refused input in the refusal table's
    words (the pages' and the API's), anything else as the runtime says it."""
    if isinstance(
        problem,
        (
            checks.FormError,
            run_filters.FilterError,
            operation_record.OperationNotFound,
            CompareRefused,
            permissions.NotPermitted,
            operation_record.OperationError,
            errors.AttemptsUsedUp,
        ),
    ) or problems.is_input(problem):
        return _tool_error(problems.refusal(problem, **names).message)
    return _tool_error(str(problem))


def _require(reason: str | None) -> str:
    try:
        return checks.require_reason(checks.as_form(reason=reason))
    except checks.FormError as problem:
        raise _refused(problem) from None


def _typed(value: Any) -> Any:
    """A search value as the filter's text: JSON's spelling for a number,
    true, false or null, so 42 and true read as a query string's would."""
    return value if isinstance(value, str) else json.dumps(value)


def _filters(values: dict[str, Any], *, cursors: bool = False) -> run_filters.RunFilters:
    try:
        if not isinstance(values, dict):
            raise run_filters.FilterError(problems.wrong_type("filters", "object").message)
        return run_filters.parse_strict(values, cursors=cursors)
    except run_filters.FilterError as problem:
        raise _refused(problem) from None


def _operation_id(value: Any) -> int:
    try:
        return checks.operation_id(value)
    except operation_record.OperationNotFound as problem:
        raise _refused(problem) from None


class Tools:
    """The tools' bodies, over one engine and the settings (registry, thresholds)."""

    def __init__(self, engine: Engine, settings: Settings, principal: permissions.Principal | None = None) -> None:
        self.engine = engine
        self.settings = settings
        # Who the server acts as: its token's principal, else break-glass.
        self.principal = principal or permissions.break_glass(permissions.MCP)

    # --- reads -------------------------------------------------------------

    def needs_attention(self) -> dict[str, Any]:
        """The runs that need a person, grouped by workflow class, step, stuck
        reason and error class, biggest group first. Each group's `filters`
        lists its runs with find_runs, and `actions` names the verbs an
        operation may do on it."""
        return {"groups": scripted.attention(self.engine, self.settings)}

    def find_runs(
        self,
        q: str | None = None,
        workflow_class: str | None = None,
        status: str | None = None,
        reason: str | None = None,
        step: str | None = None,
        subject: str | None = None,
        error_class: str | None = None,
        no_error_class: bool = False,
        since: str | None = None,
        before: int | None = None,
        limit: int = 50,
        arguments: dict[str, Any] | None = None,
        signal_payload: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Runs matching the dashboard index's filters, newest first: status
        (pending, ready, running, waiting, paused, completed, failed,
        cancelled), reason (stalled, paused_error, paused_manual, overdue,
        waiting_overdue), since (1h, 24h, 7d, 30d), subject ("TYPE" or "TYPE ID");
        q searches: a run id or its shown prefix (4+ characters), 6+
        characters from anywhere in a run id (where the database has
        pg_trgm), an idempotency key, a subject in any case, or a
        subject's id alone.
        `arguments` searches inside the run's arguments, {path: value}
        with a dotted path ({"customer.id": 42}; "tags[]" for an array
        holding the value); `signal_payload` the same inside any signal's
        payload. `next_before` pages to older runs."""
        json_filters = {f"{run_filters.ARG_PREFIX}{path}": _typed(value) for path, value in (arguments or {}).items()}
        json_filters.update(
            {f"{run_filters.SIGNAL_PREFIX}{path}": _typed(value) for path, value in (signal_payload or {}).items()}
        )
        filters = _filters(
            {
                **json_filters,
                "q": q,
                "workflow_class": workflow_class,
                "status": status,
                "reason": reason,
                "step": step,
                "subject": subject,
                "error_class": error_class,
                "no_error_class": run_filters.NO_ERROR_CLASS if no_error_class else None,
                "since": since,
                "before": before,
            },
            cursors=True,
        )
        settings = dataclasses.replace(self.settings, page_size=max(1, min(int(limit), MAX_RUNS)))
        page = scripted.runs(self.engine, settings, self._searchable(filters))
        return {"runs": page.runs, "next_before": page.next_before}

    def compare_runs(self, a: str, b: str) -> dict[str, Any]:
        """Two runs side by side, by their ids (or shown prefixes): the
        arguments as a structural diff (`arguments.changes`, each path
        changed, added or removed), the steps in one order with each side's
        attempts, durations and errors, the first step where they part
        (`divergence`), each run's definition digest and whether it changed
        between them (`definition_changed`)."""
        try:
            return scripted.compare_runs(self.engine, self.settings, a, b)
        except CompareRefused as problem:
            raise _refused(problem) from None

    def export_runs(
        self, format: str, filters: dict[str, Any] | None = None, limit: int = exports.EXCERPT_ROWS
    ) -> dict[str, Any]:
        """The runs `filters` match (find_runs' filters by their query
        names: "arg.customer_id": 42 searches inside the arguments,
        "signal.carrier": "dhl" inside a signal's payload), oldest first,
        as the dashboard's export writes them: `format` csv (a header row of
        stable column keys; a cell a spreadsheet would run as a formula
        starts with an apostrophe) or ndjson. One answer holds at most
        `limit` runs (1000 at most, and about a million characters):
        `complete` says whether `content` is every run up to `ceiling_id`;
        for the whole set use the command line (pgbus-web runs export) or
        GET /api/v1/runs/export, which stream it."""
        if isinstance(filters, dict):
            filters = {
                name: _typed(value) if str(name).startswith(run_filters.JSON_PREFIXES) else value
                for name, value in filters.items()
            }
        found = self._searchable(_filters({} if filters is None else filters, cursors=True))
        try:
            made = exports.excerpt(self.engine.connect, self.settings, found, format, rows=limit)
        except run_filters.FilterError as problem:
            raise _refused(problem) from None
        return {
            "filename": made.filename,
            "content_type": made.content_type,
            "ceiling_id": made.ceiling_id,
            "runs": made.rows,
            "complete": made.complete,
            "content": made.text,
        }

    def list_workers(self) -> dict[str, Any]:
        """Workers and serving processes with their heartbeat, alive first:
        state alive, gone (silent past the dashboard's worker_gone_after;
        `holding` counts the steps in progress it left, which the
        dashboard's index lists with the filter worker=<id>) or stopped;
        then each PGMQ queue's depth and the age of its oldest message."""
        return worker_reads.listing(self.engine, self.settings)

    def show_run(self, workflow_id: str, reveal: bool = False, reason: str | None = None) -> dict[str, Any]:
        """One run: its steps with every attempt, signals, audit events, the
        verbs it allows now (`available_actions`) and what resume would do.
        Values the dashboard's policy redacts read "[redacted]" (`redacted`
        says so); `reveal` true shows them in clear when this server's
        principal may reveal on the run's class, and writes an audit line on
        the run saying so (with `reason`)."""
        try:
            if reveal:
                return scripted.reveal(self.engine, self.settings, workflow_id, principal=self.principal, reason=reason)
            return scripted.run(self.engine, self.settings, workflow_id)
        except permissions.NotPermitted as problem:
            raise _refused(problem, workflow_id=workflow_id) from None
        except scripted.NotFound:
            raise _tool_error(problems.run_not_found(workflow_id).message) from None

    def _searchable(self, filters: run_filters.RunFilters) -> run_filters.RunFilters:
        """*filters*, unless they search by a value the policy redacts and
        this server's principal may not reveal it: a tool error saying so."""
        try:
            return redacting.check_search(filters, self.principal, page_reads.policy_of(self.engine))
        except run_filters.FilterError as problem:
            raise _refused(problem) from None

    def preview_operation(
        self,
        verb: str,
        filters: dict[str, str],
        at: str | None = None,
        from_step: str | None = None,
        signal_name: str | None = None,
        payload: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """What an operation doing `verb` on every run `filters` matches (the
        find_runs filters, or a needs-attention group's `filters`) would do
        now: how many runs, which it fits and skips, a sample. Changes nothing.
        For verb signal, `signal_name` and a JSON object `payload`."""
        found, parsed = self._input(
            verb, filters, None, False, at=at, from_step=from_step, name=signal_name, payload=payload
        )
        try:
            shown = operation_acts.preview(
                self.engine, self.settings, self.principal, found, parsed.verb, parsed.params
            )
        except (errors.WorkflowError, operation_record.OperationError, permissions.NotPermitted) as problem:
            raise _refused(problem, verb=verb) from None
        return rep.preview(shown)

    def show_operation(self, operation_id: int) -> dict[str, Any]:
        """An operation: its verb, filters, status and how many runs it moved,
        skipped and refused, and what became of those runs (`outcome`: by
        status and stuck reason, and by the step that was stuck)."""
        operation_id = _operation_id(operation_id)
        try:
            operation = operation_record.find(self.engine, operation_id)
        except operation_record.OperationNotFound as problem:
            raise _refused(problem) from None
        found = operation_reads.with_outcome(self.engine, self.settings, operation_id, utcnow())
        shown = {"operation": rep.operation(operation)}
        if found is not None:
            shown["outcome"] = rep.operation_outcome(found[1], operation_id)
        return shown

    # --- acts --------------------------------------------------------------

    def act_on_run(
        self, workflow_id: str, verb: str, reason: str, at: str | None = None, from_step: str | None = None
    ) -> dict[str, Any]:
        """Do `verb` (one of the run's `available_actions` but signal:
        resume, resume_at, run_now, reschedule, skip, pause, cancel, rerun) on
        one run, as the dashboard's button does. `at` (ISO 8601 with a zone,
        in the future) for resume_at and reschedule; `from_step` for rerun.
        `reason` is required. Answers the run as it is after."""
        reason = _require(reason)
        if verb not in scripted.REASONED:
            raise _refused(errors.UnknownVerb(verb)) from None
        try:
            return scripted.act(
                self.engine,
                self.settings,
                verb,
                workflow_id,
                principal=self.principal,
                reason=reason,
                at=at,
                from_step=from_step,
            )
        except (checks.FormError, errors.WorkflowError, permissions.NotPermitted) as problem:
            raise _refused(problem, verb=verb, workflow_id=workflow_id) from None

    def send_signal(
        self,
        workflow_id: str,
        name: str,
        reason: str,
        payload: dict[str, Any] | None = None,
        idempotency_key: str | None = None,
    ) -> dict[str, Any]:
        """Send signal `name` with a JSON object `payload` to one ongoing run;
        a step waiting for it becomes due. `reason` is required and goes on
        the signal's audit event, with its name and key."""
        reason = _require(reason)
        try:
            return scripted.send_signal(
                self.engine,
                self.settings,
                workflow_id,
                name,
                {} if payload is None else payload,
                principal=self.principal,
                idempotency_key=idempotency_key,
                reason=reason,
                require_reason=True,
            )
        except (checks.FormError, errors.WorkflowError, permissions.NotPermitted) as problem:
            raise _refused(problem, verb="signal", workflow_id=workflow_id) from None

    def start_operation(
        self,
        verb: str,
        filters: dict[str, str],
        reason: str,
        expected_runs: int,
        at: str | None = None,
        from_step: str | None = None,
        signal_name: str | None = None,
        payload: dict[str, Any] | None = None,
        rate: float | None = None,
        max_in_flight: int | None = None,
    ) -> dict[str, Any]:
        """Do `verb` on every run `filters` matches, as a tracked operation,
        and answer when it is done. `expected_runs` is the `total` that
        preview_operation showed: if the filter matches another count now,
        nothing starts and the answer says so. `reason` is required.
        `rate` (runs per second) and `max_in_flight` pace it; over the
        policy's approval threshold it waits for another principal's
        approval and the answer says awaiting_approval."""
        found, parsed = self._input(
            verb,
            filters,
            reason,
            True,
            at=at,
            from_step=from_step,
            name=signal_name,
            payload=payload,
            rate=rate,
            max_in_flight=max_in_flight,
        )
        try:
            operation = operation_acts.start(
                self.engine,
                self.settings,
                self.principal,
                found,
                parsed.verb,
                parsed.params,
                reason=parsed.reason,
                expected=int(expected_runs),
                **parsed.pace,
            )
        except (errors.WorkflowError, operation_record.OperationError, permissions.NotPermitted) as problem:
            raise _refused(problem, verb=verb) from None
        if operation["status"] == states.OPERATION_AWAITING_APPROVAL:
            return {"operation": rep.operation(operation)}
        return {"operation": rep.operation(self._finish(operation["id"]))}

    def cancel_operation(self, operation_id: int, reason: str) -> dict[str, Any]:
        """Stop a queued or running operation: the runs it already acted on
        stay as they are. `reason` is kept on the operation with who cancelled it."""
        reason = _require(reason)
        operation_id = _operation_id(operation_id)
        try:
            return {
                "operation": rep.operation(
                    operation_acts.cancel(self.engine, self.principal, operation_id, reason=reason)
                )
            }
        except (operation_record.OperationError, permissions.NotPermitted) as problem:
            raise _refused(problem) from None

    # --- helpers -------------------------------------------------------------

    def _input(self, verb: str, filters: dict[str, Any], reason: str | None, require_reason: bool, **fields: Any):
        """The operation's filters and form, by the pages' checks."""
        _filters(filters)  # the filters' own refusal first, as the API's body reads them
        try:
            return scripted.operation_input(
                verb, filters, reason=reason, require_reason=require_reason, now=utcnow(), **fields
            )
        except (checks.FormError, run_filters.FilterError) as problem:
            raise _refused(problem, verb=verb) from None

    def _finish(self, operation_id: int) -> dict[str, Any]:
        return operation_runs.run_to_end(
            self.engine, self.settings.registry, operation_id, poll=POLL, deadline=time.monotonic() + OPERATION_WAIT
        )


READ_TOOLS = (
    "needs_attention",
    "find_runs",
    "show_run",
    "preview_operation",
    "show_operation",
    "list_workers",
    "compare_runs",
    "export_runs",
)
ACT_TOOLS = ("act_on_run", "send_signal", "start_operation", "cancel_operation")


# Each tool's argument names, from its signature.
ARGUMENTS = {name: tuple(inspect.signature(getattr(Tools, name)).parameters)[1:] for name in READ_TOOLS + ACT_TOOLS}


def unknown_argument(tool: str, arguments: dict[str, Any]) -> str | None:
    """The sentence refusing an argument *tool* does not take (None: all
    known). The SDK's argument model ignores extra names: a misspelled
    `reasn` would leave a required reason unsaid, a misspelled filter
    would widen a find."""
    known = ARGUMENTS.get(tool)
    if known is None:
        return None
    for name in arguments:
        if name not in known:
            return problems.unknown_field(str(name), known).message
    return None


def token_refused(engine: Engine, token: str) -> str | None:
    """Why the server's token no longer answers (revoked or expired since
    the server started), or None: a server runs for hours, and a token
    an admin revoked must not act on through it."""
    if tokens.check(engine, token) is not None:
        return None
    return problems.token_refused(tokens.refused(engine, token)).message


def build(
    engine: Engine,
    settings: Settings,
    *,
    allow_actions: bool = False,
    principal: permissions.Principal | None = None,
    token: str | None = None,
):
    """The MCPServer with the read tools, and the acting ones when allowed.
    *token*: the one *principal* was proven by, asked again at every call."""
    from mcp.server.mcpserver import MCPServer
    from mcp_types import ToolAnnotations

    class Server(MCPServer):
        async def call_tool(self, name, arguments, context=None):
            refused = unknown_argument(name, arguments or {})
            if refused is None and token is not None:
                refused = token_refused(engine, token)
            if refused is not None:
                raise _tool_error(refused)
            # A tool call is rare and slow beside a page: it reads the policy
            # as it is now, not as this process last kept it.
            policy.forget(engine)
            return await super().call_tool(name, arguments, context)

    tools = Tools(engine, settings, principal)
    server = Server(
        NAME,
        instructions=(
            "pgbus workflow runs: needs_attention lists what needs a person; find_runs and show_run read runs; "
            "compare_runs puts two side by side; export_runs gives a filter's runs as CSV or NDJSON. "
            + (
                "act_on_run, send_signal and start_operation act, with a required reason, as this server's principal "
                f"({tools.principal.actor}), under the dashboard's policy."
                if allow_actions
                else "Read-only: started without --allow-actions."
            )
        ),
    )
    for name in READ_TOOLS:
        server.add_tool(
            getattr(tools, name), name=name, annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False)
        )
    if allow_actions:
        for name in ACT_TOOLS:
            server.add_tool(
                getattr(tools, name),
                name=name,
                annotations=ToolAnnotations(read_only_hint=False, destructive_hint=True, open_world_hint=False),
            )
    return server
