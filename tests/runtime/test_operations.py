"""Operations over the real database: the preview says exactly what will
happen, the counts add up, the ceiling keeps later runs out, and no run is
acted on twice: not by two operations at once, not racing single-run
verbs, not after a process running one is killed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from datetime import timedelta

import pytest
import sqlalchemy as sa
from support.action_support import ago, paused_on_capture, ready_later
from support.operation_support import THRESHOLDS, create, query, wait_for_the_dead
from support.waiting import wait_until
from support.web_helpers import step

from pgbus_web import defaults
from pgbus_web.demo.workflows import REGISTRY
from pgbus_web.models import operation_rows
from pgbus_web.rules import run_filters as filters
from pgbus_web.rules import states
from pgbus_web.runtime import errors, operation_preview, operation_record, operation_runner, verbs
from pgbus_web.runtime.clock import utcnow
from pgbus_web.schema import TABLES


def everything(engine):
    with engine.connect() as conn:
        return {
            table: sorted(tuple(map(repr, row)) for row in conn.execute(sa.text(f"SELECT * FROM {table}")))
            for table in TABLES
        }


def finish(engine, runner=None, **kwargs):
    runner = runner or operation_runner.Runner(engine, REGISTRY, **kwargs)
    for _ in range(10_000):
        if runner.step() is None:
            break
    with engine.connect() as conn:
        return operation_rows.recent(conn)


def events_of(engine, event, operation_id=None):
    """workflow_id of each *event* row (with that operation_id when given)."""
    condition = "AND details ->> 'operation_id' = :op" if operation_id is not None else ""
    with engine.connect() as conn:
        return [
            row[0]
            for row in conn.execute(
                sa.text(f"SELECT workflow_id FROM pgbus_workflow_events WHERE event = :event {condition} ORDER BY id"),
                {"event": event, "op": str(operation_id)},
            )
        ]


def statuses(engine, ids):
    with engine.connect() as conn:
        rows = conn.execute(
            sa.text("SELECT workflow_id, status FROM pgbus_workflows WHERE workflow_id = ANY(:ids)"), {"ids": list(ids)}
        )
        return dict(rows.all())


# --- preview --------------------------------------------------------------------


def test_preview_counts_by_status_and_says_why_it_skips(engine, runs):
    paused = [paused_on_capture(runs) for _ in range(3)]
    [ready_later(runs) for _ in range(2)]
    runs.make(states.COMPLETED, step("send_receipt", "completed"), finished_at=ago(minutes=1))
    # A class this process has no definition of: resume cannot plan it.
    runs.make(
        states.PAUSED,
        step("charge", "failed", error_class="Boom"),
        workflow_class="GhostWorkflow",
        paused_at=ago(minutes=3),
        subject=False,
    )
    runs.make(
        states.PAUSED, step("x", "failed"), workflow_class="OnboardingWorkflow", paused_at=ago(minutes=3), subject=False
    )

    shown = operation_preview.preview(
        engine, query(workflow_class="OrderWorkflow"), "resume", registry=REGISTRY, thresholds=THRESHOLDS
    )
    assert shown.total == 6
    assert shown.by_status == {states.READY: 2, states.PAUSED: 3, states.COMPLETED: 1}
    assert shown.fits == 3 and shown.skipped == 3
    assert {(s["status"], s["count"]) for s in shown.skips} == {(states.READY, 2), (states.COMPLETED, 1)}
    assert {run["workflow_id"] for run in shown.sample} >= set(paused) and len(shown.sample) == 6

    everyone = operation_preview.preview(
        engine, query(status="paused"), "resume", registry=REGISTRY, thresholds=THRESHOLDS
    )
    assert everyone.total == 5 and everyone.fits == 4
    assert everyone.skips == [{"why": "class_not_loaded", "workflow_class": "GhostWorkflow", "count": 1}]
    # Control: a verb that needs no definition fits the ghost too.
    cancel = operation_preview.preview(
        engine, query(status="paused"), "cancel", registry=REGISTRY, thresholds=THRESHOLDS
    )
    assert cancel.fits == 5 and cancel.skips == []


def test_preview_matches_the_index_for_the_same_filters(engine, runs):
    for _ in range(4):
        paused_on_capture(runs)
    runs.make(states.PAUSED, step("reserve_stock", "completed"), paused_at=ago(minutes=1))  # paused_manual
    shown = operation_preview.preview(
        engine, query(reason="paused_error"), "skip", registry=REGISTRY, thresholds=THRESHOLDS
    )
    from pgbus_web.models import workflow_index

    with engine.connect() as conn:
        listed = workflow_index.page(conn, limit=100, **THRESHOLDS, **query(reason="paused_error").page_binds(utcnow()))
    assert shown.total == len(listed) == 4


# --- doing it -------------------------------------------------------------------


def test_an_operation_moves_each_fitting_run_once_and_the_counts_add_up(engine, runs):
    paused = [paused_on_capture(runs) for _ in range(7)]
    ready = ready_later(runs)
    operation = create(engine, workflow_class="OrderWorkflow")
    assert operation["status"] == "queued" and operation["total"] == 8

    [done] = finish(engine, chunk=3)
    assert done["status"] == "done"
    assert (done["moved"], done["skipped"], done["refused"]) == (7, 1, 0)
    assert done["moved"] + done["skipped"] + done["refused"] == done["total"]
    assert sorted(events_of(engine, "resumed", done["id"])) == sorted(paused)
    assert statuses(engine, paused + [ready]) == {**{wid: states.READY for wid in paused}, ready: states.READY}
    with engine.connect() as conn:
        reasons = conn.execute(
            sa.text("SELECT DISTINCT reason, actor FROM pgbus_workflow_events WHERE details ? 'operation_id'")
        ).all()
    assert reasons == [("gateway back", "dashboard:alice")]


def test_the_ceiling_keeps_runs_created_after_the_preview_out(engine, runs):
    before = [paused_on_capture(runs) for _ in range(3)]
    operation = create(engine, status="paused")
    later = paused_on_capture(runs)
    [done] = finish(engine)
    assert done["moved"] == 3
    assert sorted(events_of(engine, "resumed", operation["id"])) == sorted(before)
    assert statuses(engine, [later]) == {later: states.PAUSED}


def test_runs_that_moved_on_before_their_turn_are_skipped(engine, runs):
    paused = [paused_on_capture(runs) for _ in range(4)]
    operation = create(engine, status="paused", expected=4)
    verbs.resume(engine, paused[1], registry=REGISTRY, reason="by hand")
    verbs.cancel(engine, paused[2], reason="by hand")
    [done] = finish(engine)
    assert (done["moved"], done["skipped"], done["refused"], done["total"]) == (2, 2, 0, 4)
    assert sorted(events_of(engine, "resumed", operation["id"])) == sorted([paused[0], paused[3]])


def test_refused_runs_are_counted_apart(engine, runs):
    # rerun from a step the definition does not have: refused, not moved.
    done_runs = [
        runs.make(states.COMPLETED, step("send_receipt", "completed"), finished_at=ago(minutes=1)) for _ in range(2)
    ]
    create(engine, "rerun", params={"from_step": "no_such_step"}, status="completed")
    [done] = finish(engine)
    assert (done["moved"], done["skipped"], done["refused"]) == (0, 0, 2)
    assert statuses(engine, done_runs) == {wid: states.COMPLETED for wid in done_runs}


def test_a_signal_operation_uses_a_key_per_operation_and_run(engine, runs):
    waiting = runs.make(
        states.WAITING, step("await_shipment", "waiting", wait_for="shipment_confirmed", waiting_since=ago(hours=1))
    )
    operation = create(engine, "signal", params={"name": "shipment_confirmed", "payload": '{"n": 1}'}, status="waiting")
    [done] = finish(engine)
    assert done["moved"] == 1
    with engine.connect() as conn:
        keys = conn.execute(sa.text("SELECT idempotency_key FROM pgbus_workflow_signals")).scalars().all()
    assert keys == [operation_runner.signal_key(operation["id"], waiting)]
    assert statuses(engine, [waiting]) == {waiting: states.READY}
    # The run's audit trail says why, as every other verb's does.
    with engine.connect() as conn:
        said = conn.execute(
            sa.text(
                "SELECT reason, actor FROM pgbus_workflow_events WHERE event = 'signal_received' AND workflow_id = :w"
            ),
            {"w": waiting},
        ).all()
    assert [tuple(row) for row in said] == [("gateway back", "dashboard:alice")]


def test_cancel_stops_it_and_keeps_the_chunk_in_hand_counted(engine, runs):
    for _ in range(6):
        paused_on_capture(runs)
    operation = create(engine, status="paused")
    runner = operation_runner.Runner(engine, REGISTRY, chunk=2)
    first = runner.step()
    assert first.moved == 2 and first.status == "running"
    operation_record.cancel(engine, operation["id"])
    assert runner.step() is not None  # the chunk in hand
    assert runner.step() is None  # nothing more: it is cancelled
    with engine.connect() as conn:
        now = operation_rows.find(conn, operation["id"])
    assert now["status"] == "cancelled" and now["moved"] == len(events_of(engine, "resumed", operation["id"])) == 4
    with pytest.raises(operation_record.NotCancellable):
        operation_record.cancel(engine, operation["id"])


# --- refusals write nothing ----------------------------------------------------------


@pytest.mark.parametrize(
    "verb, params, reason, expected, filter_values, refusal",
    [
        ("explode", None, "r", None, {}, errors.UnknownVerb),
        ("resume", None, "  ", None, {}, operation_record.ReasonMissing),
        ("resume_at", {"at": "2001-01-01T00:00:00+00:00"}, "r", None, {}, errors.InvalidTime),
        ("signal", {"name": "s", "payload": "[1, 2]"}, "r", None, {}, errors.InvalidPayload),
        ("signal", {"name": " "}, "r", None, {}, errors.InvalidSignalName),
        ("rerun", None, "r", None, {"status": "paused"}, operation_record.NothingFits),
        ("resume", None, "r", 99, {"status": "paused"}, operation_record.CountChanged),
    ],
)
def test_bad_input_is_refused_and_writes_nothing(engine, runs, verb, params, reason, expected, filter_values, refusal):
    paused_on_capture(runs)
    before = everything(engine)
    with pytest.raises(refusal) as caught:
        create(engine, verb, expected=expected, reason=reason, params=params, **filter_values)
    assert everything(engine) == before
    if refusal is operation_record.CountChanged:
        assert caught.value.preview.total == 1  # the fresh preview comes back
    # Control: the same filter with a good verb, reason and count is accepted.
    create(engine, "resume", expected=1, reason="ok", status="paused")
    assert everything(engine) != before


def test_an_index_filter_the_index_refuses_is_refused_here_too():
    with pytest.raises(filters.FilterError):
        query(status="sleeping")


# --- races ---------------------------------------------------------------------------


def test_two_operations_and_single_verbs_racing_move_each_run_once(engine, runs):
    paused = [paused_on_capture(runs) for _ in range(60)]
    first = create(engine, status="paused")
    second = create(engine, workflow_class="OrderWorkflow")
    failures = []

    def run_operation(operation_id):
        try:
            runner = operation_runner.Runner(engine, REGISTRY, chunk=7)
            while runner.step(operation_id) is not None:
                pass
        except Exception as problem:  # noqa: BLE001
            failures.append(problem)

    def by_hand():
        for workflow_id in reversed(paused):
            try:
                verbs.resume(engine, workflow_id, registry=REGISTRY, reason="by hand")
            except errors.WrongStatus:
                pass

    threads = [
        threading.Thread(target=run_operation, args=(first["id"],)),
        threading.Thread(target=run_operation, args=(second["id"],)),
        threading.Thread(target=by_hand),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not failures
    resumed = events_of(engine, "resumed")
    assert sorted(resumed) == sorted(paused)  # each run resumed exactly once, by someone
    with engine.connect() as conn:
        a, b = operation_rows.find(conn, first["id"]), operation_rows.find(conn, second["id"])
    assert a["status"] == b["status"] == "done"
    assert a["moved"] == len(events_of(engine, "resumed", a["id"]))
    assert b["moved"] == len(events_of(engine, "resumed", b["id"]))
    assert a["moved"] + a["skipped"] + a["refused"] == a["total"] == 60
    assert b["moved"] + b["skipped"] + b["refused"] == b["total"] == 60


# --- crashes ----------------------------------------------------------------------------


def test_an_abandoned_operation_is_taken_over_and_nothing_is_done_twice(engine, runs):
    paused = [paused_on_capture(runs) for _ in range(10)]
    operation = create(engine, status="paused")
    crashed = operation_runner.Runner(engine, REGISTRY, chunk=4)
    assert crashed.step().moved == 4  # committed: cursor past run 4
    # The crash: runs 5 and 6 acted on in their own transactions, the
    # chunk's progress never written. They are no longer paused, so the
    # filter alone would not find them again.
    for workflow_id in paused[4:6]:
        verbs.resume(
            engine,
            workflow_id,
            registry=REGISTRY,
            reason="gateway back",
            actor="dashboard:alice",
            operation_id=operation["id"],
        )
    # Not stale yet: nobody else takes it.
    assert operation_runner.Runner(engine, REGISTRY).step() is None
    later = utcnow() + timedelta(minutes=5)
    taker = operation_runner.Runner(engine, REGISTRY, chunk=4, clock=lambda: later)
    finish(engine, taker)
    with engine.connect() as conn:
        done = operation_rows.find(conn, operation["id"])
    assert sorted(events_of(engine, "resumed")) == sorted(paused)
    assert (done["status"], done["moved"], done["skipped"], done["refused"]) == ("done", 10, 0, 0)
    # The first process, back from the dead, writes nothing: its fence is gone.
    assert crashed.step() is not None and crashed.held is None
    with engine.connect() as conn:
        assert operation_rows.find(conn, operation["id"]) == done


@pytest.mark.parametrize("filter_values", [{"status": "paused"}, {"workflow_class": "OrderWorkflow"}])
def test_runs_a_stale_holder_acts_on_after_the_takeover_are_counted_once(engine, runs, filter_values):
    # The race behind a kill -9 run once ending ('done', 367, 33, 0): the
    # process that lost the operation is not dead yet (or its last COMMITs
    # are still in flight) and acts on runs of its chunk *after* the taker
    # claimed it. Those runs no longer match the filter, so no walk finds
    # them again (status=paused); or they still match and the verb no
    # longer fits them (the class alone). Either way they are counted as
    # moved, once, never as skipped.
    paused = [paused_on_capture(runs) for _ in range(10)]
    operation = create(engine, **filter_values)
    slow = operation_runner.Runner(engine, REGISTRY, chunk=4)
    assert slow.step().moved == 4
    later = utcnow() + timedelta(minutes=5)
    taker = operation_runner.Runner(engine, REGISTRY, chunk=2, clock=lambda: later)
    assert taker.claim() is not None
    # The slow holder's chunk in hand lands now, after the claim.
    for workflow_id in paused[4:8]:
        verbs.resume(
            engine,
            workflow_id,
            registry=REGISTRY,
            reason="gateway back",
            actor="dashboard:alice",
            operation_id=operation["id"],
        )
    finish(engine, taker)
    with engine.connect() as conn:
        done = operation_rows.find(conn, operation["id"])
    assert sorted(events_of(engine, "resumed")) == sorted(paused)  # control: each resumed once
    assert (done["status"], done["moved"], done["skipped"], done["refused"]) == ("done", 10, 0, 0)


CHILD = """
import sys
from pgbus_web import db, defaults
from pgbus_web.demo.workflows import REGISTRY
from pgbus_web.runtime import operation_runner
engine = db.create_engine(sys.argv[1])
runner = operation_runner.Runner(engine, REGISTRY, chunk=50)
print("claimed", flush=True)
while runner.step() is not None:
    pass
