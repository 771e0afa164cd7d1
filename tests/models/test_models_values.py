"""models.values: the values PostgreSQL holds that Python cannot, loaded
and written back on our connections."""

from __future__ import annotations

import copy
import pickle
from datetime import UTC, datetime, timedelta, timezone

import pytest
import sqlalchemy as sa

from pgbus_web import db
from pgbus_web.models import values
from pgbus_web.models.values import INFINITY, MINUS_INFINITY, Infinite, RawJson

NOW = datetime(2026, 1, 5, 14, 5, tzinfo=UTC)


def test_infinities_order_as_postgresql_orders_them():
    assert MINUS_INFINITY < datetime.min.replace(tzinfo=UTC) < NOW < datetime.max.replace(tzinfo=UTC) < INFINITY
    assert sorted([INFINITY, NOW, MINUS_INFINITY]) == [MINUS_INFINITY, NOW, INFINITY]
    assert max([NOW, INFINITY]) is INFINITY and min([NOW, MINUS_INFINITY]) is MINUS_INFINITY
    assert NOW > MINUS_INFINITY and not NOW > INFINITY and NOW <= INFINITY


def test_an_infinity_equals_only_itself():
    assert INFINITY == Infinite.of(1) and INFINITY != MINUS_INFINITY
    assert INFINITY != datetime.max.replace(tzinfo=UTC)
    assert len({INFINITY, Infinite.of(1), MINUS_INFINITY}) == 2


def test_an_infinity_has_no_finite_distance_and_stays_where_it_is():
    assert INFINITY + timedelta(days=1) is INFINITY and MINUS_INFINITY - timedelta(days=1) is MINUS_INFINITY
    with pytest.raises(OverflowError):
        INFINITY - NOW
    with pytest.raises(OverflowError):
        NOW - MINUS_INFINITY
    assert INFINITY.timestamp() == float("inf")


def test_an_infinity_prints_and_converts_as_its_literal():
    assert (str(INFINITY), INFINITY.isoformat(), MINUS_INFINITY.literal) == ("infinity", "infinity", "-infinity")
    naive = INFINITY.replace(tzinfo=None)
    assert isinstance(naive, Infinite) and naive.tzinfo is None
    assert naive.replace(tzinfo=UTC) == INFINITY
    assert INFINITY.astimezone(timezone(timedelta(hours=5))) == INFINITY
    assert pickle.loads(pickle.dumps(MINUS_INFINITY)) == MINUS_INFINITY
    assert copy.deepcopy(INFINITY) is INFINITY


@pytest.mark.parametrize("text, expected", [
    (b'{"a": [1, 2.5]}', {"a": [1, 2.5]}),
    (b'"x"', "x"),
    (b"null", None),
])  # fmt: skip
def test_loads_reads_what_python_holds(text, expected):
    assert values.loads(text) == expected


@pytest.mark.parametrize(
    "text",
    [b"[" * 5000 + b"]" * 5000, b'{"n": 1' + b"0" * 5000 + b"}", b'{"n": 1e400}', b'{"n": 0.' + b"0" * 400 + b"1}"],
)
def test_loads_keeps_what_python_cannot_hold_as_raw_text(text):
    loaded = values.loads(text)
    assert isinstance(loaded, RawJson) and loaded == text.decode()


@pytest.mark.parametrize("value, problem", [
    ({"a": 1, "b": [1.5, "x"]}, None),
    ({"a": float("inf")}, values.NUMBER),
    ({"a": [float("nan")]}, values.NUMBER),
    ({"a": "x\x00"}, values.NUL),
    ({"\ud800": 1}, values.SURROGATE),
    ({"a": "\U0001f600"}, None),
])  # fmt: skip
def test_json_problem(value, problem):
    found = values.json_problem(value)
    assert (found[0] if found else None) == problem


def test_json_problem_answers_a_deep_value_without_recursing():
    value: list = []
    for _ in range(100_000):
        value = [value]
    assert values.json_problem(value) == (values.TOO_DEEP, "")


def test_our_connections_load_and_write_back_infinities_and_odd_json(engine):
    with engine.connect() as conn:
        row = conn.execute(
            sa.text(
                "SELECT CAST('infinity' AS timestamptz) a, CAST('-infinity' AS timestamp) b, "
                "CAST(:plus AS timestamptz) = 'infinity' c, CAST(:minus AS timestamp) = '-infinity' d, "
                "CAST('[[1e-400]]' AS jsonb) e, now() f"
            ),
            {"plus": INFINITY, "minus": MINUS_INFINITY.replace(tzinfo=None)},
        ).one()
    assert row.a == INFINITY and row.a.tzinfo is not None
    assert row.b == MINUS_INFINITY.replace(tzinfo=None) and row.b.tzinfo is None
    assert row.c is True and row.d is True
    assert isinstance(row.e, RawJson) and type(row.f) is datetime


def test_a_hosts_own_engine_is_adapted_by_the_database(database_url):
    import sqlalchemy

    plain = sqlalchemy.create_engine(db.normalize_url(database_url))
    try:
        with pytest.raises(sa.exc.DataError):
            with plain.connect() as conn:
                conn.execute(sa.text("SELECT CAST('infinity' AS timestamptz)")).scalar_one()
        database = db.Database(plain)
        with database.read() as conn:
            assert conn.execute(sa.text("SELECT CAST('infinity' AS timestamptz)")).scalar_one() == INFINITY
    finally:
        plain.dispose()
