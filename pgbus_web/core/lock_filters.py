"""The Locks page's view, read from and written back to the query string so
that every view is a link: ``state``, ``queue`` and the keyset cursor
``after_at`` + ``after_key`` (the last lock of the previous page). A value
that cannot be right is reported (the runs index's FilterError), never
silently dropped."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from ..i18n import t
from ..locks import STATES
from ..models.uniqueness_keys import Cursor
from ..models.values import Infinite
from ..rules import run_filters as filters
from ..rules.run_filters import FilterError

# Longest queue name a filter accepts: PGMQ's own limit is far below.
MAX_QUEUE = 200
# Longest lock key a form or a cursor may carry.
MAX_KEY = 2_000
# The keyset cursor's parameters: both or neither.
CURSOR = ("after_at", "after_key")


@dataclass(frozen=True)
class LockFilters:
    state: str | None = None
    queue: str | None = None
    after: Cursor | None = None

    @property
    def active(self) -> bool:
        return self.state is not None or self.queue is not None

    def query(self, **changes: Any) -> dict[str, str]:
        """The query parameters of this view with *changes* (None drops
        one). Changing a filter starts again at the first page."""
        values: dict[str, Any] = {"state": self.state, "queue": self.queue}
        if self.after is not None:
            values["after_at"] = self.after.created_at.astimezone(UTC).isoformat()
            values["after_key"] = self.after.lock_key
        if set(changes) & {"state", "queue"}:
            values.update(after_at=None, after_key=None)
        values.update(changes)
        return {name: str(value) for name, value in values.items() if value not in (None, "")}

    def next_query(self, cursor: Cursor) -> dict[str, str]:
        return self.query(after_at=cursor.created_at.astimezone(UTC).isoformat(), after_key=cursor.lock_key)


def text(args: Mapping[str, str], name: str, limit: int) -> str | None:
    """A parameter as typed (queue names and lock keys keep their spaces)."""
    return filters.text(args, name, limit, strip=False)


def _cursor(args: Mapping[str, str]) -> Cursor | None:
    raw_at = text(args, "after_at", 64)
    key = text(args, "after_key", MAX_KEY)
    if raw_at is None and key is None:
        return None
    if raw_at is None or key is None:
        missing = "after_at" if raw_at is None else "after_key"
        raise FilterError(t("pgbus.workflows.filters.errors.cursor", name=missing, value=""))
    if raw_at.strip() in ("infinity", "-infinity"):
        # The page after a lock stamped at ±infinity (models.values).
        return Cursor(created_at=Infinite.of(1 if raw_at.strip() == "infinity" else -1), lock_key=key)
    try:
        moment = datetime.fromisoformat(raw_at.strip())
    except ValueError:
        raise FilterError(t("pgbus.workflows.filters.errors.cursor", name="after_at", value=raw_at)) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    try:
        moment = moment.astimezone(UTC)
    except OverflowError:  # year 1 or 9999 moved past the calendar's edge
        raise FilterError(t("pgbus.workflows.filters.errors.cursor", name="after_at", value=raw_at)) from None
    return Cursor(created_at=moment, lock_key=key)


def parse(args: Mapping[str, str]) -> LockFilters:
    """The view a query string asks for; FilterError names the first bad value."""
    state = text(args, "state", 32)
    if state is not None and state not in STATES:
        raise FilterError(
            t("pgbus.workflows.filters.errors.choice", name="state", value=state, allowed=", ".join(STATES))
        )
    return LockFilters(state=state, queue=text(args, "queue", MAX_QUEUE), after=_cursor(args))
