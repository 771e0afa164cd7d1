"""The replica in Chromium (the session's one), over a real streaming
replica (replica_support): a resume without JavaScript and with it, held
back on the replica by an apply delay, shows the run resumed on the page
it leads to and on every live refresh after; and the note that pages read
the primary fits every size, scheme and language, and is axe-clean."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from support.action_support import operator_app, paused_on_capture, run_row
from support.browser import WAIT_MS, axe_violations, serve
from support.replica_support import wait_for

from pgbus_web import db

# Each test starts, and leaves, with the replica caught up (replica_support).
# One worker holds the session's replica (pytest-xdist --dist loadgroup).
pytestmark = [pytest.mark.usefixtures("replica_caught_up"), pytest.mark.xdist_group("replica")]

LONG_DELAY = 3600
# Polls a resumed page must survive, each read back from the page.
POLLS = 3
SIZES = [(1280, 800), (390, 844)]
SCHEMES = ["light", "dark"]
LOCALES = ["en", "de", "ja"]
BADGE = "#pgbus-run-header [data-status]"


@pytest.fixture
def served(engine, replica):
    """Serve an app over the replica; yields (base URL, its Database)."""
    started = []

    def start(max_lag: float = 86400.0, **settings):
        database = db.Database(engine, db.create_engine(replica.url), replica_max_lag=max_lag)
        app = operator_app(database, actor_name=lambda request: "browser", **settings)
        serving = serve(app)
        base = next(serving)
        started.append((serving, database))
        return base

    yield start
    for serving, database in started:
        serving.close()
        database.replica.dispose()
        database._watch.dispose()


def open_page(chromium, **options):
    context = chromium.new_context(viewport={"width": 1280, "height": 800}, **options)
    page = context.new_page()
    page.set_default_timeout(WAIT_MS)
    return context, page


def test_a_resume_without_javascript_lands_on_the_run_resumed(chromium, engine, runs, replica, served):
    workflow_id = paused_on_capture(runs)
    replica.catch_up()
    base = served(refresh_interval=600)
    context, page = open_page(chromium, java_script_enabled=False)
    try:
        page.goto(f"{base}/workflows/{workflow_id}")
        assert page.locator(BADGE).get_attribute("data-status") == "paused"
        replica.set_apply_delay(LONG_DELAY)
        page.locator('details.pgbus-action[data-verb="resume"] summary').click()
        page.locator('details.pgbus-action[data-verb="resume"] form button[type="submit"]').click()
        page.wait_for_load_state("load")
        assert page.url.endswith(f"/workflows/{workflow_id}")
        assert page.locator(BADGE).get_attribute("data-status") == "ready"
        assert page.locator("#pgbus-messages").inner_text().startswith("Resumed")
        # The control: the replica itself still has it paused.
        assert run_row(replica.engine, workflow_id)["status"] == "paused"
        # Reloaded, as an operator without JavaScript refreshes.
        page.reload()
        assert page.locator(BADGE).get_attribute("data-status") == "ready"
    finally:
        context.close()


def test_the_live_refresh_after_a_resume_keeps_it_resumed(chromium, engine, runs, replica, served):
    workflow_id = paused_on_capture(runs)
    other = paused_on_capture(runs)
    replica.catch_up()
    base = served(refresh_interval=1)
    context, page = open_page(chromium)
    try:
        page.goto(f"{base}/workflows/{workflow_id}")
        page.wait_for_load_state("load")
        replica.set_apply_delay(LONG_DELAY)
        page.locator('details.pgbus-action[data-verb="resume"] summary').click()
        page.locator('details.pgbus-action[data-verb="resume"] form button[type="submit"]').click()
        # Polled from here: the page's CSP refuses wait_for_function's eval.
        wait_for(lambda: page.locator(BADGE).get_attribute("data-status") == "ready", "the resume's answer", every=0.2)
        # Another run's write, replayed by neither yet (the case).
        with engine.begin() as conn:
            conn.exec_driver_sql("UPDATE pgbus_workflows SET updated_at = now() WHERE workflow_id = %s", (other,))
        # Every poll's answer, as swapped in: the badge after each settle.
        page.evaluate("""() => { window.pgbusSeen = [];
          document.body.addEventListener('htmx:afterSettle', () => window.pgbusSeen.push(
            document.querySelector('#pgbus-run-header [data-status]').dataset.status)); }""")
        wait_for(lambda: page.evaluate("window.pgbusSeen.length") >= POLLS, f"{POLLS} polls", every=0.5)
        seen = page.evaluate("window.pgbusSeen")
        assert seen and set(seen) == {"ready"}, seen
        assert run_row(replica.engine, workflow_id)["status"] == "paused"
    finally:
        context.close()


def saved_to() -> Path | None:
    named = os.environ.get("PGBUS_TEST_SCREENSHOTS")
    if not named:
        return None
    folder = Path(named)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.mark.parametrize("scheme", SCHEMES)
def test_the_read_note_fits_and_is_axe_clean(chromium, engine, runs, replica, served, scheme):
    workflow_id = paused_on_capture(runs)
    replica.catch_up()
    base = served(max_lag=1.0, refresh_interval=600)
    replica.set_apply_delay(LONG_DELAY)
    paused_on_capture(runs)  # on the primary only: the replica falls behind
    found = {}
    folder = saved_to()
    for width, height in SIZES:
        context = chromium.new_context(viewport={"width": width, "height": height}, color_scheme=scheme)
        page = context.new_page()
        page.set_default_timeout(WAIT_MS)
        try:
            for locale in LOCALES:
                for name, path in (("index", "/workflows"), ("run", f"/workflows/{workflow_id}")):
                    url = f"{base}{path}?locale={locale}"

                    def noted(page=page, url=url):
                        page.goto(url)
                        return page.locator('#pgbus-read-note [data-reason="lagging"]').count() == 1

                    wait_for(noted, f"the lagging note on {url}", every=0.5)
                    view = f"{name}-{locale}-{width}x{height}-{scheme}"
                    assert page.locator("#pgbus-read-note").is_visible(), view
                    assert page.evaluate("document.documentElement.scrollWidth <= innerWidth"), view
                    violations = axe_violations(page)
                    if violations:
                        found[view] = violations
                    if folder:
                        page.screenshot(path=str(folder / f"replica-note-{view}.png"))
        finally:
            context.close()
    assert found == {}, found
