"""Pages over a real streaming replica (replica_support: pg_basebackup -R
from the test server, started beside it): reads go to the replica only
while it is within replica_max_lag and has replayed the browser's own
last write; a replica behind or down sends them to the primary with a
note on the page, never a 503; /health says how the replica is without
failing on it; a poll after a write is never answered 304 from before it.

Every wait polls a condition until a generous deadline (a loaded machine
may take seconds for what takes milliseconds); nothing sleeps for an
answer."""

from __future__ import annotations

import pytest
from support.action_support import Browser, operator_app, paused_on_capture, run_row
from support.api_support import Api, token_for
from support.replica_support import wait_for
from support.web_helpers import soup, text_of

from pgbus_web import db
from pgbus_web.core.settings import SettingError, Settings, check
from pgbus_web.plumbing import reading

# Each test starts, and leaves, with the replica caught up (replica_support).
# One worker holds the session's replica (pytest-xdist --dist loadgroup).
pytestmark = [pytest.mark.usefixtures("replica_caught_up"), pytest.mark.xdist_group("replica")]

# An apply delay far longer than any test takes: what the primary writes
# meanwhile stays off the replica until the test lifts it.
LONG_DELAY = 3600
# A bound the delayed replica stays within (a day), and one it soon passes.
WIDE_BOUND = 86400.0
NARROW_BOUND = 1.0
RUN_TARGETS = "pgbus-run-header,pgbus-run-steps,pgbus-run-signals,pgbus-run-timeline,pgbus-run-audit"


def replica_database(engine, replica, max_lag: float) -> db.Database:
    return db.Database(engine, db.create_engine(replica.url), replica_max_lag=max_lag)


@pytest.fixture
def made():
    """Apps over the replica, each Database disposed at the end."""
    databases = []

    def make(engine, replica, max_lag: float = WIDE_BOUND):
        database = replica_database(engine, replica, max_lag)
        databases.append(database)
        return operator_app(database)

    yield make
    for database in databases:
        if database.replica is not None:
            database.replica.dispose()
        database._watch.dispose()


def status_on(response) -> str:
    return soup(response).select_one("#pgbus-run-header [data-status]")["data-status"]


def note_of(response):
    """The read note's reason, or None when the page says nothing."""
    found = soup(response).select_one("#pgbus-read-note [data-reason]")
    return None if found is None else found["data-reason"]


def poll(client, url: str, tag: str | None = None):
    headers = {"HX-Request": "true", "HX-Target": RUN_TARGETS, "X-User": "alice"}
    if tag:
        headers["If-None-Match"] = f'"{tag}"'
    return client.get(url, headers=headers)


def replica_has(replica, workflow_id: str) -> bool:
    return run_row(replica.engine, workflow_id) is not None


def test_a_resume_without_javascript_reads_resumed_through_an_apply_delay(engine, runs, replica, made):
    workflow_id = paused_on_capture(runs)
    other_run = paused_on_capture(runs)
    replica.catch_up()
    app = made(engine, replica)
    url = f"/workflows/{workflow_id}"
    operator = Browser(app.test_client())
    assert status_on(operator.load(url)) == "paused"
    before = poll(operator.client, url)
    assert before.status_code == 200 and before.get_etag()[0]

    replica.set_apply_delay(LONG_DELAY)
    done = operator.post(f"{url}/resume", {})
    assert done.status_code == 303
    assert reading.WRITTEN_HEADER in done.headers
    shown = operator.client.get(done.headers["Location"], headers={"X-User": "alice"})
    assert status_on(shown) == "ready"
    assert text_of(soup(shown).select_one("#pgbus-messages")).startswith("Resumed")
    assert note_of(shown) is None  # read from the primary for its own write: nothing to say

    # The control: the replica itself still has the run paused, and a
    # browser that did nothing reads it there.
    assert run_row(replica.engine, workflow_id)["status"] == "paused"
    assert status_on(Browser(app.test_client()).load(url)) == "paused"

    # Another run's write on the primary (the replica replays neither yet).
    operator.post(f"/workflows/{other_run}/resume", {})
    # The first poll carries the tag of the page from before the resume:
    # never its 304. After, a 304 stands only for a page that said ready.
    answer = poll(operator.client, url, before.get_etag()[0])
    assert answer.status_code == 200 and status_on(answer) == "ready"
    tag = answer.get_etag()[0]
    for _ in range(3):
        answer = poll(operator.client, url, tag)
        if answer.status_code == 304:
            assert answer.get_etag()[0] == tag
        else:
            assert answer.status_code == 200 and status_on(answer) == "ready"
            tag = answer.get_etag()[0]
    assert run_row(replica.engine, workflow_id)["status"] == "paused"

    # The delay lifted: once the replica has replayed the resume, the
    # browser reads it again (its pin is dropped) and still sees it resumed.
    replica.set_apply_delay(0)
    wait_for(lambda: run_row(replica.engine, workflow_id)["status"] == "ready", "the resume to replay")

    def unpinned():
        answer = poll(operator.client, url)
        assert answer.status_code == 200 and status_on(answer) == "ready"
        return operator.client.get_cookie(reading.COOKIE_NAME) is None

    wait_for(unpinned, "the pin to be dropped once the replica has the write")
    assert status_on(poll(operator.client, url)) == "ready"


