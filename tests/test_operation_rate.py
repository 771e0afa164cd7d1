"""The rate and time left an operation's page shows count its working
time only (docs/operations.md, "The million-run trial"): paused half-way
for an hour, an operation that did 600 runs in 60 working seconds says
10 runs/s, not 600 over the hour and a minute since it started."""

from __future__ import annotations

from datetime import timedelta

from action_support import paused_on_capture
from sqlalchemy import text
from test_operations_web import PAUSED, URL, ask, operations_of
from web_helpers import soup, text_of

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


def test_a_pause_is_not_counted_in_the_rate(browser, runs, engine):
    operation_id = _operation(browser, runs, engine)
    started = utcnow() - timedelta(hours=2)
    finished = started + timedelta(hours=1, seconds=60)
    # Control: no pause, 600 runs in 3,660 s is 0.16 runs/s (shown 0.2).
    _set(engine, operation_id, status="done", started_at=started, finished_at=finished, total=600, moved=600,
         skipped=0)
    assert _shown(browser, operation_id)[0] == "0.2 runs/s"
    # Worked 30 s, paused an hour, went on for 30 s more: 600 runs in 60 s.
    _set(engine, operation_id, paused_at=started + timedelta(seconds=30),
         resumed_at=started + timedelta(hours=1, seconds=30))
    assert _shown(browser, operation_id)[0] == "10 runs/s"


def test_the_time_left_after_a_pause_is_at_the_working_rate(browser, runs, engine):
    operation_id = _operation(browser, runs, engine)
    now = utcnow()
    started = now - timedelta(hours=1, seconds=60)
    _set(engine, operation_id, status="running", started_at=started, total=1200, moved=600, skipped=0,
         paused_at=started + timedelta(seconds=30), resumed_at=now - timedelta(seconds=30))
    # 600 left at 10 runs/s is a minute (a second more as the request
    # takes its time); counting the pause it said "1h 1m".
    assert _shown(browser, operation_id)[1] in ("1m", "1m 1s")


def test_while_paused_the_rate_stays_what_it_was_when_it_paused(browser, runs, engine):
    operation_id = _operation(browser, runs, engine)
    now = utcnow()
    started = now - timedelta(minutes=10)
    # 300 runs in the 30 s before the pause; paused since (nine and a half minutes).
    _set(engine, operation_id, status="paused", started_at=started, total=1200, moved=300, skipped=0,
         paused_at=started + timedelta(seconds=30), resumed_at=None)
    rate, left = _shown(browser, operation_id)
    assert rate == "10 runs/s"
    assert left == "—"  # nothing is done while paused
