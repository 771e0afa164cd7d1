"""The audit trail's detail keys in the operator's words: "Attempts" and
"Versuche" rather than ``attempts``. The keys are those the runtime and
the operations write (runtime/verbs.py, runtime/system.py); a key this
version does not know is shown as stored."""

from __future__ import annotations

from typing import Any

from ...i18n import t

PREFIX = "pgbus.workflows.audit.details."
DETAIL_KEYS = (
    "action",
    "at",
    "attempts",
    "batch_id",
    "cancelled_steps",
    "completed_jobs",
    "definition_digest",
    "description",
    "discarded_jobs",
    "error_class",
    "error_message",
    "failed_jobs",
    "from_step",
    "idempotency_key",
    "operation_id",
    "outcome",
    "run_status",
    "signal",
    "signal_id",
    "started_at",
    "status",
    "step",
    "step_status",
    "timeout_at",
    "total_jobs",
    "wait_for",
    "was",
)


def detail_label(key: Any) -> str:
    """*key*'s label in the operator's language; an unknown key as it is."""
    if isinstance(key, str) and key in DETAIL_KEYS:
        return t(PREFIX + key)
    return str(key)