def test_an_htmx_resume_then_its_polls_read_resumed_through_an_apply_delay(engine, runs, replica, made):
    workflow_id = paused_on_capture(runs)
    replica.catch_up()
    app = made(engine, replica)
    url = f"/workflows/{workflow_id}"
    operator = Browser(app.test_client())
    operator.load(url)
    tag = poll(operator.client, url).get_etag()[0]
    replica.set_apply_delay(LONG_DELAY)
    answer = operator.post(f"{url}/resume", {}, htmx=True, current_url=f"http://localhost{url}")
    assert answer.status_code == 200 and status_on(answer) == "ready"
    # The tag of the page before the resume is never answered 304.
    polled = poll(operator.client, url, tag)
    assert polled.status_code == 200 and status_on(polled) == "ready"
    for _ in range(3):
        polled = poll(operator.client, url)
        assert polled.status_code == 200 and status_on(polled) == "ready"
    assert run_row(replica.engine, workflow_id)["status"] == "paused"


def test_a_stopped_replica_sends_pages_to_the_primary_with_a_note(engine, runs, replica, made):
    workflow_id = paused_on_capture(runs)
    replica.catch_up()
    app = made(engine, replica)
    viewer = app.test_client()
    pages = (
        "/workflows",
        f"/workflows/{workflow_id}",
        "/workflows/insights/OrderWorkflow",
        "/locks",
        "/workflows/operations",
    )
    # The control: streaming, the pages say nothing and /health names it so.
    for page in pages:
        answer = viewer.get(page)
        assert answer.status_code == 200, page
        assert note_of(answer) is None, page
    health = viewer.get("/health")
    assert health.status_code == 200
    assert health.get_json()["replica"]["state"] == "streaming"
    assert health.get_json()["replica"]["reads"] == "replica"

    replica.stop()
    # Straight away (the last look may still say streaming: the page's own
    # connection fails and it reads the primary) and after the next look.
    for page in pages + pages:
        answer = viewer.get(page)
        assert answer.status_code == 200, page
        assert note_of(answer) == "unreachable", page
    assert "unreachable" in text_of(soup(viewer.get("/workflows")).select_one("#pgbus-read-note"))
    poll_answer = poll(viewer, f"/workflows/{workflow_id}")
    assert poll_answer.status_code == 200
    assert 'id="pgbus-read-note"' in poll_answer.get_data(as_text=True)
    health = viewer.get("/health")
    assert health.status_code == 200
    assert health.get_json() == {
        "status": "ok",
        "database": "ok",
        "replica": {"state": "unreachable", "lag_seconds": None, "max_lag_seconds": WIDE_BOUND, "reads": "primary"},
    }
    # A write still works and reads back.
    operator = Browser(app.test_client())
    done = operator.post(f"/workflows/{workflow_id}/resume", {})
    assert done.status_code == 303
    assert status_on(operator.client.get(done.headers["Location"], headers={"X-User": "alice"})) == "ready"

    replica.start()
    wait_for(lambda: viewer.get("/health").get_json()["replica"]["state"] == "streaming", "the replica back")
    wait_for(lambda: note_of(viewer.get("/workflows")) is None, "the note to go once the replica is back")


