"""pgbus_uniqueness_keys and pgbus_blocked_executions: which lock row a
message holds, the hand-over to a retry, bulk releases, the send-time
literal, and the keys parked jobs carry."""

from __future__ import annotations

import json
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta, timezone

import pytest
import sqlalchemy as sa

from pgbus_web.models import blocked_executions, values
from pgbus_web.models import uniqueness_keys as locks

UTC = UTC
# Lock rows store a timestamp without time zone, in UTC.
T0 = datetime(2026, 1, 2, 1, 0, 0)


def put(conn, lock_key, *, queue_name="pending", msg_id=0, created_at=T0):
    conn.execute(
        sa.text(
            "INSERT INTO pgbus_uniqueness_keys (lock_key, queue_name, msg_id, created_at) "
            "VALUES (:lock_key, :queue_name, :msg_id, :created_at)"
        ),
        {"lock_key": lock_key, "queue_name": queue_name, "msg_id": msg_id, "created_at": created_at},
    )


def keys(conn):
    return set(conn.execute(sa.text("SELECT lock_key FROM pgbus_uniqueness_keys")).scalars())


def sent(naive_utc):
    """A PGMQ-style enqueued_at string (with its offset) for a naive UTC time."""
    return naive_utc.replace(tzinfo=UTC).isoformat()


@contextmanager
def counting_statements(engine, verb, table):
    """Collects the statements starting with *verb* that name *table*, sent
    while the block runs."""
    seen = []

    def before(conn, cursor, statement, parameters, context, executemany):
        if statement.lstrip().upper().startswith(verb) and table in statement:
            seen.append(statement)

    sa.event.listen(engine, "before_cursor_execute", before)
    try:
        yield seen
    finally:
        sa.event.remove(engine, "before_cursor_execute", before)


# --- acquire and bind ---------------------------------------------------------


def test_acquire_takes_an_unbound_lock_once(engine):
    with engine.begin() as conn:
        stamp = locks.acquire(conn, "order:1042")
        assert isinstance(stamp, datetime) and stamp.tzinfo is None
        assert locks.find(conn, "order:1042") == {
            "lock_key": "order:1042",
            "queue_name": "pending",
            "msg_id": 0,
            "created_at": stamp,
        }
    with engine.begin() as conn:
        assert locks.acquire(conn, "order:1042", queue_name="orders") is None
        assert locks.find(conn, "order:1042")["created_at"] == stamp


def test_acquire_stamps_in_utc(engine):
    with engine.begin() as conn:
        stamp = locks.acquire(conn, "k", queue_name="orders")
    assert abs(stamp.replace(tzinfo=UTC) - datetime.now(UTC)) < timedelta(minutes=1)


def test_bind_with_the_acquire_stamp_points_the_row_at_its_message(engine):
    with engine.begin() as conn:
        stamp = locks.acquire(conn, "k")
    with engine.begin() as conn:
        assert locks.bind(conn, "k", queue_name="orders", msg_id=17, acquired_at=stamp) == 1
        assert locks.find(conn, "k") == {"lock_key": "k", "queue_name": "orders", "msg_id": 17, "created_at": stamp}
        # Bound: a second bind finds no unbound row.
        assert locks.bind(conn, "k", queue_name="orders", msg_id=18, acquired_at=stamp) == 0
        assert locks.find(conn, "k")["msg_id"] == 17


def test_bind_with_another_stamp_leaves_a_successors_row_alone(engine):
    # The finished job acquired at T0; the row now is a successor's, acquired later.
    with engine.begin() as conn:
        put(conn, "k", created_at=T0 + timedelta(seconds=5))
        assert locks.bind(conn, "k", queue_name="orders", msg_id=17, acquired_at=T0) == 0
        assert locks.find(conn, "k") == {
            "lock_key": "k",
            "queue_name": "pending",
            "msg_id": 0,
            "created_at": T0 + timedelta(seconds=5),
        }
        assert locks.bind(conn, "k", queue_name="orders", msg_id=21, acquired_at=T0 + timedelta(seconds=5)) == 1
        assert locks.find(conn, "k")["msg_id"] == 21


def test_bind_without_a_stamp_takes_any_unbound_row(engine):
    with engine.begin() as conn:
        put(conn, "k")
        assert locks.bind(conn, "k", queue_name="orders", msg_id=3) == 1
        assert locks.find(conn, "k") == {"lock_key": "k", "queue_name": "orders", "msg_id": 3, "created_at": T0}


