"""The sentence every door says once an act other than a verb or a signal
went through (those are done.py's): an operation started, cancelled,
paused, let go on, approved or paced; a session ended or a token revoked;
a policy rule changed; values revealed; a lock released, a message
discarded, orphaned locks reaped. The pages' message, the API's
``message``, the command line's line: one text each."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...i18n import t, tn
from ...rules import states


def operation_created(operation: Mapping[str, Any]) -> str:
    """What its creation says: started, or waiting for a second operator."""
    if operation.get("status") == states.OPERATION_AWAITING_APPROVAL:
        return t("pgbus.operations.awaiting", operation_id=operation["id"])
    return t("pgbus.operations.started", operation_id=operation["id"])


def operation_created_all(operation: Mapping[str, Any]) -> set[str]:
    """Every sentence its creation may have said."""
    return {
        t("pgbus.operations.awaiting", operation_id=operation["id"]),
        t("pgbus.operations.started", operation_id=operation["id"]),
    }


def operation_cancelled(operation: Mapping[str, Any]) -> str:
    return t("pgbus.operations.cancelled", operation_id=operation["id"])


def operation_paused(operation: Mapping[str, Any]) -> str:
    return t("pgbus.operations.paused", operation_id=operation["id"])


def operation_resumed(operation: Mapping[str, Any]) -> str:
    return t("pgbus.operations.resumed", operation_id=operation["id"])


def operation_approved(operation: Mapping[str, Any]) -> str:
    return t("pgbus.operations.approved", operation_id=operation["id"])


def operation_paced(operation: Mapping[str, Any]) -> str:
    return t("pgbus.operations.pace_set", operation_id=operation["id"])


def session_ended(name: str) -> str:
    return t("pgbus.sessions.ended", name=name)


def sessions_ended(name: str) -> str:
    """Every session of *name* ended."""
    return t("pgbus.sessions.ended_all", name=name)


def token_revoked(name: str) -> str:
    return t("pgbus.sessions.token_revoked", name=name)


def policy_changed(rule: str) -> str:
    return t("pgbus.policy.changed", rule=rule)


def revealed() -> str:
    return t("pgbus.workflows.reveal.done")


def redraw_failed() -> str:
    """Said beside an act's sentence when the page after it could not be drawn."""
    return t("pgbus.workflows.forms.redraw_failed")


def lock_released(lock_key: str) -> str:
    return t("pgbus.locks.results.released", lock_key=lock_key)


def message_discarded(msg_id: int, queue: str, *, lock_released: bool) -> str:
    """Message *msg_id* deleted from *queue*; whether its lock went with it
    (it stays when it had moved on to a retry or another job)."""
    key = "pgbus.locks.results.discarded" if lock_released else "pgbus.locks.results.discarded_kept"
    return t(key, msg_id=msg_id, queue=queue)


def locks_reaped(released: int, kept: int) -> str:
    """Orphaned locks released, and those that moved on meanwhile and stay."""
    message = tn("pgbus.locks.results.reaped", released)
    if kept:
        message += " " + tn("pgbus.locks.results.reap_kept", kept)
    return message