def test_a_replica_beyond_the_bound_sends_reads_to_the_primary(engine, runs, replica, made):
    narrow = made(engine, replica, NARROW_BOUND).test_client()
    wide = made(engine, replica, WIDE_BOUND).test_client()
    replica.set_apply_delay(LONG_DELAY)
    workflow_id = paused_on_capture(runs)  # on the primary only

    def lagging():
        body = narrow.get("/health").get_json()["replica"]
        return body["state"] == "lagging" and body["lag_seconds"] > NARROW_BOUND

    wait_for(lagging, "the replica to be more than the bound behind")
    answer = narrow.get(f"/workflows/{workflow_id}")
    assert answer.status_code == 200 and status_on(answer) == "paused"
    assert note_of(answer) == "lagging"
    assert "behind" in text_of(soup(answer).select_one("#pgbus-read-note"))
    assert narrow.get("/health").get_json()["replica"]["reads"] == "primary"
    # The controls: the replica itself has not got the run, and within a
    # wider bound the pages read it there (the run is not found).
    assert not replica_has(replica, workflow_id)
    assert wide.get(f"/workflows/{workflow_id}").status_code == 404
    assert note_of(wide.get("/workflows")) is None


def test_a_write_through_the_api_names_its_position_and_a_read_after_it_reads_the_primary(engine, runs, replica, made):
    workflow_id = paused_on_capture(runs)
    replica.catch_up()
    app = made(engine, replica)
    token = token_for(engine, "deploy-bot", "operator")
    operator = Api(app.test_client(), token)
    replica.set_apply_delay(LONG_DELAY)
    done = operator.post(f"/runs/{workflow_id}/resume", {"reason": "gateway is back"})
    assert done.status_code == 200
    written = done.headers[reading.WRITTEN_HEADER]
    # Another client (no cookie) naming that position reads the primary.
    other = Api(app.test_client(), token)
    pinned = other.get(f"/runs/{workflow_id}", headers={reading.REQUEST_HEADER: written})
    assert pinned.json_body["run"]["status"] == "ready"
    # The control: without the header it reads the replica, still paused.
    assert other.get(f"/runs/{workflow_id}").json_body["run"]["status"] == "paused"
    # The writing client holds the position in its cookie, as a browser does.
    assert operator.get(f"/runs/{workflow_id}").json_body["run"]["status"] == "ready"


def test_the_lag_bound_is_a_setting_checked_at_start():
    assert check(Settings(replica_max_lag=2.5), ("en",)).replica_max_lag == 2.5
    assert check(Settings(replica_max_lag=0), ("en",)).replica_max_lag == 0
    for wrong in (-1, "ten", float("inf"), True):
        with pytest.raises(SettingError, match="replica_max_lag"):
            check(Settings(replica_max_lag=wrong), ("en",))


def test_serve_starts_with_the_replica_down_and_reads_the_primary(database_url, engine, runs, tmp_path):
    from pgbus_web.launch.serve import build_app

    workflow_id = paused_on_capture(runs)
    # A socket directory no server listens in: refused at once.
    nowhere = f"postgresql://postgres@/postgres?host={tmp_path}&port=5432"
    app = build_app(database_url, nowhere)
    try:
        client = app.test_client()
        answer = client.get(f"/workflows/{workflow_id}")
        assert answer.status_code == 200 and status_on(answer) == "paused"
        assert note_of(answer) == "unreachable"
        health = client.get("/health")
        assert health.status_code == 200
        assert health.get_json()["replica"]["state"] == "unreachable"
    finally:
        app.extensions["pgbus_web"].database.dispose()