def test_release_drops_the_lock_whoever_holds_it(engine):
    with engine.begin() as conn:
        put(conn, "k", queue_name="orders", msg_id=9)
        assert locks.release(conn, "k") == 1
        assert locks.release(conn, "k") == 0
        assert keys(conn) == set()


# --- release_held_by ----------------------------------------------------------

SEND = T0 + timedelta(minutes=1)  # when the finishing message was sent


@pytest.mark.parametrize(
    "row, released",
    [
        pytest.param({"queue_name": "orders", "msg_id": 5}, True, id="bound-to-the-message"),
        pytest.param({"queue_name": "orders", "msg_id": 6}, False, id="bound-to-another-message"),
        pytest.param({"queue_name": "refunds", "msg_id": 5}, False, id="same-msg-id-other-queue"),
        pytest.param({"created_at": T0}, True, id="unbound-acquired-before-the-send"),
        pytest.param({"created_at": SEND}, True, id="unbound-acquired-at-the-send"),
        pytest.param({"created_at": SEND + timedelta(seconds=1)}, False, id="unbound-successor"),
        pytest.param({"queue_name": "orders", "created_at": T0}, True, id="unbound-on-the-target-queue"),
    ],
)
def test_release_held_by(engine, row, released):
    with engine.begin() as conn:
        put(conn, "k", **row)
        count = locks.release_held_by(conn, "k", queue_name="orders", msg_id=5, enqueued_at=sent(SEND))
        assert count == int(released)
        assert keys(conn) == (set() if released else {"k"})


def test_without_a_send_time_only_the_bound_row_goes(engine):
    with engine.begin() as conn:
        put(conn, "bound", queue_name="orders", msg_id=5)
        put(conn, "unbound", created_at=datetime(1970, 1, 1))
        assert locks.release_held_by(conn, "bound", queue_name="orders", msg_id=5, enqueued_at=None) == 1
        assert locks.release_held_by(conn, "unbound", queue_name="orders", msg_id=5, enqueued_at=None) == 0
        assert keys(conn) == {"unbound"}


def test_a_lock_bound_in_a_queue_named_pending_is_bound(engine):
    # "pending" is the placeholder queue, but a real queue may carry the name.
    with engine.begin() as conn:
        put(conn, "k", queue_name="pending", msg_id=7)
        later = sent(SEND + timedelta(days=1))
        assert locks.release_held_by(conn, "k", queue_name="pending", msg_id=8, enqueued_at=later) == 0
        assert locks.release_held_by(conn, "k", queue_name="pending", msg_id=7, enqueued_at=later) == 1


def test_a_bool_send_time_is_refused_and_nothing_changes(engine):
    with engine.begin() as conn:
        put(conn, "k")
        with pytest.raises(TypeError):
            locks.release_held_by(conn, "k", queue_name="orders", msg_id=5, enqueued_at=True)
        assert keys(conn) == {"k"}


# --- unbind: the hand-over to a retry -------------------------------------------


@pytest.fixture
def attempt(engine):
    """A running attempt's lock: bound to orders/5, sent an hour ago."""
    sent_at = datetime.now(UTC).replace(tzinfo=None) - timedelta(hours=1)
    with engine.begin() as conn:
        put(conn, "k", queue_name="orders", msg_id=5, created_at=sent_at - timedelta(seconds=1))
    return {"from_queue_name": "orders", "from_msg_id": 5, "from_enqueued_at": sent(sent_at)}


def hand_over(engine, attempt):
    with engine.begin() as conn:
        return locks.unbind(conn, "k", **attempt, queue_name="orders_retry")


def release_attempt(engine, attempt):
    with engine.begin() as conn:
        return locks.release_held_by(
            conn,
            "k",
            queue_name=attempt["from_queue_name"],
            msg_id=attempt["from_msg_id"],
            enqueued_at=attempt["from_enqueued_at"],
        )


def test_unbind_leaves_the_row_unbound_on_the_retrys_queue_stamped_now(engine, attempt):
    stamp = hand_over(engine, attempt)
    assert abs(stamp.replace(tzinfo=UTC) - datetime.now(UTC)) < timedelta(minutes=1)
    with engine.connect() as conn:
        assert locks.find(conn, "k") == {
            "lock_key": "k",
            "queue_name": "orders_retry",
            "msg_id": 0,
            "created_at": stamp,
        }


