"""Times the runtime reads: now, and the ``at`` an operator gives."""

from __future__ import annotations

from datetime import UTC, datetime

from .errors import InvalidTime


def utcnow() -> datetime:
    return datetime.now(UTC)


def parse_future(value: datetime | str | None, *, now: datetime, workflow_id: str | None = None) -> datetime:
    """*value* (an aware datetime, or an ISO 8601 string with a zone) as an
    aware datetime strictly after *now*; InvalidTime otherwise. A time
    without a zone is refused rather than guessed: the operator's zone and
    the server's may differ."""
    if value is None or (isinstance(value, str) and not value.strip()):
        raise InvalidTime(value, InvalidTime.MISSING, workflow_id=workflow_id)
    if isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value.strip())
        except ValueError:
            raise InvalidTime(value, InvalidTime.UNPARSEABLE, workflow_id=workflow_id) from None
    elif isinstance(value, datetime):
        parsed = value
    else:
        raise InvalidTime(value, InvalidTime.UNPARSEABLE, workflow_id=workflow_id)
    if parsed.tzinfo is None or parsed.utcoffset() is None:
        raise InvalidTime(value, InvalidTime.NAIVE, workflow_id=workflow_id)
    if parsed <= now:
        raise InvalidTime(value, InvalidTime.PAST, workflow_id=workflow_id)
    return parsed.astimezone(UTC)