def test_the_replica_is_looked_at_once_per_interval_however_many_requests(engine, runs, replica, made):
    import time

    import sqlalchemy as sa

    workflow_id = paused_on_capture(runs)
    replica.catch_up()
    app = made(engine, replica)
    database = app.extensions["pgbus_web"].database
    looks = []
    sa.event.listen(database._watch._probes[1], "before_cursor_execute", lambda *args: looks.append(time.monotonic()))
    client = app.test_client()
    started = time.monotonic()
    requests = 0
    while requests < 30:
        assert client.get(f"/workflows/{workflow_id}").status_code == 200
        requests += 1
    elapsed = time.monotonic() - started
    # The first request looks; after, one more look per interval at most.
    assert 1 <= len(looks) <= 1 + elapsed / db.REPLICA_CHECK_INTERVAL + 1
    assert len(looks) < requests


def test_the_lag_bound_comes_from_the_config_and_the_command_line(database_url):
    from click.testing import CliRunner
    from flask import Flask

    from pgbus_web.cli.common import main_group
    from pgbus_web.core import settings_loader
    from pgbus_web.extension import PgbusWeb
    from pgbus_web.launch import serve  # noqa: F401 (registers serve)

    host = Flask(__name__)
    host.config.update(
        PGBUS_WEB_DATABASE_URL=database_url,
        PGBUS_WEB_REPLICA_URL=database_url,
        PGBUS_WEB_REPLICA_MAX_LAG=3,
        PGBUS_WEB_RUN_OPERATIONS=False,
    )
    extension = PgbusWeb(host)
    database = host.extensions["pgbus_web"].database
    try:
        assert database.replica_max_lag == 3 and extension.settings.replica_max_lag == 3
    finally:
        database.dispose()
    shown = CliRunner().invoke(main_group, ["serve", "--help"], terminal_width=200).output
    assert "--replica-max-lag" in shown
    [option] = [param for param in serve.serve.params if param.name == "replica_max_lag"]
    # Its default and its variable are the setting's, read by the one loader.
    assert not isinstance(option.default, (int, float)) and "PGBUS_WEB_REPLICA_MAX_LAG" in option.help
    assert settings_loader.default_of("replica_max_lag") == db.REPLICA_MAX_LAG


def test_an_idle_caught_up_replica_is_not_behind(engine, replica, made):
    # An idle primary may leave its last WAL record partly flushed, where
    # the replica's replay position stops short: it is still caught up.
    app = made(engine, replica, NARROW_BOUND)
    database = app.extensions["pgbus_web"].database
    replica.catch_up()
    view = wait_for(
        lambda: (found := database.replica_view(fresh=True)).lag == 0 and found,
        "a look that finds the replica caught up",
    )
    assert view.state == "streaming" and view.caught_up
    # And stays so while nothing is written, past the narrow bound.
    deadline = view.checked_at + NARROW_BOUND * 3
    while (later := database.replica_view(fresh=True)).checked_at < deadline:
        assert later.state == "streaming", later


def test_every_door_that_writes_pins_the_browser_and_a_refusal_does_not(engine, runs, replica, made):
    from datetime import timedelta

    from support.action_support import completed

    from pgbus_web.rules import run_filters
    from pgbus_web.runtime import operation_policy

    paused = paused_on_capture(runs)
    done = completed(runs)
    replica.catch_up()
    app = made(engine, replica)

    def pinned_by(path, data=None):
        browser = Browser(app.test_client())
        browser.load("/locks" if path.startswith("/locks") else "/workflows")
        answer = browser.post(path, data or {})
        return (
            answer.status_code,
            browser.client.get_cookie(reading.COOKIE_NAME) is not None,
            reading.WRITTEN_HEADER in answer.headers,
        )

    # A lock action, an operation, a verb: done, so pinned.
    assert pinned_by("/locks/reap") == (303, True, True)
    created = operation_policy.create(
        engine,
        run_filters.parse({"q": paused}),
        "cancel",
        None,
        reason="r",
        actor="test",
        expected=1,
        thresholds={"threshold": timedelta(minutes=5), "waiting_threshold": timedelta(hours=1)},
    )
    assert pinned_by(f"/workflows/operations/{created['id']}/cancel") == (303, True, True)
    assert pinned_by(f"/workflows/{paused}/resume") == (303, True, True)
    # The control: a refused verb wrote nothing, and pins nothing.
    assert pinned_by(f"/workflows/{done}/resume") == (409, False, False)
