"""The runtime's own stored words, said again in the operator's language.

The sweep stores English sentences with ISO times in a step's
error_message ("in progress since 2026-11-29T15:00:09.051272+00:00, longer
than the stall threshold of 600s"), and ISO times and seconds in audit
details. They are data, kept as written; the pages read them back: a
sentence the runtime writes is re-said from the catalog with its moments
and durations through the time formatter (timefmt), and anything else is
shown as stored.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from markupsafe import Markup, escape

from ...core.words import timefmt
from ...i18n import t_html

# The sweep's sentences (runtime/system.py), anchored whole: a message that
# only looks like one is shown as stored.
_STALLED = re.compile(r"in progress since (?P<since>\S+), longer than the stall threshold of (?P<seconds>\d{1,12})s")
_TIMED_OUT = re.compile(r"waited for (?P<what>.{1,500}) since (?P<since>\S+); the wait timed out at (?P<at>\S+)")

# An ISO 8601 moment as the runtime stores it in details (flow.iso).
_ISO = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d(:\d\d(\.\d{1,6})?)?(Z|[+-]\d\d:\d\d)?")


def moment(text: Any) -> datetime | None:
    """*text* as a datetime when it is an ISO 8601 moment, else None."""
    if not isinstance(text, str) or not _ISO.fullmatch(text.strip()):
        return None
    try:
        return datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        return None


def _clock_tag(at: datetime, *, now: datetime, locale, tz) -> Markup:
    # "since 3:05:07 PM" reads in every language where "since 5 minutes
    # ago" does not: the wall clock, the full moment in the title.
    return Markup('<time datetime="{}" title="{}">{}</time>').format(
        timefmt.iso(at),
        timefmt.absolute(at, locale=locale, tz=tz),
        timefmt.clock(at, now=now, locale=locale, tz=tz, seconds=True),
    )


def error_message(message: str | None, *, now: datetime, locale=None, tz=None) -> Markup:
    """A step's stored error message: the sweep's sentences in the
    operator's language with formatted times, anything else as stored."""
    if not message:
        return Markup("")
    stalled = _STALLED.fullmatch(message)
    if stalled and (since := moment(stalled["since"])):
        return t_html(
            "pgbus.workflows.errors.stalled_html",
            since=_clock_tag(since, now=now, locale=locale, tz=tz),
            threshold=timefmt.duration(int(stalled["seconds"])),
        )
    timed_out = _TIMED_OUT.fullmatch(message)
    if timed_out and (since := moment(timed_out["since"])) and (at := moment(timed_out["at"])):
        return t_html(
            "pgbus.workflows.errors.wait_timed_out_html",
            what=Markup("<code>{}</code>").format(timed_out["what"]),
            since=_clock_tag(since, now=now, locale=locale, tz=tz),
            at=_clock_tag(at, now=now, locale=locale, tz=tz),
        )
    return Markup(escape(message))


def detail_value(key: Any, value: Any, *, now: datetime, locale=None, tz=None) -> Markup | None:
    """An audit detail's value through the time formatter when it is a
    moment (an ISO string) or a span in seconds (a key ending in
    ``_seconds``); None for any other value (shown as stored JSON)."""
    at = moment(value)
    if at is not None:
        return timefmt.exact_tag(at, now=now, locale=locale, tz=tz)
    if (
        isinstance(key, str)
        and key.endswith("_seconds")
        and isinstance(value, (int, float))
        and not isinstance(value, bool)
    ):
        return Markup(escape(timefmt.duration(value)))
    return None
