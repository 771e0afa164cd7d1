"""The COPY text format of the demo's rows: text escaped once, a value as
JSON text, NULL, and a run's moments as timestamps (demo/stories.py
builds the rows with them)."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

_COPY_ESCAPES = str.maketrans({"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"})


def _copy_safe(text: str) -> str:
    """*text* as it may stand in COPY's text format. The rows are built
    from these constants, numbers, names and timestamps only, so nothing is
    escaped row by row."""
    return text.translate(_COPY_ESCAPES)


def _json(value: Any) -> str:
    if value is True:
        return "true"
    if value is False:
        return "false"
    return str(value)


NULL = "\\N"  # COPY's text format for NULL
_EPOCH = datetime(1970, 1, 1)
_MICROSECOND = timedelta(microseconds=1)


def _microseconds(seconds: float) -> int:
    """timedelta(seconds=*seconds*) in whole microseconds, rounded exactly
    as CPython's timedelta rounds a float (the whole seconds exactly, the
    fraction to the nearest microsecond, a tie to the even total), without
    making the object."""
    whole = int(seconds)
    micro = (seconds - whole) * 1e6
    micro_whole = int(micro)
    left = micro - micro_whole
    total = whole * 1_000_000 + micro_whole
    if left > 0.5 or (left == 0.5 and total & 1):
        total += 1
    elif left < -0.5 or (left == -0.5 and total & 1):
        total -= 1
    return total


# "YYYY-MM-DDTHH:MM:" per minute since the epoch, as datetime.isoformat
# writes it; the moments of a seed fall in a few tens of thousands of them.
_MINUTES: dict[int, str] = {}


def _minute_text(minute: int) -> str:
    text = _MINUTES[minute] = (_EPOCH + timedelta(minutes=minute)).isoformat()[:17]
    return text


class _Moments(dict):
    """One run's moments (relative seconds) as COPY text, each formatted
    once: naive UTC from the run's *start*, as the writing transaction runs
    in UTC; None is NULL. Looked up by subscript, so a moment seen before
    costs no Python call. The text is (start + timedelta(seconds=moment))
    .isoformat() to the character, built from whole microseconds and a
    per-minute prefix instead of two objects and a format per moment."""

    def __init__(self, start: datetime):
        super().__init__()
        self.start = (start - _EPOCH) // _MICROSECOND
        self[None] = NULL

    def __missing__(self, value: float) -> str:
        seconds, micro = divmod(self.start + _microseconds(value), 1_000_000)
        minute, second = divmod(seconds, 60)
        prefix = _MINUTES.get(minute) or _minute_text(minute)
        text = self[value] = f"{prefix}{second:02d}.{micro:06d}" if micro else f"{prefix}{second:02d}"
        return text
