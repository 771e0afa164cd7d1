"""The runs index, and above all its needs-attention block, is read once
per change marker and clock bucket and drawn once per kind of viewer
(web/answering/page_cache.py): what it shows must be what a fresh drawing
shows, whatever changed in between (a run's status, the language, the
zone, the role, the clock), and two viewers never see each other's HTML
or token."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa
from support.action_support import paused_on_capture
from support.index_views import block, role_app, without_tokens
from support.web_helpers import soup, text_of

from pgbus_web.core import page_reads
from pgbus_web.i18n import force_locale, t, tn
from pgbus_web.plumbing import csrf
from pgbus_web.web.answering import page_cache

# A multiple of shared.READ_EVERY seconds: T0 and T0 + 7 s are one bucket.
T0 = datetime(2026, 11, 30, 12, 0, 0, tzinfo=UTC)
assert T0.timestamp() % page_cache.READ_EVERY == 0 and page_cache.READ_EVERY > 7


@pytest.fixture
def clock(monkeypatch):
    """The pages' clock, held at .now."""

    class Clock:
        now = T0

    held = Clock()
    monkeypatch.setattr(page_reads, "utcnow", lambda: held.now)
    return held


def page(client, locale="en", tz="UTC", role="operator", **headers):
    client.set_cookie("pgbus_tz", tz)
    response = client.get(f"/workflows?locale={locale}", headers={"X-Role": role, **headers})
    assert response.status_code == 200
    return response


def body_token(response) -> str:
    return json.loads(soup(response).select_one("body")["hx-headers"])[csrf.HEADER_NAME]


def groups_table(response) -> str:
    """The groups and the failed groups, without the "as of" (when they were read)."""
    found = block(response)
    return without_tokens(
        found.select_one("table.pgbus-attention") or found.select_one(".pgbus-empty")
    ) + without_tokens(found.select_one(".pgbus-failed"))


def as_of(response) -> datetime:
    moment = block(response).select_one(".pgbus-as-of time")["datetime"]
    return datetime.fromisoformat(moment.replace("Z", "+00:00"))


def seen_words(response) -> str:
    return text_of(block(response).select_one("tr.pgbus-attention-group td[data-label]"))


def count_cell(response) -> str:
    return text_of(block(response).select_one("tr.pgbus-attention-group a.pgbus-group-link"))


def test_a_remembered_read_is_drawn_with_the_words_of_now(database, runs, clock):
    paused_on_capture(runs, paused_at=T0 - timedelta(seconds=5))
    app = role_app(database)
    client = app.test_client()
    first = page(client)
    assert as_of(first) == T0
    with force_locale("en"):
        assert t("pgbus.time.now") in seen_words(first)
        twelve = tn("pgbus.time.seconds_ago", 12)

    # Seven seconds on, the same marker and bucket: the groups are not read
    # again (the "as of" stays), but the relative times are those of now.
    clock.now = T0 + timedelta(seconds=7)
    later = page(client)
    assert as_of(later) == T0
    assert twelve in seen_words(later)
    # What a fresh drawing at the same moment shows (a new app remembers nothing).
    fresh = page(role_app(database).test_client())
    assert as_of(fresh) == clock.now
    assert groups_table(later) == groups_table(fresh)

    # The next bucket reads them again, behind the request that first asks
    # for it (shown the bucket before meanwhile).
    clock.now = T0 + timedelta(seconds=page_cache.READ_EVERY + 1)
    assert as_of(page(client)) == T0
    page_cache.settle()
    assert as_of(page(client)) == clock.now


