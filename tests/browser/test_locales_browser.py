"""Every page on a phone (390x844) in English, German and Japanese is no
wider than the window: long German words hyphenate, Japanese breaks
between phrases rather than mid-word and never overflows, and counts keep
their number and noun together; on a desktop the English runs' counts and
the operation's buttons stay on one line.

Skipped only when /usr/bin/chromium is missing (CI installs it)."""

from __future__ import annotations

import pytest
from support.browser import WAIT_MS, requires_chromium, serve
from support.page_layout import LOCALES, admin_app, pages

pytestmark = requires_chromium


@pytest.fixture
def app(database):
    return admin_app(database)


@pytest.fixture
def server(app):
    yield from serve(app)


@pytest.mark.parametrize("locale", LOCALES)
def test_no_page_is_wider_than_a_phone_in_any_language(chromium, app, server, runs, engine, locale):
    paths = pages(app, runs, engine)
    browser_context = chromium.new_context(viewport={"width": 390, "height": 844})
    page = browser_context.new_page()
    page.set_default_timeout(WAIT_MS)
    wide = {}
    try:
        for name, path in paths.items():
            page.goto(f"{server}{path}?locale={locale}")
            page.wait_for_load_state("load")
            widths = page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
            if widths[0] > widths[1]:
                wide[name] = widths
    finally:
        browser_context.close()
    assert wide == {}, wide


def test_japanese_and_german_break_words_where_their_languages_do(chromium, app, server, runs, engine):
    pages(app, runs, engine)
    browser_context = chromium.new_context(viewport={"width": 390, "height": 844})
    page = browser_context.new_page()
    try:
        page.goto(f"{server}/workflows?locale=ja")
        assert page.evaluate("getComputedStyle(document.querySelector('.pgbus-nav a')).wordBreak") == "keep-all"
        page.goto(f"{server}/workflows?locale=de")
        assert page.evaluate("getComputedStyle(document.querySelector('.pgbus-main')).hyphens") == "auto"
    finally:
        browser_context.close()


def test_counts_and_buttons_stay_on_one_line_on_a_desktop(chromium, app, server, runs, engine):
    pages(app, runs, engine)
    browser_context = chromium.new_context(viewport={"width": 1280, "height": 800})
    page = browser_context.new_page()
    try:
        page.goto(f"{server}/workflows")
        lines = page.evaluate(
            """() => [...document.querySelectorAll('.pgbus-attention a.pgbus-group-link')]
                 .filter(e => /\\d/.test(e.textContent))
                 .map(e => { const r = document.createRange(); r.selectNodeContents(e);
                             return [e.textContent.trim(), r.getClientRects().length]; })"""
        )
        assert lines and all(count == 1 for _text, count in lines), lines
        rows = page.evaluate(
            """() => [...document.querySelectorAll('.pgbus-attention .pgbus-group-actions')]
                 .map(e => [...e.querySelectorAll('button')].map(b => Math.round(b.getBoundingClientRect().top)))"""
        )
        assert rows and all(len(set(tops)) == 1 for tops in rows), rows
    finally:
        browser_context.close()
