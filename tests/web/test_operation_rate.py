"""The rate and time left an operation's page shows count its working
time only (docs/operations.md, "The million-run trial"): paused for an
hour in all, an operation that did 600 runs in 60 working seconds says
10 runs/s, not 600 over the hour and a minute since it started; every
pause counts, not only the last (each go-on adds its pause to
held_seconds)."""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import text
from support.action_support import paused_on_capture
from support.operation_support import URL, ask, operations_of
from support.web_helpers import soup, text_of

from pgbus_web.runtime import operation_record
from pgbus_web.runtime.clock import utcnow


def _operation(browser, runs, engine):
    for _ in range(2):
        paused_on_capture(runs)
    assert ask(browser, "cancel", expected="2", confirmed="1", reason="trial").status_code == 303
    [operation] = operations_of(engine)
    return operation["id"]


def _set(engine, operation_id, **columns):
    sets = ", ".join(f"{name} = :{name}" for name in columns)
    with engine.begin() as conn:
        conn.execute(text(f"UPDATE pgbus_web_operations SET {sets} WHERE id = :id"), {"id": operation_id, **columns})


def _shown(browser, operation_id):
    page = soup(browser.client.get(f"{URL}/{operation_id}"))
    return text_of(page.select_one(".pgbus-operation-rate")), text_of(page.select_one(".pgbus-operation-left"))


def test_no_pause_is_counted_in_the_rate(browser, runs, engine):
    operation_id = _operation(browser, runs, engine)
    started = utcnow() - timedelta(hours=2)
    # Control: no pause, 600 runs in 3,660 s is 0.16 runs/s (shown 0.2).
    _set(
        engine,
        operation_id,
        status="done",
        started_at=started,
        finished_at=started + timedelta(seconds=3660),
        total=600,
        moved=600,
        skipped=0,
    )
    assert _shown(browser, operation_id)[0] == "0.2 runs/s"
    # Two pauses, each through the real pause and go-on: 10 s worked,
    # paused 30 min, 20 s worked, paused 30 min, 30 s worked.
    _set(engine, operation_id, status="running", finished_at=None)
    for pause_at, go_on_at in ((10, 1810), (1830, 3630)):
        operation_record.pause(engine, operation_id, actor="dashboard:otto", now=started + timedelta(seconds=pause_at))
        operation_record.go_on(engine, operation_id, actor="dashboard:otto", now=started + timedelta(seconds=go_on_at))
        _set(engine, operation_id, status="running")
    _set(engine, operation_id, status="done", finished_at=started + timedelta(seconds=3660))
    # 600 runs in 60 working seconds.
    assert _shown(browser, operation_id)[0] == "10 runs/s"


def test_the_time_left_after_a_pause_is_at_the_working_rate(browser, runs, engine):
    operation_id = _operation(browser, runs, engine)
    now = utcnow()
    started = now - timedelta(hours=1, seconds=60)
    _set(engine, operation_id, status="running", started_at=started, total=1200, moved=600, skipped=0)
    operation_record.pause(engine, operation_id, actor="dashboard:otto", now=started + timedelta(seconds=30))
    operation_record.go_on(engine, operation_id, actor="dashboard:otto", now=now - timedelta(seconds=30))
    _set(engine, operation_id, status="running")
    # 600 left at 10 runs/s is a minute (a second more as the request
    # takes its time); counting the pause it said "1h 1m".
    assert _shown(browser, operation_id)[1] in ("1m", "1m 1s")


def test_while_paused_the_rate_stays_what_it_was_when_it_paused(browser, runs, engine):
    operation_id = _operation(browser, runs, engine)
    now = utcnow()
    started = now - timedelta(minutes=10)
    # 300 runs in the 30 s before the pause; paused since (nine and a half minutes).
    _set(
        engine,
        operation_id,
        status="paused",
        started_at=started,
        total=1200,
        moved=300,
        skipped=0,
        paused_at=started + timedelta(seconds=30),
        resumed_at=None,
    )
    rate, left = _shown(browser, operation_id)
    assert rate == "10 runs/s"
    assert left == "—"  # nothing is done while paused
