"""The time formatter: relative texts with plural forms, the wall clock,
the absolute title with its zone, <time> tags and two-unit durations."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from bs4 import BeautifulSoup

from pgbus_web.core.words import timefmt

NOW = datetime(2026, 1, 5, 14, 5, 3, tzinfo=UTC)


def plain(text: str) -> str:
    # CLDR puts a narrow no-break space before AM/PM.
    return text.replace("\u202f", " ")


def ago(**delta) -> datetime:
    return NOW - timedelta(**delta)


def ahead(**delta) -> datetime:
    return NOW + timedelta(**delta)


@pytest.mark.parametrize(
    ("moment", "text"),
    [
        (NOW, "just now"),
        (ago(seconds=9), "just now"),
        (ahead(seconds=9), "just now"),
        (ago(seconds=30), "30 seconds ago"),
        (ago(minutes=1), "1 minute ago"),
        (ago(minutes=2), "2 minutes ago"),
        (ago(minutes=5, seconds=59), "5 minutes ago"),
        (ago(hours=1), "1 hour ago"),
        (ago(hours=5), "5 hours ago"),
        (ago(days=1), "1 day ago"),
        (ago(days=2), "2 days ago"),
        (ago(days=45), "1 month ago"),
        (ago(days=800), "2 years ago"),
        (ahead(seconds=30), "in 30 seconds"),
        (ahead(minutes=1), "in 1 minute"),
        (ahead(hours=2), "in 2 hours"),
        (ahead(days=5), "in 5 days"),
        (ahead(days=400), "in 1 year"),
    ],
)
def test_relative(moment, text):
    assert timefmt.relative(moment, now=NOW) == text


def test_relative_reads_a_naive_moment_as_utc():
    assert timefmt.relative(ago(minutes=5).replace(tzinfo=None), now=NOW) == "5 minutes ago"


def test_relative_compares_moments_in_other_zones():
    copenhagen = timefmt.zone("Europe/Copenhagen")
    assert timefmt.relative(ago(hours=2).astimezone(copenhagen), now=NOW) == "2 hours ago"


def test_iso_is_utc_to_the_second():
    moment = datetime(2026, 1, 5, 15, 5, 3, 123456, tzinfo=timefmt.zone("Europe/Copenhagen"))
    assert timefmt.iso(moment) == "2026-01-05T14:05:03Z"


def test_absolute_shows_the_zone():
    assert plain(timefmt.absolute(NOW, locale="en", tz="UTC")) == "January 5, 2026, 2:05:03 PM UTC"


def test_absolute_in_the_viewers_zone_and_locale():
    text = timefmt.absolute(NOW, locale="de", tz="Europe/Copenhagen")
    assert text.startswith("5. Januar 2026")
    assert "15:05:03" in text
    assert "MEZ" in text


def test_clock_same_day_is_the_time_only():
    assert plain(timefmt.clock(ahead(minutes=30), now=NOW, locale="en", tz="UTC")) == "2:35 PM"


def test_clock_uses_the_locales_hour_cycle():
    assert timefmt.clock(ahead(minutes=30), now=NOW, locale="de", tz="Europe/Copenhagen") == "15:35"


def test_clock_another_day_names_the_day():
    assert plain(timefmt.clock(ahead(days=1), now=NOW, locale="en", tz="UTC")) == "Jan 6, 2:05 PM"


def test_clock_another_year_names_the_year():
    assert plain(timefmt.clock(ahead(days=400), now=NOW, locale="en", tz="UTC")) == "Feb 9, 2027, 2:05 PM"


def test_clock_the_day_is_the_viewers_day():
    # 23:30 UTC is already tomorrow in Tokyo.
    late = datetime(2026, 1, 5, 23, 30, tzinfo=UTC)
    assert plain(timefmt.clock(late, now=NOW, locale="en", tz="Asia/Tokyo")) == "Jan 6, 8:30 AM"


def _tag(markup) -> BeautifulSoup:
    return BeautifulSoup(str(markup), "html.parser").find("time")


def test_time_tag_relative():
    tag = _tag(timefmt.time_tag(ago(minutes=5), now=NOW, locale="en", tz="UTC"))
    assert tag["datetime"] == "2026-01-05T14:00:03Z"
    assert plain(tag["title"]) == "January 5, 2026, 2:00:03 PM UTC"
    assert tag.get_text() == "5 minutes ago"


def test_time_tag_clock_for_due_times():
    tag = _tag(timefmt.time_tag(ahead(hours=2), now=NOW, locale="en", tz="UTC", clock=True))
    assert plain(tag.get_text()) == "in 2 hours (4:05 PM)"
    assert tag["datetime"] == "2026-01-05T16:05:03Z"


def test_time_tag_title_in_the_viewers_zone():
    tag = _tag(timefmt.time_tag(NOW, now=NOW, locale="en", tz="America/New_York"))
    assert plain(tag["title"]) == "January 5, 2026, 9:05:03 AM EST"
    assert tag["datetime"] == "2026-01-05T14:05:03Z"


def test_time_tag_without_a_moment_is_the_dash():
    assert str(timefmt.time_tag(None, now=NOW)) == "—"


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (0.35, "350ms"),
        (0, "0ms"),
        (1, "1s"),
        (45, "45s"),
        (65, "1m 5s"),
        (3600, "1h"),
        (3900, "1h 5m"),
        (3959, "1h 5m"),
        (90061, "1d 1h"),
        (2 * 86400 + 3 * 3600 + 59, "2d 3h"),
        (timedelta(days=2), "2d"),
        (timedelta(minutes=90), "1h 30m"),
        (-5, "0ms"),
    ],
)
def test_duration(value, text):
    assert timefmt.duration(value) == text


def test_duration_of_nothing_is_the_dash():
    assert timefmt.duration(None) == "—"


def test_between():
    assert timefmt.between(ago(minutes=65), NOW) == "1h 5m"
    assert timefmt.between(None, NOW) == "—"


def test_unknown_zone_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown time zone 'Mars/Olympus'"):
        timefmt.absolute(NOW, tz="Mars/Olympus")


def test_unknown_locale_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown locale 'xx'"):
        timefmt.absolute(NOW, locale="xx")


# --- absolute: Babel's "long" date-time, with patterns and zone names cached ---


@pytest.mark.parametrize("locale", ["en", "da", "de", "es", "fi", "fr", "it", "ja", "nb", "nl", "pt", "sv"])
def test_absolute_says_what_babels_long_format_says(locale):
    import random
    from datetime import timedelta as span

    from babel import dates as babel_dates

    rng = random.Random(locale)
    zones = [
        None,
        "Europe/Berlin",
        "America/Lima",
        "Asia/Tokyo",
        "Australia/Lord_Howe",
        "America/New_York",
        "Asia/Kolkata",
        "UTC",
        timezone(span(hours=5, minutes=45)),
    ]
    for tz in zones:
        for _ in range(40):
            moment = datetime(2026, 1, 1, tzinfo=UTC) + span(seconds=rng.randint(-(10**9), 10**9))
            local = timefmt.in_zone(moment, timefmt.zone(tz))
            expected = babel_dates.format_datetime(local, "long", tzinfo=local.tzinfo, locale=locale)
            assert timefmt.absolute(moment, locale=locale, tz=tz) == expected, (tz, moment)


# --- the remembered texts: the same answer as working it out afresh ---


def test_a_remembered_clock_follows_the_viewers_day():
    # The same moment, asked on its own day and then a day later: the second
    # answer names the day (the memo is keyed by the viewer's day).
    moment = ahead(minutes=30)
    assert plain(timefmt.clock(moment, now=NOW, locale="en", tz="UTC")) == "2:35 PM"
    assert plain(timefmt.clock(moment, now=NOW + timedelta(days=1), locale="en", tz="UTC")) == "Jan 5, 2:35 PM"
    assert plain(timefmt.clock(moment, now=NOW, locale="en", tz="UTC")) == "2:35 PM"
    # ... and by the zone and the locale.
    assert timefmt.clock(moment, now=NOW, locale="de", tz="Europe/Copenhagen") == "15:35"
    assert plain(timefmt.clock(moment, now=NOW, locale="en", tz="Europe/Copenhagen")) == "3:35 PM"


def test_a_remembered_tag_follows_the_viewers_day():
    # "12 hours ago" both times, but the second viewer's day is the next:
    # the wall clock then names the moment's day.
    moment = datetime(2026, 1, 4, 11, 30, tzinfo=UTC)
    late, after_midnight = (
        datetime(2026, 1, 4, 23, 50, tzinfo=UTC),
        datetime(2026, 1, 5, 0, 10, tzinfo=UTC),
    )
    same_day = plain(str(timefmt.exact_tag(moment, now=late, locale="en", tz="UTC")))
    next_day = plain(str(timefmt.exact_tag(moment, now=after_midnight, locale="en", tz="UTC")))
    assert ">12 hours ago (11:30:00 AM)<" in same_day
    assert ">12 hours ago (Jan 4, 11:30:00 AM)<" in next_day


def test_remembered_tags_equal_fresh_ones_across_moments_days_and_zones():
    import random

    rng = random.Random(11)
    # A few moments, each met again on other days, in other zones and words.
    moments = [NOW + timedelta(seconds=rng.randint(-4 * 86400, 4 * 86400)) for _ in range(12)]
    cases = [
        (
            rng.choice(moments),
            NOW + timedelta(hours=rng.randint(0, 48)),
            rng.choice(["en", "de", "ja"]),
            rng.choice(["UTC", "Asia/Tokyo", "America/Lima"]),
        )
        for _ in range(150)
    ]

    def tags(m, n, loc, tz):
        return (
            timefmt.exact_tag(m, now=n, locale=loc, tz=tz),
            timefmt.time_tag(m, now=n, locale=loc, tz=tz, clock=True),
            timefmt.time_tag(m, now=n, locale=loc, tz=tz),
        )

    first = [tags(*case) for case in cases]
    timefmt._stamps.clear()
    timefmt._clock_texts.clear()
    timefmt._relative_texts.clear()
    timefmt._tags.clear()
    fresh = [tags(*case) for case in reversed(cases)]
    assert first == list(reversed(fresh))
    assert len({text for pair in first for text in pair}) > 200  # the cases differ


def test_reloading_the_catalogs_forgets_the_remembered_relative_texts():
    from pgbus_web import i18n

    timefmt.relative(ago(minutes=3), now=NOW)
    assert timefmt._relative_texts
    i18n.reload()
    assert not timefmt._relative_texts