def test_a_status_change_shows_at_once_in_every_locale(database, engine, runs, clock):
    first = paused_on_capture(runs, paused_at=T0 - timedelta(minutes=3))
    paused_on_capture(runs, paused_at=T0 - timedelta(minutes=2))
    client = role_app(database).test_client()
    for locale in ("en", "de"):
        for _ in range(2):  # the second from what was kept
            with force_locale(locale):
                assert count_cell(page(client, locale)) == tn("pgbus.workflows.attention.runs", 2)

    # The clock does not move: only the change marker says the groups changed.
    with engine.begin() as conn:
        conn.execute(
            sa.text("UPDATE pgbus_workflows SET status = 'cancelled', finished_at = :at WHERE workflow_id = :id"),
            {"at": T0 - timedelta(seconds=30), "id": first},
        )
    for locale in ("en", "de"):
        shown = page(client, locale)
        with force_locale(locale):
            assert count_cell(shown) == tn("pgbus.workflows.attention.runs", 1)
        # The runs table and the counts beside the groups follow too.
        assert soup(shown).select_one(f'tr.pgbus-run-row[data-workflow-id="{first}"]')["data-badge"] == "cancelled"
        assert soup(shown).select_one('#pgbus-counts a[data-status="cancelled"]') is not None

    # A paused run that fails leaves the group and makes a failed group.
    with engine.begin() as conn:
        conn.execute(
            sa.text(
                "UPDATE pgbus_workflows SET status = 'failed', finished_at = :at, paused_at = NULL"
                " WHERE status = 'paused'"
            ),
            {"at": T0 - timedelta(seconds=20)},
        )
    for locale in ("en", "de"):
        shown = page(client, locale)
        assert block(shown).select("tr.pgbus-attention-group") == []
        assert len(block(shown).select("tr.pgbus-failed-group")) == 1
        with force_locale(locale):
            assert t("pgbus.workflows.attention.none") in text_of(block(shown))
        assert groups_table(shown) == groups_table(page(role_app(database).test_client(), locale))


VIEWERS = [
    ("en", "UTC", "operator"),
    ("en", "UTC", "viewer"),
    ("de", "Europe/Berlin", "operator"),
    ("de", "Europe/Berlin", "viewer"),
    ("ja", "Asia/Tokyo", "operator"),
    ("en", "Asia/Tokyo", "operator"),
]


def test_viewers_of_other_roles_locales_and_zones_never_share_html(database, runs, clock):
    paused_on_capture(runs, paused_at=T0 - timedelta(hours=20))
    runs.make("failed", workflow_class="OrderWorkflow", finished_at=T0 - timedelta(hours=3))
    app = role_app(database)
    # Each viewer its own browser (its own CSRF cookie), asked in turn, twice.
    browsers = {viewer: app.test_client() for viewer in VIEWERS}
    tokens = {}
    for _ in range(2):
        for viewer, client in browsers.items():
            locale, tz, role = viewer
            shown = page(client, locale, tz, role)
            forms = block(shown).select("form")
            if role == "operator":
                assert forms, viewer
                # Every form carries this browser's token of this request.
                assert {form.select_one(f"input[name={csrf.FIELD_NAME}]")["value"] for form in forms} == {
                    body_token(shown)
                }
                tokens.setdefault(viewer, set()).add(body_token(shown))
            else:
                assert forms == [], viewer
            with force_locale(locale):
                assert text_of(block(shown).select_one("h2")) == t("pgbus.workflows.attention.title")
            # Exactly what a fresh drawing for this viewer shows.
            fresh = page(role_app(database).test_client(), locale, tz, role)
            assert groups_table(shown) == groups_table(fresh), viewer
    # The browsers' tokens are their own.
    everyone = [token for kept in tokens.values() for token in kept]
    assert len(everyone) == len(set(everyone)) == 2 * sum(1 for viewer in VIEWERS if viewer[2] == "operator")
    # Control: the viewers' drawings do differ where they should.
    en, de = (
        groups_table(page(app.test_client(), locale, tz, "operator"))
        for locale, tz in (("en", "UTC"), ("de", "Europe/Berlin"))
    )
    tokyo = groups_table(page(app.test_client(), "en", "Asia/Tokyo", "operator"))
    viewer = groups_table(page(app.test_client(), "en", "UTC", "viewer"))
    assert len({en, de, tokyo, viewer}) == 4


