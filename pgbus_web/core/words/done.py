"""The sentence every door says once a verb or a signal went through: the
pages' message, the API's ``message``, the command line's line."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from ...i18n import current_locale, current_timezone, t
from ...rules import states
from . import timefmt


def verb_done(verb: str, before: Mapping[str, Any], after: Mapping[str, Any], at: datetime | None = None) -> str:
    """What became of the run: *before* and *after* are its row either side
    of the verb; *at* the time a timed verb was given."""
    step_before = before.get("current_step") or timefmt.NONE
    step_after = after.get("current_step") or timefmt.NONE
    when = timefmt.absolute(at, locale=current_locale(), tz=current_timezone()) if at else timefmt.NONE
    if verb == "resume":
        if after.get("status") == states.COMPLETED:
            return t("pgbus.workflows.forms.done.resume_finished")
        return t("pgbus.workflows.forms.done.resume", step=step_after)
    if verb == "resume_at":
        return t("pgbus.workflows.forms.done.resume_at", step=step_after, time=when)
    if verb == "run_now":
        return t("pgbus.workflows.forms.done.run_now", step=step_after)
    if verb == "skip":
        if after.get("status") == states.COMPLETED:
            return t("pgbus.workflows.forms.done.skip_finished", step=step_before)
        return t("pgbus.workflows.forms.done.skip", step=step_before, next=step_after)
    if verb == "rerun":
        return t("pgbus.workflows.forms.done.rerun", step=step_after)
    if verb == "cancel":
        return t("pgbus.workflows.forms.done.cancel")
    if verb == "pause":
        return t("pgbus.workflows.forms.done.pause")
    return t("pgbus.workflows.forms.done.reschedule", step=step_after, time=when)


# The tone of a signal's sentence: a repeated idempotency key stored nothing.
OK, WARN = "ok", "warn"


def signal_done(result: Any, name: str, idempotency_key: str | None) -> tuple[str, str]:
    """The sentence and its tone once signal *name* was sent (*result*: the
    runtime's SignalResult)."""
    if result.duplicate:
        return t("pgbus.workflows.forms.done.signal_duplicate", idempotency_key=idempotency_key or ""), WARN
    if result.signal.get("status") == states.SIGNAL_CLAIMED:
        step = (result.run or {}).get("current_step") or timefmt.NONE
        return t("pgbus.workflows.forms.done.signal_claimed", name=name, step=step), OK
    return t("pgbus.workflows.forms.done.signal", name=name), OK