"""


@pytest.mark.scale
@pytest.mark.parametrize("verb, event", [("resume", "resumed"), ("cancel", "cancelled")])
def test_kill_minus_nine_mid_chunk_then_takeover_finishes_without_doing_anything_twice(engine, runs, verb, event):
    # Both do a chunk in one transaction (chunk_resume, chunks/halt; the
    # per-run path's kill: test_operations_chunk_verbs.py): the kill lands
    # inside a chunk's one transaction (its progress is its last statement)
    # or between chunks. The taker's chunks do not line up with the dead process's,
    # and a COMMIT the dead process sent may land after the takeover.
    paused = [paused_on_capture(runs) for _ in range(400)]
    operation = create(engine, verb, status="paused")
    url = engine.url.render_as_string(hide_password=False)
    child = subprocess.Popen([sys.executable, "-c", CHILD, url], stdout=subprocess.PIPE)
    try:
        wait_until(
            lambda: (
                len(events_of(engine, event, operation["id"])) >= 75
            ),  # inside the second chunk of 50, or just past it
            timeout=120,
            every=0.005,
            what="the child inside its second chunk",
        )
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait(10)
    wait_for_the_dead(engine, operation["id"])
    with engine.connect() as conn:
        killed = operation_rows.find(conn, operation["id"])
    acted = len(events_of(engine, event, operation["id"]))
    assert killed["status"] == "running" and 75 <= acted < 400
    # Taken over once the setting's time has passed since its last heartbeat, not before.
    early = killed["heartbeat_at"] + operation_runner.STALE_AFTER - timedelta(seconds=1)
    assert operation_runner.Runner(engine, REGISTRY, clock=lambda: early).claim() is None
    later = killed["heartbeat_at"] + operation_runner.STALE_AFTER + timedelta(seconds=1)
    finish(engine, operation_runner.Runner(engine, REGISTRY, chunk=7, clock=lambda: later))
    with engine.connect() as conn:
        done = operation_rows.find(conn, operation["id"])
    assert sorted(events_of(engine, event)) == sorted(paused)  # each run once
    assert (done["status"], done["moved"], done["skipped"], done["refused"]) == ("done", 400, 0, 0)


def test_the_index_lists_the_runs_an_operation_touched(engine, runs, client):
    from support.web_helpers import soup

    touched = [paused_on_capture(runs) for _ in range(3)]
    untouched = ready_later(runs)
    operation = create(engine, status="paused")
    finish(engine)
    page = client.get(f"/workflows?operation={operation['id']}")
    assert page.status_code == 200
    text = page.get_data(as_text=True)
    assert all(workflow_id[:8] in text for workflow_id in touched)
    assert untouched[:8] not in text
    chips = [chip.get_text(" ", strip=True) for chip in soup(page).select(".pgbus-chip, .pgbus-filter-chip")]
    assert any(str(operation["id"]) in chip for chip in chips) or f"#{operation['id']}" in text or "Operation" in text
    # Control: another operation's id lists nothing of these.
    other = client.get(f"/workflows?operation={operation['id'] + 1}").get_data(as_text=True)
    assert not any(workflow_id[:8] in other for workflow_id in touched)
    assert client.get("/workflows?operation=abc").status_code == 400


def test_a_dead_holder_is_taken_over_after_the_setting_and_a_live_one_keeps_its_heartbeat(engine, runs):
    # The default is well under a minute; a holder renews its heartbeat
    # every third of it while a chunk lasts, so only a dead one goes stale.
    assert operation_runner.STALE_AFTER == defaults.OPERATION_STALE_AFTER <= timedelta(seconds=15)
    for _ in range(3):
        paused_on_capture(runs)
    operation = create(engine, status="paused")
    stale_after = timedelta(seconds=0.6)
    live = operation_runner.Runner(engine, REGISTRY, stale_after=stale_after)
    assert live.claim() is not None
    first_fence = live.held.fence
    beat = operation_runner._Beat(live, live.held)  # what step() runs while a chunk is in hand
    try:
        # The time is the behaviour: the holder stays alive past stale_after only by its renewals.
        time.sleep(stale_after.total_seconds() * 2.5)
        assert operation_runner.Runner(engine, REGISTRY, stale_after=stale_after).claim() is None  # renewed: alive
    finally:
        beat.stop()
    assert live.held.fence > first_fence
    # Its next fenced write holds: the renewals moved the fence it names.
    assert live.step() is not None and live.held is not None
    # Dead (no more steps, no renewals): taken over once the setting passed.
    taker = operation_runner.Runner(engine, REGISTRY, stale_after=stale_after)
    assert taker.claim() is None
    claimed = wait_until(taker.claim, timeout=60, what="the takeover's claim once the holder is stale")
    assert claimed["id"] == operation["id"]
    finish(engine, taker)
    with engine.connect() as conn:
        done = operation_rows.find(conn, operation["id"])
    assert (done["status"], done["moved"]) == ("done", 3)
    assert sorted(events_of(engine, "resumed")) == sorted(events_of(engine, "resumed", operation["id"]))
    assert len(events_of(engine, "resumed")) == 3  # each once


def test_operation_stale_after_is_a_setting_in_seconds_or_a_timedelta_above_zero():
    from pgbus_web.core.settings import SettingError, Settings, check

    assert check(Settings(operation_stale_after=5), ("en",)).operation_stale_after == timedelta(seconds=5)
    assert Settings().operation_stale_after == operation_runner.STALE_AFTER == timedelta(seconds=15)
    for wrong in (0, -1, "15s", None):
        with pytest.raises(SettingError, match="operation_stale_after"):
            check(Settings(operation_stale_after=wrong), ("en",))
    # The serving process's thread takes over after it.
    background = operation_runner.Background(None, stale_after=timedelta(seconds=3))
    assert background.runner.stale_after == timedelta(seconds=3)


def test_a_reason_past_the_limit_is_cut_with_an_ellipsis_as_the_audit_trail_cuts_it(engine, runs):
    # The doors refuse a longer reason; a runtime caller's is cut, one way
    # for the operation and its runs' events (rules.limits.REASON_LIMIT).
    from pgbus_web.models.text import ELLIPSIS
    from pgbus_web.rules.limits import REASON_LIMIT

    paused_on_capture(runs)
    cut = create(engine, verb="cancel", reason="x" * (REASON_LIMIT + 1), status="paused")
    assert cut["reason"] == "x" * (REASON_LIMIT - 1) + ELLIPSIS
    # The control: a reason of the limit's length is kept whole.
    whole = create(engine, verb="cancel", reason="y" * REASON_LIMIT, status="paused")
    assert whole["reason"] == "y" * REASON_LIMIT
