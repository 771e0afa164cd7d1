"""The Locks page's reads on real PostgreSQL with real PGMQ queues: each
state, counts, filters, keyset paging."""

from __future__ import annotations

from datetime import UTC, timedelta

import pytest
import sqlalchemy as sa
from support.lock_support import FLOOR, QUEUE, Locks

from pgbus_web.locks import FRESH, GONE, LIVE, ORPHAN, PARKED, STATES
from pgbus_web.locks.lock_seeder import seed_locks, split
from pgbus_web.models import uniqueness_keys as queries

OLD = FLOOR + timedelta(minutes=5)


def _list(engine, **kwargs):
    with engine.connect() as conn:
        return queries.list_locks(
            conn, age_floor=kwargs.pop("age_floor", FLOOR), limit=kwargs.pop("limit", 100), **kwargs
        )


def _counts(engine, **kwargs):
    with engine.connect() as conn:
        return queries.count_by_state(conn, age_floor=FLOOR, **kwargs)


def test_live_lock_shows_its_message(engine, locks):
    message = locks.live("live-1")
    locks.read()
    [row] = _list(engine).rows
    assert row["state"] == LIVE
    assert (row["queue_name"], row["msg_id"]) == (QUEUE, message["msg_id"])
    assert row["enqueued_at"] == message["enqueued_at"]
    assert row["read_ct"] == 1


def test_live_lock_stays_live_past_the_floor(locks):
    locks.live("old-live", age=OLD * 10)
    assert locks.states() == {"old-live": LIVE}


def test_lock_whose_message_was_deleted_is_gone(locks):
    locks.gone("gone-1")
    assert locks.states() == {"gone-1": GONE}


def test_lock_bound_to_a_queue_that_does_not_exist_is_gone(engine, locks):
    locks.queue()
    with engine.begin() as conn:
        conn.execute(
            sa.text("INSERT INTO pgbus_uniqueness_keys (lock_key, queue_name, msg_id) VALUES ('k', 'no_such_queue', 7)")
        )
    assert locks.states() == {"k": GONE}


def test_lock_bound_to_a_dropped_queue_is_gone(engine, locks):
    locks.live("k", "short_lived")
    with engine.begin() as conn:
        conn.execute(sa.text("SELECT pgmq.drop_queue('short_lived')"))
    assert locks.states() == {"k": GONE}


def test_queue_name_is_only_ever_a_bind(engine, locks):
    locks.queue()
    hostile = 'pgbus_default"; DROP TABLE pgbus_uniqueness_keys; --'
    with engine.begin() as conn:
        conn.execute(
            sa.text("INSERT INTO pgbus_uniqueness_keys (lock_key, queue_name, msg_id) VALUES ('k', :q, 1)"),
            {"q": hostile},
        )
    assert locks.states() == {"k": GONE}
    assert locks.row("k")["queue_name"] == hostile


@pytest.mark.parametrize("name", ['odd"name', "Mixed Case"])
def test_queue_tables_with_unusual_names_are_quoted(locks, name):
    locks.live("k", name)
    assert locks.states() == {"k": LIVE}


def test_a_real_queue_named_pending_is_bound_not_unbound(locks):
    locks.live("k", "pending", age=OLD)
    locks.acquire("unbound", age=OLD)
    assert locks.states() == {"k": LIVE, "unbound": ORPHAN}


@pytest.mark.parametrize("double_encoded", [False, True], ids=["object", "double-encoded"])
def test_parked_lock_shows_its_concurrency_key(engine, locks, double_encoded):
    locks.parked("p", age=OLD, concurrency_key="Sync/tenant-9", double_encoded=double_encoded)
    [row] = _list(engine).rows
    assert (row["state"], row["concurrency_key"]) == (PARKED, "Sync/tenant-9")


def test_a_parked_payload_for_another_key_does_not_park_this_one(locks):
    locks.acquire("mine", age=OLD)
    locks.park("someone-else")
    assert locks.states() == {"mine": ORPHAN}


