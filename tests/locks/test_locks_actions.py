"""Lock actions and the reaper on real PostgreSQL with real PGMQ queues:
releasing, discarding a message, the retry hand-over, a successor that
re-acquired the key, every form a message's enqueued_at arrives in."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from support.lock_support import FLOOR, QUEUE

from pgbus_web.locks import FRESH, GONE, LIVE, PARKED, lock_acts
from pgbus_web.models import uniqueness_keys

OLD = FLOOR + timedelta(minutes=5)


# -- release one lock ------------------------------------------------------


def test_release_drops_the_lock_whatever_its_state(engine, locks):
    locks.live("k")
    with engine.begin() as conn:
        before = lock_acts.release_lock(conn, "k")
    assert before["lock_key"] == "k" and locks.row("k") is None


def test_release_of_an_unknown_key_changes_nothing(engine, locks):
    locks.acquire("k", age=OLD)
    before = locks.snapshot()
    with pytest.raises(lock_acts.LockNotFound, match="no lock with key 'nope'"):
        with engine.begin() as conn:
            lock_acts.release_lock(conn, "nope")
    assert locks.snapshot() == before


# -- discard a message -----------------------------------------------------


def test_discard_deletes_the_message_and_releases_its_lock(engine, locks):
    message = locks.live("k")
    with engine.begin() as conn:
        done = lock_acts.discard_message(conn, "k", queue_name=QUEUE, msg_id=message["msg_id"])
    assert done.lock_released is True
    assert locks.row("k") is None
    assert locks.message(QUEUE, message["msg_id"]) is None


def test_discard_leaves_a_lock_handed_to_the_retry(engine, locks):
    attempt = locks.live("k")
    with engine.begin() as conn:
        stamp = uniqueness_keys.unbind(
            conn,
            "k",
            from_queue_name=QUEUE,
            from_msg_id=attempt["msg_id"],
            from_enqueued_at=attempt["enqueued_at"],
            queue_name=QUEUE,
        )
    assert stamp is not None
    with engine.begin() as conn:
        done = lock_acts.discard_message(conn, "k", queue_name=QUEUE, msg_id=attempt["msg_id"])
    assert done.lock_released is False
    assert locks.message(QUEUE, attempt["msg_id"]) is None
    assert locks.row("k")["created_at"] == stamp


def test_discard_leaves_a_successor_that_re_acquired_the_key(engine, locks):
    first = locks.live("k")
    with engine.begin() as conn:
        uniqueness_keys.release(conn, "k")  # the first job's lock went (say, by hand)
    successor = locks.live("k")
    with engine.begin() as conn:
        done = lock_acts.discard_message(conn, "k", queue_name=QUEUE, msg_id=first["msg_id"])
    assert done.lock_released is False
    assert locks.row("k")["msg_id"] == successor["msg_id"]
    assert locks.states() == {"k": LIVE}


@pytest.mark.parametrize(
    "lock_key, queue_name, msg_id, error",
    [
        ("nope", QUEUE, None, lock_acts.LockNotFound),
        ("k", "no_such_queue", None, lock_acts.QueueNotFound),
        ("k", QUEUE, 999_999, lock_acts.MessageNotFound),
        ("k", QUEUE, 0, lock_acts.LockActionError),
        ("k", QUEUE, -3, lock_acts.LockActionError),
        ("k", QUEUE, "1", lock_acts.LockActionError),
        ("k", QUEUE, True, lock_acts.LockActionError),
    ],
)
def test_discard_with_bad_input_changes_nothing(engine, locks, lock_key, queue_name, msg_id, error):
    message = locks.live("k")
    before = locks.snapshot()
    with pytest.raises(error):
        with engine.begin() as conn:
            lock_acts.discard_message(
                conn, lock_key, queue_name=queue_name, msg_id=message["msg_id"] if msg_id is None else msg_id
            )
    assert locks.snapshot() == before


# -- the retry hand-over and successors, through the model ------------------


def test_retry_hand_over_keeps_the_lock_for_the_retry(engine, locks):
    attempt = locks.live("k")
    with engine.begin() as conn:
        stamp = uniqueness_keys.unbind(
            conn,
            "k",
            from_queue_name=QUEUE,
            from_msg_id=attempt["msg_id"],
            from_enqueued_at=attempt["enqueued_at"],
            queue_name=QUEUE,
        )
    assert locks.states() == {"k": FRESH}
    retry = locks.send()
    with engine.begin() as conn:
        assert uniqueness_keys.bind(conn, "k", queue_name=QUEUE, msg_id=retry["msg_id"], acquired_at=stamp) == 1
        # The attempt finishes after its retry was bound: its release leaves the retry's row.
        assert (
            uniqueness_keys.release_held_by(
                conn, "k", queue_name=QUEUE, msg_id=attempt["msg_id"], enqueued_at=attempt["enqueued_at"]
            )
            == 0
        )
    assert locks.row("k")["msg_id"] == retry["msg_id"]
    assert locks.states() == {"k": LIVE}


def test_attempt_release_before_the_retry_binds_leaves_the_unbound_row(engine, locks):
    attempt = locks.live("k")
    with engine.begin() as conn:
        stamp = uniqueness_keys.unbind(
            conn,
            "k",
            from_queue_name=QUEUE,
            from_msg_id=attempt["msg_id"],
            from_enqueued_at=attempt["enqueued_at"],
            queue_name=QUEUE,
        )
        assert (
            uniqueness_keys.release_held_by(
                conn, "k", queue_name=QUEUE, msg_id=attempt["msg_id"], enqueued_at=attempt["enqueued_at"]
            )
            == 0
        )
    retry = locks.send()
    with engine.begin() as conn:
        assert uniqueness_keys.bind(conn, "k", queue_name=QUEUE, msg_id=retry["msg_id"], acquired_at=stamp) == 1


def test_a_finished_jobs_late_release_leaves_its_successor(engine, locks):
    first = locks.live("k")
    with engine.begin() as conn:
        assert (
            uniqueness_keys.release_held_by(
                conn, "k", queue_name=QUEUE, msg_id=first["msg_id"], enqueued_at=first["enqueued_at"]
            )
            == 1
        )
    locks.acquire("k")  # the successor, unbound, acquired after the first was sent
    with engine.begin() as conn:
        assert (
            uniqueness_keys.release_held_by(
                conn, "k", queue_name=QUEUE, msg_id=first["msg_id"], enqueued_at=first["enqueued_at"]
            )
            == 0
        )
    assert locks.row("k") is not None


def _forms(enqueued_at: datetime):
    plus_two = timezone(timedelta(hours=2))
    return {
        "string with offset": enqueued_at.astimezone(plus_two).isoformat(),
        "aware datetime": enqueued_at,
        "naive UTC datetime": enqueued_at.astimezone(UTC).replace(tzinfo=None),
        "epoch seconds": enqueued_at.timestamp(),
    }


@pytest.mark.parametrize("form", ["string with offset", "aware datetime", "naive UTC datetime", "epoch seconds"])
def test_release_held_by_counts_an_unbound_row_acquired_before_the_send(engine, locks, form):
    # A bind that never happened: the row stays unbound, acquired before its message.
    locks.acquire("k", age=timedelta(seconds=5))
    message = locks.send()
    enqueued_at = _forms(message["enqueued_at"])[form]
    with engine.begin() as conn:
        released = uniqueness_keys.release_held_by(
            conn, "k", queue_name=QUEUE, msg_id=message["msg_id"], enqueued_at=enqueued_at
        )
    assert released == 1 and locks.row("k") is None


@pytest.mark.parametrize("form", ["string with offset", "aware datetime", "naive UTC datetime", "epoch seconds"])
def test_release_held_by_leaves_an_unbound_row_acquired_after_the_send(engine, locks, form):
    message = locks.send()
    locks.acquire("k")  # a successor's, taken after the message went out
    enqueued_at = _forms(message["enqueued_at"])[form]
    with engine.begin() as conn:
        released = uniqueness_keys.release_held_by(
            conn, "k", queue_name=QUEUE, msg_id=message["msg_id"], enqueued_at=enqueued_at
        )
    assert released == 0 and locks.row("k") is not None


def test_release_held_by_without_a_send_time_takes_only_the_bound_row(engine, locks):
    locks.acquire("unbound", age=timedelta(seconds=5))
    bound = locks.live("bound")
    message = locks.send()
    with engine.begin() as conn:
        assert (
            uniqueness_keys.release_held_by(
                conn, "unbound", queue_name=QUEUE, msg_id=message["msg_id"], enqueued_at=None
            )
            == 0
        )
        assert (
            uniqueness_keys.release_held_by(conn, "bound", queue_name=QUEUE, msg_id=bound["msg_id"], enqueued_at=None)
            == 1
        )
    assert locks.row("unbound") is not None and locks.row("bound") is None


# -- the reaper -------------------------------------------------------------


def _scene(locks):
    locks.live("live-old", age=OLD)
    locks.gone("gone-old", age=OLD)
    locks.gone("gone-young")
    locks.parked("parked-object", age=OLD)
    locks.parked("parked-string", age=OLD, double_encoded=True)
    locks.acquire("fresh")
    locks.acquire("orphan-1", age=OLD)
    locks.acquire("orphan-2", age=OLD * 3)


def test_reap_takes_orphans_and_gone_locks_past_the_floor_only(engine, locks):
    _scene(locks)
    with engine.begin() as conn:
        result = lock_acts.reap(conn, age_floor=FLOOR)
    assert result.released == 3 and result.kept == 0
    assert {row["lock_key"] for row in result.plan.orphans} == {"orphan-1", "orphan-2"}
    assert [row["lock_key"] for row in result.plan.gone] == ["gone-old"]
    assert result.plan.parked == 2
    assert locks.states() == {
        "live-old": LIVE,
        "gone-young": GONE,
        "parked-object": PARKED,
        "parked-string": PARKED,
        "fresh": FRESH,
    }


def test_reap_dry_run_changes_nothing(engine, locks):
    _scene(locks)
    before = locks.snapshot()
    with engine.begin() as conn:
        result = lock_acts.reap(conn, age_floor=FLOOR, dry_run=True)
    assert (result.released, result.plan.total) == (0, 3)
    assert locks.snapshot() == before


def test_reap_keeps_locks_that_moved_on_after_the_plan(engine, locks):
    locks.acquire("re-acquired", age=OLD)
    locks.acquire("bound-since", age=OLD)
    locks.gone("rebound", age=OLD)
    with engine.begin() as conn:
        plan = lock_acts.plan_reap(conn, age_floor=FLOOR)
    assert plan.total == 3
    # Between the plan and the release: a successor takes one key, a job
    # binds another, and the gone row's key is bound to a new message.
    with engine.begin() as conn:
        uniqueness_keys.release(conn, "re-acquired")
    locks.acquire("re-acquired")
    message = locks.send()
    with engine.begin() as conn:
        uniqueness_keys.bind(conn, "bound-since", queue_name=QUEUE, msg_id=message["msg_id"])
        uniqueness_keys.release(conn, "rebound")
    locks.live("rebound")
    with engine.begin() as conn:
        assert lock_acts.release_planned(conn, plan) == 0
    assert locks.states() == {"re-acquired": FRESH, "bound-since": LIVE, "rebound": LIVE}


def test_reap_releases_in_slices_of_a_thousand(engine, locks):
    import sqlalchemy as sa

    with engine.begin() as conn:
        conn.execute(
            sa.text(
                "INSERT INTO pgbus_uniqueness_keys (lock_key, queue_name, msg_id, created_at) "
                "SELECT 'k' || g, 'pending', 0, LOCALTIMESTAMP - interval '2 hours' FROM generate_series(1, 2500) AS g"
            )
        )
    statements = []

    def count(conn, cursor, statement, *args):
        if statement.lstrip().startswith("DELETE FROM pgbus_uniqueness_keys"):
            statements.append(statement)

    sa.event.listen(engine, "before_cursor_execute", count)
    try:
        with engine.begin() as conn:
            assert lock_acts.reap(conn, age_floor=FLOOR).released == 2500
    finally:
        sa.event.remove(engine, "before_cursor_execute", count)
    assert len(statements) == 3


@pytest.mark.parametrize("floor", [timedelta(0), timedelta(seconds=-1), 3600])
def test_reap_refuses_a_floor_that_is_not_a_positive_duration(engine, locks, floor):
    locks.acquire("k", age=OLD)
    before = locks.snapshot()
    with pytest.raises(ValueError, match="positive duration"):
        with engine.begin() as conn:
            lock_acts.reap(conn, age_floor=floor)
    assert locks.snapshot() == before
