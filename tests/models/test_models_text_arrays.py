"""A list bound as an array reaches the server as the same array, whether
text_arrays' quick path writes it or psycopg's own dumper does."""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from psycopg.adapt import PyFormat
from psycopg.types.array import ListDumper

from pgbus_web.models import text_arrays

TEXTS = [
    ["a", "b-1", "2f0c1e2a-0000-4000-8000-000000000001"],
    ["", " ", "NULL", "null", "{x}", "a,b", "tab\there", "line\nbreak"],
    ['quote"d', "back\\slash", '\\"', 'both \\ and "'],
    ["a", None, "", None],
    [None],
    ["ünïcödé", "日本", "a"],
    ["%s", "%(x)s", ":name", "'single'"],
]
INTS = [[1, 2, 3], [0, -5, 2**62, 2**63 - 1], [1, None, 3]]


@pytest.mark.parametrize("value", TEXTS)
def test_a_text_list_round_trips(engine, value):
    with engine.connect() as conn:
        got = conn.execute(sa.text("SELECT CAST(:v AS text[])"), {"v": value}).scalar_one()
    assert got == value


@pytest.mark.parametrize("value", INTS)
def test_an_int_list_round_trips(engine, value):
    with engine.connect() as conn:
        got = conn.execute(sa.text("SELECT CAST(:v AS bigint[])"), {"v": value}).scalar_one()
    assert got == value


def test_unnest_of_the_arrays_keeps_each_element(engine):
    names = ["a", 'q"', "b\\", "", None, "c d"]
    with engine.connect() as conn:
        rows = conn.execute(
            sa.text(
                "SELECT m.label, m.n, m.i FROM unnest(CAST(:names AS text[]), CAST(:ids AS bigint[])) "
                "WITH ORDINALITY AS m(label, i, n) ORDER BY m.n"
            ),
            {"names": names, "ids": list(range(len(names)))},
        ).all()
    assert [row.label for row in rows] == names
    assert [row.i for row in rows] == list(range(len(names)))


def test_the_connections_use_it_and_it_writes_what_psycopg_would_mean(engine):
    with engine.connect() as conn:
        raw = conn.connection.dbapi_connection
        assert raw.adapters.get_dumper(list, PyFormat.TEXT) is text_arrays.TextListDumper
        assert raw.adapters.get_dumper(list, PyFormat.AUTO) is text_arrays.TextListDumper
    # The quick path is taken for plain ids and ints (the control that the
    # round trips above went through it, not only through psycopg's dumper).
    quick = text_arrays.TextListDumper(list)
    assert quick.dump(["a", "b"]) == b'{"a","b"}'
    assert quick.dump([1, 22]) == b"{1,22}"
    assert quick.dump(["a", None]) == b'{"a",NULL}'
    assert issubclass(text_arrays.TextListDumper, ListDumper)