def test_unbound_lock_is_fresh_within_the_floor_and_orphan_past_it(locks):
    locks.acquire("young", age=FLOOR - timedelta(minutes=1))
    locks.acquire("old", age=OLD)
    assert locks.states() == {"young": FRESH, "old": ORPHAN}


def test_the_floor_is_a_parameter(locks):
    locks.acquire("ten-minutes", age=timedelta(minutes=10))
    assert locks.states(age_floor=timedelta(minutes=5)) == {"ten-minutes": ORPHAN}
    assert locks.states(age_floor=timedelta(minutes=15)) == {"ten-minutes": FRESH}


def test_age_and_acquired_time_are_reported_in_utc(engine, locks):
    locks.acquire("k", age=timedelta(hours=3))
    [row] = _list(engine).rows
    assert row["created_at"].tzinfo == UTC
    assert abs(row["age_seconds"] - 3 * 3600) < 60


def _every_state(locks: Locks) -> None:
    locks.live("a-live")
    locks.live("b-live", "pgbus_mailers")
    locks.gone("c-gone")
    locks.parked("d-parked", age=OLD)
    locks.acquire("e-fresh")
    locks.acquire("f-orphan", age=OLD)
    locks.acquire("g-orphan", age=OLD * 2)


def test_counts_per_state(engine, locks):
    _every_state(locks)
    assert _counts(engine) == {LIVE: 2, GONE: 1, PARKED: 1, FRESH: 1, ORPHAN: 2}


def test_counts_per_state_in_one_queue(engine, locks):
    _every_state(locks)
    assert _counts(engine, queue="pgbus_mailers") == {LIVE: 1, GONE: 0, PARKED: 0, FRESH: 0, ORPHAN: 0}


def test_counts_with_no_queues_at_all(engine, locks):
    locks.acquire("k", age=OLD)
    assert _counts(engine) == {LIVE: 0, GONE: 0, PARKED: 0, FRESH: 0, ORPHAN: 1}


@pytest.mark.parametrize("state", STATES)
def test_state_filter_lists_only_that_state(engine, locks, state):
    _every_state(locks)
    rows = _list(engine, state=state).rows
    assert rows and {row["state"] for row in rows} == {state}
    assert len(rows) == _counts(engine)[state]


def test_queue_filter(engine, locks):
    _every_state(locks)
    assert [row["lock_key"] for row in _list(engine, queue="pgbus_mailers").rows] == ["b-live"]


def test_unknown_state_is_refused(engine):
    with pytest.raises(ValueError, match="not a lock state"):
        _list(engine, state="stale")


def test_keyset_pages_walk_every_lock_once_oldest_first(engine, locks):
    for index in range(7):
        locks.acquire(f"k{index}", age=timedelta(minutes=70 - index))
    # Two locks with the same stamp: the key breaks the tie.
    with engine.begin() as conn:
        conn.execute(
            sa.text(
                "UPDATE pgbus_uniqueness_keys SET created_at = (SELECT created_at FROM "
                "pgbus_uniqueness_keys WHERE lock_key = 'k3') WHERE lock_key = 'k4'"
            )
        )
    seen, cursor = [], None
    for _ in range(10):
        page = _list(engine, limit=3, after=cursor)
        seen += [row["lock_key"] for row in page.rows]
        cursor = page.next_cursor
        if cursor is None:
            break
    assert seen == ["k0", "k1", "k2", "k3", "k4", "k5", "k6"]


def test_last_page_has_no_cursor(engine, locks):
    locks.acquire("only")
    page = _list(engine, limit=1)
    assert [row["lock_key"] for row in page.rows] == ["only"] and page.next_cursor is None


def test_queue_counts(locks):
    _every_state(locks)
    with locks.engine.connect() as conn:
        assert queries.queue_counts(conn) == [("pending", 4), ("pgbus_default", 2), ("pgbus_mailers", 1)]


def test_seeder_makes_every_state(engine):
    made = seed_locks(engine, 60, seed=7)
    assert made == split(60) and all(made[state] > 0 for state in STATES)
    assert _counts(engine) == made


def test_seeder_refuses_a_negative_count(engine):
    with pytest.raises(ValueError):
        seed_locks(engine, -1)