def test_the_fragment_is_the_pages_block(database, runs, clock):
    paused_on_capture(runs, paused_at=T0 - timedelta(minutes=1))
    client = role_app(database).test_client()
    whole = page(client)
    fragment = page(client, **{"HX-Request": "true", "HX-Target": "pgbus-attention"})
    assert without_tokens(block(whole)) == without_tokens(block(fragment))


def test_a_moments_window_holds_its_words_and_ends_where_they_change():
    """timefmt.same_words against relative() itself, at moments all around
    each unit's edges, past and future: inside the window the words are
    the same, a moment past either edge they are not."""
    import random

    from pgbus_web.core.words import timefmt

    chooser = random.Random(28)
    spans = [
        0,
        3,
        9.9995,
        10,
        10.5,
        59,
        60,
        61,
        3599,
        3600,
        86399,
        86400,
        29 * 86400,
        30 * 86400,
        364 * 86400,
        365 * 86400,
        400 * 86400,
        800 * 86400,
    ]
    spans += [chooser.uniform(0, 900 * 86400) for _ in range(200)]
    tested = 0
    with force_locale("en"):
        for span in spans:
            for sign in (1, -1):
                moment = T0 + timedelta(seconds=chooser.uniform(0, 1))
                now = moment + sign * timedelta(seconds=span + chooser.uniform(0, 0.9))
                words = timefmt.relative(moment, now=now)
                since, until = timefmt.same_words(moment, now=now)
                assert since <= now <= until, (span, sign)
                for inside in (since, until, since + (until - since) / 3):
                    assert timefmt.relative(moment, now=inside) == words, (span, sign, inside)
                for outside in (since - timedelta(milliseconds=2), until + timedelta(milliseconds=2)):
                    assert timefmt.relative(moment, now=outside) != words, (span, sign, outside)
                tested += 1
    assert tested == 2 * len(spans)


def test_while_the_next_bucket_is_read_the_bucket_before_is_shown(database, runs, clock, monkeypatch):
    import threading

    paused_on_capture(runs, paused_at=T0 - timedelta(minutes=1))
    app = role_app(database)
    assert as_of(page(app.test_client())) == T0
    clock.now = T0 + timedelta(seconds=page_cache.READ_EVERY)
    started, release = threading.Event(), threading.Event()
    real = page_reads.attention_context

    def slow(*args, **kwargs):
        started.set()
        release.wait(30)
        return real(*args, **kwargs)

    monkeypatch.setattr(page_reads, "attention_context", slow)
    answers = {}
    # The first request of the bucket is answered from the bucket before,
    # and its read goes on behind it.
    assert as_of(page(app.test_client())) == T0
    try:
        assert started.wait(30)
        # Nor is the next kept waiting for that read: the bucket before.
        assert as_of(page(app.test_client())) == T0
    finally:
        release.set()
        page_cache.settle()
    assert as_of(page(app.test_client())) == clock.now

    # Control: after a write (a new marker) nobody is shown the bucket
    # before: a request waits for the new read.
    paused_on_capture(runs, paused_at=T0 - timedelta(seconds=30))
    clock.now = T0 + timedelta(seconds=2 * page_cache.READ_EVERY)
    started.clear()
    release.clear()
    threads = [threading.Thread(target=lambda n=n: answers.update({n: page(app.test_client())})) for n in (1, 2)]
    for thread in threads:
        thread.start()
    try:
        assert started.wait(30)
        threads[1].join(1.0)
        assert all(thread.is_alive() for thread in threads)
    finally:
        release.set()
        for thread in threads:
            thread.join(60)
    assert as_of(answers[1]) == as_of(answers[2]) == clock.now
    assert count_cell(answers[2]) == "2 runs"
