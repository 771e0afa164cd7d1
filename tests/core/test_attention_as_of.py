"""The needs-attention groups say when they were read: an "as of" beside
them, a <time> through the time formatter, drawn with the groups, so a
refresh of the groups (every few polls, not every one) moves it and a
refresh of the counts alone leaves it."""

from __future__ import annotations

from datetime import datetime, timedelta

from support.action_support import paused_on_capture
from support.web_helpers import soup

from pgbus_web.i18n import force_locale, t
from pgbus_web.runtime.clock import utcnow


def as_of(response):
    block = soup(response).select_one("#pgbus-attention")
    return block.select_one(".pgbus-card-head .pgbus-as-of") if block is not None else None


def test_the_groups_say_when_they_were_read(client, runs):
    paused_on_capture(runs)
    before = utcnow()
    shown = as_of(client.get("/workflows"))
    assert shown is not None
    moment = datetime.fromisoformat(shown.time["datetime"].replace("Z", "+00:00"))
    assert before - timedelta(seconds=1) <= moment <= utcnow() + timedelta(seconds=1)
    with force_locale("en"):
        assert shown.get_text(" ", strip=True).startswith("As of " + t("pgbus.time.now"))
    # Its exact clock is written out, not only in the title.
    assert "(" in shown.time.get_text() and shown.time["title"]


def test_it_comes_with_the_groups_redrawn_and_not_with_the_counts(client, runs):
    paused_on_capture(runs)
    groups = client.get("/workflows", headers={"HX-Request": "true", "HX-Target": "pgbus-attention"})
    assert as_of(groups) is not None
    counts = client.get("/workflows", headers={"HX-Request": "true", "HX-Target": "pgbus-counts,pgbus-total"})
    assert soup(counts).select(".pgbus-as-of") == []


def test_every_locale_says_it(client, runs):
    for locale, words in (("de", "Stand:"), ("ja", "更新：")):
        shown = as_of(client.get("/workflows", headers={"Accept-Language": locale}))
        assert shown.get_text().strip().startswith(words), locale
