"""The one time formatter: every moment and every duration on the pages.

A moment is shown as ``<time datetime="ISO-UTC" title="absolute">relative</time>``:
the relative text ("5 minutes ago", "in 2 hours") is what an operator
scans, the title is the exact moment in the viewer's zone with the zone
written out (what they debug with), and ``datetime`` is the UTC value a
script or a test can read. Due times and deadlines add the wall clock
("in 2 hours (3:05 PM)"), because "in 2 hours" alone hides when that is.

``now``, the locale and the time zone are arguments, never read from a
clock or a request here, so the same input always gives the same text.
Naive datetimes are taken as UTC (every connection runs in UTC).

A moment stored at ``infinity`` or ``-infinity`` (``models.values.Infinite``)
has no relative text, wall clock or duration: it is written as its literal,
and ``time_tag`` marks it as an unusual value (``unusual.py``). A duration with
an infinite end is the dash.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import UTC, date, datetime, timedelta, tzinfo
from functools import lru_cache
from typing import Any, cast
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from babel import Locale, UnknownLocaleError
from babel import dates as babel_dates
from markupsafe import Markup, escape

from ... import i18n
from ...i18n import current_locale, t, tn
from ...models.values import Infinite
from . import unusual as odd

# What a missing moment or duration shows: a dash, not a word.
NONE = "—"

# Below this many seconds either way, a moment is "just now".
JUST_NOW_SECONDS = 10

# Relative text: the unit is the largest that fits, counted whole (floor):
# 5 min 59 s ago reads "5 minutes ago". Months and years are spans of 30
# and 365 days, precise enough for "how long ago".
_RELATIVE_UNITS = (
    ("years", 365 * 86400),
    ("months", 30 * 86400),
    ("days", 86400),
    ("hours", 3600),
    ("minutes", 60),
    ("seconds", 1),
)

# Durations: two units at most ("1h 5m", "2d 3h"); below one second, ms.
_DURATION_UNITS = (("days", 86400), ("hours", 3600), ("minutes", 60), ("seconds", 1))

TimeZoneArg = str | tzinfo | None
LocaleArg = str | Locale | None


@lru_cache(maxsize=64)
def _zone_named(name: str) -> tzinfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError) as exc:
        raise ValueError(f"unknown time zone {name!r}") from exc


def zone(tz: TimeZoneArg) -> tzinfo:
    """*tz* as a tzinfo: a zone name ("Europe/Copenhagen"), a tzinfo, or
    None for UTC. An unknown name raises ValueError."""
    if tz is None:
        return UTC
    if isinstance(tz, tzinfo):
        return tz
    return _zone_named(str(tz))


@lru_cache(maxsize=32)
def _locale_named(name: str) -> Locale:
    try:
        return Locale.parse(name.replace("-", "_"))
    except (UnknownLocaleError, ValueError) as exc:
        raise ValueError(f"unknown locale {name!r}") from exc


def locale_of(locale: LocaleArg) -> Locale:
    """*locale* as a Babel Locale ("en", "pt", a Locale, or None for en)."""
    if locale is None:
        return _locale_named("en")
    if isinstance(locale, Locale):
        return locale
    return _locale_named(str(locale))


def utc(moment: datetime) -> datetime:
    """*moment* in UTC; a naive datetime is taken to be UTC already."""
    if moment.tzinfo is None:
        return moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC)


def in_zone(moment: datetime, tz: tzinfo) -> datetime:
    """*moment* on the wall clock of *tz*; in UTC when that clock would be
    past year 9999 or before year 1 (a time stored at the calendar's edge
    still shows, rather than failing the page)."""
    try:
        return utc(moment).astimezone(tz)
    except OverflowError:
        return utc(moment)


def iso(moment: datetime) -> str:
    """The moment as ISO 8601 in UTC, to the second: ``2026-01-05T14:05:03Z``."""
    return utc(moment).replace(microsecond=0).isoformat().replace("+00:00", "Z")


# "5 minutes ago" per (locale, unit, count, past): a page writes the same
# few dozen of them many times.
_relative_texts: dict[tuple[str, str, int, bool], str] = {}
_RELATIVE_TEXTS_MAX = 4096
i18n.on_reload(_relative_texts.clear)


# While something drawn once is to be shown again later (a block drawn for
# every viewer alike, web/answering/page_cache.py), the moments it wrote
# relative to now: what a formatted moment shows depends on now only
# through relative() and the viewer's date, so the drawing stands as long
# as each of these reads the same words and the date is the same.
_noted: ContextVar[list[datetime] | None] = ContextVar("pgbus_web_noted_moments", default=None)


@contextmanager
def noting_moments() -> Iterator[list[datetime]]:
    """The list of every moment given to relative() inside the block."""
    noted: list[datetime] = []
    token = _noted.set(noted)
    try:
        yield noted
    finally:
        _noted.reset(token)


def relative(moment: datetime, *, now: datetime) -> str:
    """ "just now", "5 minutes ago", "in 2 hours" (plural forms from the catalog)."""
    noted = _noted.get()
    if noted is not None:
        noted.append(moment)
    if isinstance(moment, Infinite):
        return moment.literal
    seconds = (utc(now) - utc(moment)).total_seconds()
    span = abs(seconds)
    if span < JUST_NOW_SECONDS:
        return t("pgbus.time.now")
    unit, size, _larger = _unit_of(span)
    count = int(span // size)
    key = (current_locale(), unit, count, seconds > 0)
    text = _relative_texts.get(key)
    if text is None:
        text = tn(f"pgbus.time.{unit}_ago" if seconds > 0 else f"pgbus.time.in_{unit}", count)
        if len(_relative_texts) >= _RELATIVE_TEXTS_MAX:
            _relative_texts.clear()
        _relative_texts[key] = text
    return text


def _unit_of(span: float) -> tuple[str, float, float]:
    """The largest of relative()'s units that *span* seconds hold at least
    once: its name, its size and the size of the next larger unit."""
    larger = float("inf")
    for unit, size in _RELATIVE_UNITS:
        if span >= size:
            return unit, size, larger
        larger = size
    unit, size = _RELATIVE_UNITS[-1]
    return unit, size, larger


# The first and last moments a clock can read: a window without ends.
ALWAYS = (datetime.min.replace(tzinfo=UTC), datetime.max.replace(tzinfo=UTC))
# A window's edges are drawn in by this much, so that a moment on an edge,
# rounded otherwise by relative()'s floating seconds, is not inside it.
_EDGE = timedelta(milliseconds=1)


def same_words(moment: datetime, *, now: datetime) -> tuple[datetime, datetime]:
    """The moments between which (both included) a clock reads *moment* as
    relative() reads it at *now*: "5 minutes ago" from 5 minutes after it
    until 6, "just now" from 10 seconds before until 10 seconds after. The
    counterpart of relative(), kept beside it."""
    if isinstance(moment, Infinite):
        return ALWAYS
    at = utc(moment)
    seconds = (utc(now) - at).total_seconds()
    span = abs(seconds)
    low: float
    high: float
    if span < JUST_NOW_SECONDS:
        low, high = -JUST_NOW_SECONDS, JUST_NOW_SECONDS
    else:
        _unit, size, larger = _unit_of(span)
        count = int(span // size)
        # The same words while the span is in [count, count + 1) units and
        # no larger unit fits.
        near, far = count * size, min((count + 1) * size, larger)
        low, high = (near, far) if seconds > 0 else (-far, -near)
    try:
        return at + timedelta(seconds=low) + _EDGE, at + timedelta(seconds=high) - _EDGE
    except OverflowError:  # a moment at the calendar's edge: these words only now
        return utc(now), utc(now)


def _hour_minute_skeleton(loc: Locale) -> str:
    # Babel has no "j" (the locale's preferred hour cycle) skeleton field:
    # read the cycle from the locale's own short time pattern.
    return "hm" if "h" in loc.time_formats["short"].pattern else "Hm"


@lru_cache(maxsize=256)
def _skeleton_format(loc: Locale, skeleton: str) -> str:
    # babel_dates.format_skeleton's pattern lookup (fuzzy match, parse),
    # done once per (locale, skeleton) rather than per moment.
    if skeleton not in loc.datetime_skeletons:
        skeleton = babel_dates.match_skeleton(skeleton, loc.datetime_skeletons) or skeleton
    # Babel annotates DateTimePattern.format as a DateTimeFormat; parse_pattern makes it the %-format text.
    return cast(str, babel_dates.parse_pattern(loc.datetime_skeletons[skeleton]).format)


def _format_skeleton(skeleton: str, local: datetime, loc: Locale) -> str:
    """babel_dates.format_skeleton(skeleton, local, locale=loc) for an aware
    *local*, with the pattern from _skeleton_format."""
    return _skeleton_format(loc, skeleton) % babel_dates.DateTimeFormat(local, loc)


def _join_date_time(loc: Locale, date_text: str, time_text: str) -> str:
    # The locale's glue between a date and a time ("{1}, {0}" in English).
    return str(loc.datetime_formats["short"]).format(time_text, date_text)


# How many moments' texts each cache below keeps before starting afresh.
_MOMENT_TEXTS_MAX = 20_000
# Wall clocks per (moment, locale, zone, seconds, the viewer's day): the
# timeline's bars and a page's moments are drawn again on every refresh.
_clock_texts: dict[tuple[Any, ...], str] = {}


def clock(
    moment: datetime,
    *,
    now: datetime,
    locale: LocaleArg = None,
    tz: TimeZoneArg = None,
    seconds: bool = False,
) -> str:
    """The wall-clock time in *tz*: "3:05 PM" on the same day as *now*, with
    the date on another day ("Jan 6, 3:05 PM"), and the year in another year;
    with *seconds*, "3:05:07 PM"."""
    if isinstance(moment, Infinite):
        return moment.literal
    loc, zone_info = locale_of(locale), zone(tz)
    today = in_zone(now, zone_info).date()
    key = (moment, loc, zone_info, seconds, today)
    text = _clock_texts.get(key)
    if text is None:
        local = in_zone(moment, zone_info)
        skeleton = _hour_minute_skeleton(loc) + ("s" if seconds else "")
        text = _format_skeleton(skeleton, local, loc)
        if local.date() != today:
            date_skeleton = "MMMd" if local.year == today.year else "yMMMd"
            text = _join_date_time(loc, _format_skeleton(date_skeleton, local, loc), text)
        if len(_clock_texts) >= _MOMENT_TEXTS_MAX:
            _clock_texts.clear()
        _clock_texts[key] = text
    return text


def short_time(moment: datetime, *, locale: LocaleArg = None, tz: TimeZoneArg = None, seconds: bool = False) -> str:
    """The time of day in *tz*, as the locale writes it: "3:05 PM", "15:05"."""
    if isinstance(moment, Infinite):
        return moment.literal
    loc = locale_of(locale)
    skeleton = _hour_minute_skeleton(loc) + ("s" if seconds else "")
    return _format_skeleton(skeleton, in_zone(moment, zone(tz)), loc)


def short_date(moment: datetime, *, locale: LocaleArg = None, tz: TimeZoneArg = None) -> str:
    """The day in *tz*, without the year: "Jan 6", "6. Jan."."""
    if isinstance(moment, Infinite):
        return moment.literal
    return _format_skeleton("MMMd", in_zone(moment, zone(tz)), locale_of(locale))


def short_date_time(
    moment: datetime, *, locale: LocaleArg = None, tz: TimeZoneArg = None, seconds: bool = False
) -> str:
    """The day and the time in *tz*, glued as the locale does: "Jan 6, 3:05 PM"."""
    if isinstance(moment, Infinite):
        return moment.literal
    loc = locale_of(locale)
    return _join_date_time(
        loc, short_date(moment, locale=loc, tz=tz), short_time(moment, locale=loc, tz=tz, seconds=seconds)
    )


# Field letters of a zone in a CLDR pattern (z, zzzz, v, V, O, Z, X, x).
_ZONE_FIELDS = frozenset("zvVOZXx")
# Zone texts per (locale, zone, offset, dst, abbreviation): Babel's zone
# naming is the slow part of a moment's title and a page names few zones.
_zone_texts: dict[tuple[Any, ...], dict[str, str]] = {}
_ZONE_TEXTS_MAX = 1024
# Date texts per (locale, day): a page's moments fall on a few days.
_date_texts: dict[tuple[Locale, date], str] = {}
_DATE_TEXTS_MAX = 4096


class _Fields(babel_dates.DateTimeFormat):
    """Babel's field formatter, with the zone's fields from _zone_texts."""

    def __init__(self, value: datetime, locale: Locale, zone_texts: dict[str, str]) -> None:
        self.value, self.locale, self.reference_date = value, locale, None
        self.zone_texts = zone_texts

    def __getitem__(self, name: str) -> str:
        text = self.zone_texts.get(name)
        return text if text is not None else super().__getitem__(name)


@lru_cache(maxsize=32)
def _long_formats(loc: Locale) -> tuple[str, str, str, tuple[str, ...]]:
    """(glue, date pattern, time pattern, zone fields) of the locale's "long"
    date-time, as babel_dates.format_datetime(..., "long") joins them."""
    date_pattern = babel_dates.parse_pattern(loc.date_formats["long"].pattern)
    time_pattern = babel_dates.parse_pattern(loc.time_formats["long"].pattern)
    glue = str(loc.datetime_formats["long"]).replace("'", "")
    fields = tuple(
        value
        for kind, value in babel_dates.tokenize_pattern(time_pattern.pattern)
        if kind == "field" and value[0] in _ZONE_FIELDS
    )
    # Babel annotates DateTimePattern.format as a DateTimeFormat; parse_pattern makes it the %-format text.
    date_format, time_format = cast(str, date_pattern.format), cast(str, time_pattern.format)
    return glue, date_format, time_format, tuple(f"{c * n}" for c, n in cast(tuple[tuple[str, int], ...], fields))


def _zone_fields(loc: Locale, local: datetime, names: tuple[str, ...]) -> dict[str, str]:
    key = (loc, local.tzinfo, local.utcoffset(), local.dst(), local.tzname())
    texts = _zone_texts.get(key)
    if texts is None:
        # As format_time gives them: on the wall-clock time, with its date.
        reference = babel_dates.DateTimeFormat(local.timetz(), loc, reference_date=local.date())
        texts = {name: reference[name] for name in names}
        if len(_zone_texts) >= _ZONE_TEXTS_MAX:
            _zone_texts.clear()
        _zone_texts[key] = texts
    return texts


def absolute(moment: datetime, *, locale: LocaleArg = None, tz: TimeZoneArg = None) -> str:
    """The exact moment in *tz*, to the second, the zone written out:
    "January 5, 2026, 3:05:03 PM CET" (Babel's "long" date-time, its
    patterns parsed and its zone named once, not per moment)."""
    if isinstance(moment, Infinite):
        return moment.literal
    local = in_zone(moment, zone(tz))
    loc = locale_of(locale)
    glue, date_format, time_format, zone_names = _long_formats(loc)
    fields = _Fields(local, loc, _zone_fields(loc, local, zone_names))
    day = (loc, local.date())
    date_text = _date_texts.get(day)
    if date_text is None:
        if len(_date_texts) >= _DATE_TEXTS_MAX:
            _date_texts.clear()
        date_text = _date_texts[day] = date_format % fields
    return glue.replace("{0}", str(time_format % fields)).replace("{1}", date_text)


# A moment's ISO text and long title per (moment, locale, zone): a page's
# rows are drawn again on every refresh and by every viewer in the same
# zone, and Babel's formatting is most of a moment's cost. (Its wall clock
# is clock()'s, remembered there.) Cleared whole when full, as above.
_stamps: dict[tuple[datetime, Locale, tzinfo], tuple[str, str]] = {}


def stamp(moment: datetime, loc: Locale, zone_info: tzinfo) -> tuple[str, str]:
    """(iso, absolute) of a finite *moment*, remembered."""
    key = (moment, loc, zone_info)
    texts = _stamps.get(key)
    if texts is None:
        texts = (iso(moment), absolute(moment, locale=loc, tz=zone_info))
        if len(_stamps) >= _MOMENT_TEXTS_MAX:
            _stamps.clear()
        _stamps[key] = texts
    return texts


# Whole <time> tags per (moment, kind, locale, zone, the viewer's day, the
# language and relative words now): a run page has about 80 of them, drawn
# again on every refresh. The relative words are worked out first (a few
# dictionary reads) and are part of the key, so the tag changes with them.
_tags: dict[tuple[Any, ...], Markup] = {}
i18n.on_reload(_tags.clear)


def _remembered_tag(
    moment: datetime, kind: str, loc: Locale, zone_info: tzinfo, now: datetime, text: str, draw: Callable[[], Markup]
) -> Markup:
    key = (moment, kind, loc, zone_info, in_zone(now, zone_info).date(), current_locale(), text)
    tag = _tags.get(key)
    if tag is None:
        tag = draw()
        if len(_tags) >= _MOMENT_TEXTS_MAX:
            _tags.clear()
        _tags[key] = tag
    return tag


def time_tag(
    moment: datetime | None,
    *,
    now: datetime,
    locale: LocaleArg = None,
    tz: TimeZoneArg = None,
    clock: bool = False,
) -> Markup:
    """A ``<time>`` element: the relative text ("5 minutes ago"), with
    *clock* followed by the wall clock ("in 2 hours (3:05 PM)", for due
    times and deadlines); the absolute moment as title, ISO UTC as
    datetime. None gives the dash, an infinite moment its literal, marked."""
    if moment is None:
        return Markup(NONE)
    if isinstance(moment, Infinite):
        return odd.moment(moment)
    loc, zone_info = locale_of(locale), zone(tz)
    text = relative(moment, now=now)

    def draw() -> Markup:
        when, title = stamp(moment, loc, zone_info)
        shown = text
        if clock:
            shown = t("pgbus.time.with_clock", relative=text, clock=_clock(moment, now=now, locale=loc, tz=zone_info))
        # Joined by hand rather than Markup.format: a page has hundreds of these.
        return Markup(f'<time datetime="{escape(when)}" title="{escape(title)}">{escape(shown)}</time>')

    return _remembered_tag(moment, "clock" if clock else "relative", loc, zone_info, now, text, draw)


# time_tag's keyword shadows the function inside it.
_clock = clock


def exact_tag(
    moment: datetime | None,
    *,
    now: datetime,
    locale: LocaleArg = None,
    tz: TimeZoneArg = None,
) -> Markup:
    """time_tag with the exact moment written out, not only in the title
    (which needs a mouse): "5 minutes ago (3:05:07 PM)", the date added on
    another day. The zone is named once on the page (the top bar), and in
    the title. None gives the dash, an infinite moment its literal."""
    if moment is None or isinstance(moment, Infinite):
        return time_tag(moment, now=now, locale=locale, tz=tz)
    loc, zone_info = locale_of(locale), zone(tz)
    text = relative(moment, now=now)

    def draw() -> Markup:
        when, title = stamp(moment, loc, zone_info)
        wall = _clock(moment, now=now, locale=loc, tz=zone_info, seconds=True)
        shown = t("pgbus.time.with_clock", relative=text, clock=wall)
        return Markup(f'<time datetime="{escape(when)}" title="{escape(title)}">{escape(shown)}</time>')

    return _remembered_tag(moment, "exact", loc, zone_info, now, text, draw)


def duration(value: timedelta | float | int | None) -> str:
    """A span in at most two units: "1h 5m", "2d 3h", "45s", "350ms".
    The smaller unit is left out when it is zero ("1h"); a negative span
    (clock skew between writers) counts as zero."""
    if value is None:
        return NONE
    seconds = value.total_seconds() if isinstance(value, timedelta) else float(value)
    if math.isnan(seconds) or math.isinf(seconds):
        return NONE
    seconds = max(seconds, 0.0)
    if seconds < 1:
        return tn("pgbus.time.units.milliseconds", int(round(seconds * 1000)))
    whole = int(seconds)
    parts: list[tuple[str, int]] = []
    for unit, size in _DURATION_UNITS:
        count, whole = divmod(whole, size)
        if parts or count:
            parts.append((unit, count))
        if len(parts) == 2:
            break
    larger = tn(f"pgbus.time.units.{parts[0][0]}", parts[0][1])
    if len(parts) == 1 or parts[1][1] == 0:
        return larger
    smaller = tn(f"pgbus.time.units.{parts[1][0]}", parts[1][1])
    return t("pgbus.time.duration_pair", larger=larger, smaller=smaller)


def between(start: datetime | None, end: datetime | None) -> str:
    """The duration from *start* to *end*; the dash when either is missing
    or infinite."""
    if start is None or end is None or isinstance(start, Infinite) or isinstance(end, Infinite):
        return NONE
    return duration(utc(end) - utc(start))