def test_after_unbind_the_attempts_release_leaves_the_retrys_row(engine, attempt):
    stamp = hand_over(engine, attempt)
    assert release_attempt(engine, attempt) == 0
    with engine.begin() as conn:
        assert locks.bind(conn, "k", queue_name="orders_retry", msg_id=6, acquired_at=stamp) == 1
    # The attempt's late release still leaves the (now bound) retry's row.
    assert release_attempt(engine, attempt) == 0
    with engine.begin() as conn:
        assert locks.release_held_by(conn, "k", queue_name="orders_retry", msg_id=6, enqueued_at=datetime.now(UTC)) == 1
        assert keys(conn) == set()


def test_a_retry_that_finishes_before_its_bind_releases_the_handed_row(engine, attempt):
    hand_over(engine, attempt)
    assert release_attempt(engine, attempt) == 0
    with engine.begin() as conn:
        # The retry was sent after the hand-over; msg 6 never got bound.
        assert (
            locks.release_held_by(
                conn, "k", queue_name="orders_retry", msg_id=6, enqueued_at=datetime.now(UTC) + timedelta(seconds=1)
            )
            == 1
        )


def test_unbind_by_an_attempt_that_no_longer_holds_the_key_changes_nothing(engine, attempt):
    with engine.begin() as conn:
        assert (
            locks.unbind(
                conn, "k", from_queue_name="orders", from_msg_id=99, from_enqueued_at=None, queue_name="orders_retry"
            )
            is None
        )
        assert locks.find(conn, "k")["msg_id"] == 5


# --- release_all_held_by ------------------------------------------------------


@pytest.mark.parametrize("holders, statements", [(0, 0), (1000, 1), (1001, 2), (2500, 3)])
def test_release_all_held_by_sends_one_statement_per_thousand(engine, holders, statements):
    with engine.begin() as conn:
        conn.execute(
            sa.text(
                "INSERT INTO pgbus_uniqueness_keys (lock_key, queue_name, msg_id, created_at) "
                "SELECT 'k' || i, 'orders', i, :at FROM generate_series(1, :n) AS i"
            ),
            {"n": holders, "at": T0},
        )
        put(conn, "someone-else", queue_name="orders", msg_id=10**9)
    batch = [(f"k{i}", "orders", i, sent(SEND)) for i in range(1, holders + 1)]
    with counting_statements(engine, "DELETE", "pgbus_uniqueness_keys") as seen, engine.begin() as conn:
        assert locks.release_all_held_by(conn, batch) == holders
    assert len(seen) == statements
    with engine.connect() as conn:
        assert keys(conn) == {"someone-else"}


def test_release_all_held_by_follows_the_held_by_rules_per_holder(engine):
    with engine.begin() as conn:
        put(conn, "bound", queue_name="orders", msg_id=5)
        put(conn, "bound-elsewhere", queue_name="orders", msg_id=6)
        put(conn, "unbound-before", created_at=T0)
        put(conn, "successor", created_at=SEND + timedelta(seconds=1))
        put(conn, "unbound-unknown-send", created_at=datetime(1970, 1, 1))
    holders = [
        ("bound", "orders", 5, None),
        ("bound-elsewhere", "orders", 5, sent(SEND)),
        ("unbound-before", "orders", 7, SEND.replace(tzinfo=UTC)),
        ("successor", "orders", 8, sent(SEND)),
        ("unbound-unknown-send", "orders", 9, None),
    ]
    with engine.begin() as conn:
        assert locks.release_all_held_by(conn, iter(holders)) == 2
        assert keys(conn) == {"bound-elsewhere", "successor", "unbound-unknown-send"}


# --- sent_at_literal ----------------------------------------------------------


@pytest.mark.parametrize(
    "enqueued_at, literal",
    [
        pytest.param("2026-01-02 03:04:05.123456+02", "2026-01-02 03:04:05.123456+02", id="string-kept"),
        pytest.param(
            datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone(timedelta(hours=2))),
            "2026-01-02T03:04:05.000000+02:00",
            id="aware-datetime",
        ),
        pytest.param(datetime(2026, 1, 2, 1, 4, 5), "2026-01-02T01:04:05.000000+00:00", id="naive-is-utc"),
        pytest.param(0, "1970-01-01T00:00:00.000000+00:00", id="epoch-int"),
        pytest.param(1.5, "1970-01-01T00:00:01.500000+00:00", id="epoch-float"),
        pytest.param(None, "-infinity", id="unknown"),
    ],
)
def test_sent_at_literal(enqueued_at, literal):
    assert locks.sent_at_literal(enqueued_at) == literal


