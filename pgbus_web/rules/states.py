"""The names every part of pgbus-web agrees on: run, step and signal statuses,
stuck reasons, event names and the error classes the sweep writes.

The strings are the ones pgbus stores, so a database written by pgbus itself
reads the same here.
"""

# Run statuses.
READY = "ready"
RUNNING = "running"
WAITING = "waiting"
PAUSED = "paused"
COMPLETED = "completed"
FAILED = "failed"
CANCELLED = "cancelled"

ONGOING = (READY, RUNNING, WAITING, PAUSED)
TERMINAL = (COMPLETED, FAILED, CANCELLED)
RUN = ONGOING + TERMINAL

# Step statuses (one row per attempt).
STEP_SCHEDULED = "scheduled"
STEP_WAITING = "waiting"
STEP_IN_PROGRESS = "in_progress"
STEP_COMPLETED = "completed"
STEP_FAILED = "failed"
STEP_CANCELLED = "cancelled"
STEP_SKIPPED = "skipped"

STEP = (
    STEP_SCHEDULED,
    STEP_WAITING,
    STEP_IN_PROGRESS,
    STEP_COMPLETED,
    STEP_FAILED,
    STEP_CANCELLED,
    STEP_SKIPPED,
)
# A step row that may still change.
STEP_OPEN = (STEP_SCHEDULED, STEP_WAITING, STEP_IN_PROGRESS)

# Signal statuses.
SIGNAL_PENDING = "pending"
SIGNAL_CLAIMED = "claimed"
SIGNAL_CONSUMED = "consumed"
SIGNAL = (SIGNAL_PENDING, SIGNAL_CLAIMED, SIGNAL_CONSUMED)

# Why an ongoing run needs a person (models.workflow_attention.stuck_reason_counts).
STALLED = "stalled"
PAUSED_ERROR = "paused_error"
PAUSED_MANUAL = "paused_manual"
OVERDUE = "overdue"
WAITING_OVERDUE = "waiting_overdue"
STUCK_REASONS = (STALLED, PAUSED_ERROR, PAUSED_MANUAL, OVERDUE, WAITING_OVERDUE)

# Error classes the sweep writes; the stuck-reason SQL matches the first.
STEP_STALLED_ERROR = "Pgbus::Workflow::StepStalled"
WAIT_TIMED_OUT_ERROR = "Pgbus::Workflow::WaitTimedOut"

# The audit trail's event names, as pgbus's WorkflowEvent::EVENTS.
EVENTS = (
    "started",
    "step_scheduled",
    "step_started",
    "step_completed",
    "step_failed",
    "step_skipped",
    "step_reattempted",
    "paused",
    "resumed",
    "cancelled",
    "finished",
    "run_now",
    "rescheduled",
    "rerun",
    "stall_detected",
    "late_completion_ignored",
    "signal_received",
    "signal_claimed",
    "step_waiting",
    "wait_timed_out",
    "fan_out_opened",
    "fan_out_finished",
    # Not pgbus's: a principal saw the values the policy redacts (docs/redaction.md).
    "revealed",
)

# Actors that are not a person.
SYSTEM_ACTOR = "system"
APP_ACTOR = "app"

# Batch statuses (pgbus_batches.status).
BATCH_PROCESSING = "processing"
BATCH_FINISHED = "finished"

# A uniqueness lock's state as an operator sees it (locks/__init__ says
# what each means).
LOCK_LIVE = "live"
LOCK_GONE = "gone"
LOCK_PARKED = "parked"
LOCK_FRESH = "fresh"
LOCK_ORPHAN = "orphan"
LOCK_STATES = (LOCK_LIVE, LOCK_GONE, LOCK_PARKED, LOCK_FRESH, LOCK_ORPHAN)

# An operation's status (one verb on every run a filter matches).
OPERATION_QUEUED = "queued"
OPERATION_RUNNING = "running"
OPERATION_DONE = "done"
OPERATION_CANCELLED = "cancelled"
OPERATION_FAILED = "failed"
# Held by a person: never claimed until one resumes or approves it.
OPERATION_PAUSED = "paused"
OPERATION_AWAITING_APPROVAL = "awaiting_approval"
OPERATION = (
    OPERATION_AWAITING_APPROVAL,
    OPERATION_QUEUED,
    OPERATION_RUNNING,
    OPERATION_PAUSED,
    OPERATION_DONE,
    OPERATION_CANCELLED,
    OPERATION_FAILED,
)
# Worked on (claimed, or waiting to be).
OPERATION_OPEN = (OPERATION_QUEUED, OPERATION_RUNNING)
OPERATION_HELD = (OPERATION_PAUSED, OPERATION_AWAITING_APPROVAL)
# What cancel stops: every status that has not ended.
OPERATION_UNFINISHED = OPERATION_OPEN + OPERATION_HELD
