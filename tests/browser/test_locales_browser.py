"""Every page on a phone (390x844) in English, German and Japanese is no
wider than the window: long German words hyphenate, Japanese breaks
between phrases rather than mid-word and never overflows, and counts keep
their number and noun together; on a desktop the English runs' counts and
the operation's buttons stay on one line.

Skipped only when /usr/bin/chromium is missing (CI installs it)."""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from support.action_support import operator_app
from support.browser import WAIT_MS, requires_chromium, serve
from support.lock_support import Locks
from support.session_support import seed_sessions
from support.web_helpers import every_state

from pgbus_web.core import policy, reads
from pgbus_web.demo.workflows import REGISTRY
from pgbus_web.runtime import operation_policy, operation_record

pytestmark = requires_chromium

LOCALES = ["en", "de", "ja"]


@pytest.fixture
def app(database):
    # An admin: the Policy page shows its forms too.
    return operator_app(
        database,
        actor_name=lambda request: "browser",
        refresh_interval=600,
        worker_gone_after=300,
        role_of=lambda request: "admin",
    )


@pytest.fixture
def server(app):
    yield from serve(app)


def pages(app, runs, engine) -> dict[str, str]:
    made = every_state(runs)
    # A changed rule with a long value: the Policy page's value and history.
    policy.change(
        engine,
        "grants",
        [
            {
                "to": "group:payments-on-call",
                "role": "operator",
                "classes": ["OrderWorkflow", "RefundWorkflow"],
                "verbs": ["resume", "rerun"],
            }
        ],
        actor="dashboard:alice",
        reason="the payments on-call retries payments and refunds, nothing else",
    )
    Locks(engine).queue()
    seed_sessions(engine)
    created = operation_policy.create(
        engine,
        operation_record.filters_of({"filters": {"status": "paused"}}),
        "resume",
        None,
        reason="gateway back",
        actor="dashboard:alice",
        expected=None,
        registry=REGISTRY,
        thresholds=reads.thresholds(app.extensions["pgbus_web"].database.primary),
    )
    with engine.begin() as conn:
        batch_id = conn.execute(sa.text("SELECT batch_id FROM pgbus_batches LIMIT 1")).scalar_one()
        # Workers alive, stopped and gone; the gone one holds the running
        # run's step (the index's banner).
        gone = (
            conn.execute(
                sa.text(
                    "INSERT INTO pgbus_web_workers (kind, host, pid, started_at, heartbeat_at, steps_done, stopped_at) VALUES"
                    " ('worker', 'worker-1.prod.example.com', 4242, now() - interval '3 hours', now(), 1280, NULL),"
                    " ('serve', 'web-1', 17, now() - interval '1 day', now() - interval '2 hours', 0,"
                    "  now() - interval '2 hours'),"
                    " ('worker', 'worker-2.prod.example.com', 977, now() - interval '5 hours', now() - interval '6 minutes',"
                    "  5120, NULL) RETURNING id"
                )
            )
            .scalars()
            .all()[-1]
        )
        conn.execute(
            sa.text(
                "UPDATE pgbus_workflow_steps SET worker_id = :w WHERE workflow_id = :id AND status = 'in_progress'"
            ),
            {"w": gone, "id": made["running"]},
        )
        conn.execute(sa.text("SELECT pgmq.create('refunds')"))
        conn.execute(sa.text("SELECT pgmq.send_batch('refunds', ARRAY['{}', '{}', '{}']::jsonb[])"))
        conn.execute(sa.text("UPDATE pgmq.q_refunds SET enqueued_at = now() - interval '40 minutes'"))
    return {
        "index": "/workflows",
        "run": f"/workflows/{made['paused_error']}",
        "batch": f"/batches/{batch_id}",
        "insights": "/workflows/insights/OrderWorkflow",
        "operations": "/workflows/operations",
        "operation": f"/workflows/operations/{created['id']}",
        "locks": "/locks",
        "workers": "/workers",
        "policy": "/policy",
        "sessions": "/sessions",
    }


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