def test_sent_at_literal_refuses_a_bool():
    with pytest.raises(TypeError, match="not a bool"):
        locks.sent_at_literal(False)


# One instant, 01:04:05 UTC, in each form a caller may hold it.
SAME_INSTANT = [
    pytest.param("2026-01-02 03:04:05+02", id="string-with-offset"),
    pytest.param(datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone(timedelta(hours=2))), id="aware-datetime"),
    pytest.param(datetime(2026, 1, 2, 1, 4, 5), id="naive-datetime"),
    pytest.param(datetime(2026, 1, 2, 1, 4, 5, tzinfo=UTC).timestamp(), id="epoch-seconds"),
]


@pytest.mark.parametrize("enqueued_at", SAME_INSTANT)
def test_each_form_of_the_send_time_compares_as_the_same_instant(engine, enqueued_at):
    with engine.begin() as conn:
        put(conn, "before", created_at=datetime(2026, 1, 2, 1, 4, 4))
        put(conn, "after", created_at=datetime(2026, 1, 2, 1, 4, 6))
        for key in ("before", "after"):
            locks.release_held_by(conn, key, queue_name="orders", msg_id=1, enqueued_at=enqueued_at)
        # Read in the wrong zone, 03:04 would have taken "after" too.
        assert keys(conn) == {"after"}


def test_minus_infinity_compares_in_sql_without_being_loaded(engine):
    with engine.connect() as conn:
        literal = locks.sent_at_literal(None)
        assert (
            conn.execute(
                sa.text("SELECT CAST(:sent_at AS timestamptz) < CAST('0001-01-01 00:00:00+00' AS timestamptz)"),
                {"sent_at": literal},
            ).scalar_one()
            is True
        )
        # Read back, our connections load it as models.values' -infinity.
        assert (
            conn.execute(sa.text("SELECT CAST(:sent_at AS timestamptz)"), {"sent_at": literal}).scalar_one()
            == values.MINUS_INFINITY
        )


# --- parked_uniqueness_keys ---------------------------------------------------


def park(conn, payload_sql, payload):
    conn.execute(
        sa.text(
            "INSERT INTO pgbus_blocked_executions (concurrency_key, queue_name, payload) "
            f"VALUES ('ck', 'orders', {payload_sql})"
        ),
        {"payload": payload},
    )


def test_parked_uniqueness_keys_reads_objects_and_double_encoded_strings(engine):
    with engine.begin() as conn:
        park(conn, "CAST(:payload AS jsonb)", json.dumps({"pgbus_uniqueness_key": "object-key", "job": "A"}))
        park(conn, "CAST(:payload AS jsonb)", json.dumps({"pgbus_uniqueness_key": "object-key", "job": "B"}))
        # Double encoded: the column holds a JSON string whose text is the object.
        park(conn, "to_jsonb(CAST(:payload AS text))", json.dumps({"pgbus_uniqueness_key": "string-key"}))
        park(conn, "CAST(:payload AS jsonb)", json.dumps({"job": "no key"}))
        park(conn, "CAST(:payload AS jsonb)", json.dumps({"pgbus_uniqueness_key": "not-asked"}))
        assert (
            conn.execute(
                sa.text("SELECT count(*) FROM pgbus_blocked_executions WHERE jsonb_typeof(payload) = 'string'")
            ).scalar_one()
            == 1
        )

        found = blocked_executions.parked_uniqueness_keys(conn, ["object-key", "string-key", "free-key", "object-key"])
    assert found == {"object-key", "string-key"}


def test_a_double_encoded_payload_that_is_not_json_has_no_key(engine):
    with engine.begin() as conn:
        park(conn, "to_jsonb(CAST(:payload AS text))", '{"pgbus_uniqueness_key": "broken')
        park(conn, "to_jsonb(CAST(:payload AS text))", json.dumps({"pgbus_uniqueness_key": "good-key"}))
        found = blocked_executions.parked_uniqueness_keys(conn, ["broken", "good-key"])
    assert found == {"good-key"}


def test_parked_uniqueness_keys_of_no_keys_asks_nothing(engine):
    with counting_statements(engine, "SELECT", "pgbus_blocked_executions") as seen, engine.connect() as conn:
        assert blocked_executions.parked_uniqueness_keys(conn, []) == set()
    assert seen == []
