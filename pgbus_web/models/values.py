"""Values PostgreSQL can hold that Python cannot, and how they are loaded.

Another writer (pgbus itself, a migration, a person with psql) can leave a
row the dashboard would never write: a timestamp at ``infinity`` or
``-infinity``, an ``arguments`` that is a JSON array, JSON nested deeper
than Python's parser recurses or holding a number a float cannot hold.
psycopg refuses the infinite timestamps (they are past datetime's range)
and Python's ``json`` refuses the rest, and a refusal while a row is read
would take down the whole page, or a verb that reads the run.

So every connection of ours loads them as values that stand for what was
stored (``install`` adds the loaders to an engine's connections):

- ``Infinite``: a timestamp at ±infinity. A datetime, so that comparisons,
  sorting and ``min``/``max`` work as PostgreSQL's do (infinity is after
  every moment, -infinity before); it prints as ``infinity`` and is written
  back as ``infinity``, so a read-modify-write keeps it. It has no finite
  distance to anything: subtracting a moment raises OverflowError, and
  shifting it by a timedelta leaves it where it is.
- ``RawJson``: JSON text Python could not read into values, kept as the
  text PostgreSQL gave (a ``str``).

What shows such a value, and how it is marked, is the pages' business
(``web.odd``); what a form may store is ``json_problem``'s.
"""

from __future__ import annotations

import json
import math
import re
from datetime import UTC, datetime, timedelta, tzinfo
from typing import Any, SupportsIndex

import sqlalchemy as sa
from psycopg import adapt, postgres
from psycopg.abc import AdaptContext, Buffer, DumperKey
from psycopg.adapt import PyFormat
from psycopg.types import json as pg_json
from sqlalchemy.engine import Engine

from . import text_arrays

TIMESTAMPTZ_OID = postgres.types["timestamptz"].oid
TIMESTAMP_OID = postgres.types["timestamp"].oid

_PLUS, _MINUS = b"infinity", b"-infinity"


class Infinite(datetime):
    """``infinity`` (sign 1) or ``-infinity`` (sign -1), as a datetime at
    the edge of Python's calendar. Aware (UTC) for timestamptz, naive for
    timestamp without time zone, as psycopg loads the finite ones."""

    @classmethod
    def of(cls, sign: int, tz: tzinfo | None = UTC) -> Infinite:
        edge = datetime.max if sign > 0 else datetime.min
        return cls(edge.year, edge.month, edge.day, edge.hour, edge.minute, edge.second, edge.microsecond, tzinfo=tz)

    @property
    def sign(self) -> int:
        # From the value, not an attribute: datetime's C methods build new
        # instances of the subclass from the fields alone.
        return 1 if self.year == datetime.max.year else -1

    @property
    def literal(self) -> str:
        return "infinity" if self.sign > 0 else "-infinity"

    def __str__(self) -> str:
        return self.literal

    def __repr__(self) -> str:
        return f"Infinite({self.literal!r}{'' if self.tzinfo else ', naive'})"

    def isoformat(self, *args: Any, **kwargs: Any) -> str:
        return self.literal

    def timestamp(self) -> float:
        return math.inf * self.sign

    def astimezone(self, tz: tzinfo | None = None) -> Infinite:
        return Infinite.of(self.sign, tz or UTC)

    def replace(self, *args: Any, **kwargs: Any) -> Infinite:
        # Only the zone may change: infinity has no fields to set.
        return Infinite.of(self.sign, kwargs.get("tzinfo", self.tzinfo))

    def __add__(self, other: object) -> Any:
        if isinstance(other, timedelta):
            return self
        return NotImplemented

    __radd__ = __add__

    def __sub__(self, other: object) -> Any:
        if isinstance(other, timedelta):
            return self
        if isinstance(other, datetime):
            raise OverflowError(f"{self.literal} has no finite distance to {other}")
        return NotImplemented

    def __rsub__(self, other: object) -> Any:
        if isinstance(other, datetime):
            raise OverflowError(f"{other} has no finite distance to {self.literal}")
        return NotImplemented

    # Ordered as PostgreSQL orders them; equal only to the same infinity
    # (not to the last finite microsecond datetime can hold).
    def __eq__(self, other: object) -> bool:
        if isinstance(other, Infinite):
            return self.sign == other.sign
        if isinstance(other, datetime):
            return False
        return NotImplemented

    def __ne__(self, other: object) -> bool:
        result = self.__eq__(other)
        return result if result is NotImplemented else not result

    def __hash__(self) -> int:
        return hash(("pgbus-infinite", self.sign))

    def _compare(self, other: object) -> int | None:
        if isinstance(other, Infinite):
            return (self.sign > other.sign) - (self.sign < other.sign)
        if isinstance(other, datetime):
            return self.sign
        return None

    def __lt__(self, other: object) -> bool:
        order = self._compare(other)
        return NotImplemented if order is None else order < 0

    def __le__(self, other: object) -> bool:
        order = self._compare(other)
        return NotImplemented if order is None else order <= 0

    def __gt__(self, other: object) -> bool:
        order = self._compare(other)
        return NotImplemented if order is None else order > 0

    def __ge__(self, other: object) -> bool:
        order = self._compare(other)
        return NotImplemented if order is None else order >= 0

    def __reduce__(self) -> tuple[Any, ...]:
        return (Infinite.of, (self.sign, self.tzinfo))

    def __reduce_ex__(self, protocol: SupportsIndex) -> tuple[Any, ...]:
        return self.__reduce__()

    def __copy__(self) -> Infinite:
        return self

    def __deepcopy__(self, memo: Any) -> Infinite:
        return self


INFINITY = Infinite.of(1)
MINUS_INFINITY = Infinite.of(-1)


def is_infinite(value: Any) -> bool:
    return isinstance(value, Infinite)


class RawJson(str):
    """JSON PostgreSQL holds that Python's parser refused (nested deeper
    than it recurses, a number past a float's range, an integer longer than
    Python converts): the text as stored, for the page to show."""

    def __repr__(self) -> str:
        return f"RawJson({str.__repr__(self)[:60]})"


class _NumberOutOfRange(ValueError):
    pass


def _finite_float(text: str) -> float:
    # jsonb holds any decimal; a float does not: past its range it would
    # read as inf, below it as 0, and the page would show a number that
    # is not the one stored.
    value = float(text)
    if math.isinf(value) or (value == 0 and any(digit in "123456789" for digit in text.split("e")[0].split("E")[0])):
        raise _NumberOutOfRange(text)
    return value


def loads(data: Any) -> Any:
    """JSON as psycopg hands it over (bytes or str) as Python values, or as
    RawJson when Python cannot hold them faithfully."""
    text = bytes(data).decode("utf-8") if not isinstance(data, str) else data
    try:
        return json.loads(text, parse_float=_finite_float)
    except (RecursionError, ValueError):
        return RawJson(text)


# --- loaders and dumpers on our connections ----------------------------------


def _infinite_loader(base: type[adapt.Loader], tz: tzinfo | None) -> type[adapt.Loader]:
    """A loader for timestamptz (or timestamp) text that reads ±infinity as
    Infinite and hands every other value to psycopg's own loader *base*."""

    class InfiniteLoader(adapt.Loader):
        # Marks our loader, so that a connection is given it once.
        pgbus_infinite = True

        def __init__(self, oid: int, context: AdaptContext | None = None):
            super().__init__(oid, context)
            self._finite = base(oid, context)

        def load(self, data: Buffer) -> Any:
            if data == _PLUS:
                return Infinite.of(1, tz)
            if data == _MINUS:
                return Infinite.of(-1, tz)
            return self._finite.load(data)

    InfiniteLoader.__qualname__ = f"InfiniteLoader[{base.__name__}]"
    return InfiniteLoader


class InfiniteDumper(adapt.Dumper):
    """Writes an Infinite back as the literal it was read from."""

    oid = TIMESTAMPTZ_OID

    def get_key(self, obj: Any, format: PyFormat) -> DumperKey:
        return self.cls if obj.tzinfo else (self.cls,)

    def upgrade(self, obj: Any, format: PyFormat) -> adapt.Dumper:
        return self if obj.tzinfo else _NaiveInfiniteDumper(self.cls)

    def dump(self, obj: Infinite) -> Buffer:
        return obj.literal.encode()


class _NaiveInfiniteDumper(InfiniteDumper):
    oid = TIMESTAMP_OID


def adapt_connection(dbapi_connection: Any) -> None:
    """Give one psycopg connection the loaders and the dumpers (once; the
    lists' dumper is text_arrays', for speed)."""
    adapters = dbapi_connection.adapters
    current = adapters.get_loader(TIMESTAMPTZ_OID, adapt.pq.Format.TEXT)
    if getattr(current, "pgbus_infinite", False):
        return
    for oid, tz in ((TIMESTAMPTZ_OID, UTC), (TIMESTAMP_OID, None)):
        base = adapters.get_loader(oid, adapt.pq.Format.TEXT)
        loader = _infinite_loader(base, tz)
        adapters.register_loader(oid, loader)
    adapters.register_dumper(Infinite, InfiniteDumper)
    text_arrays.register(adapters)
    pg_json.set_json_loads(loads, dbapi_connection)


def _on_checkout(dbapi_connection: Any, connection_record: Any, connection_proxy: Any) -> None:
    adapt_connection(dbapi_connection)


def install(engine: Engine) -> Engine:
    """Every connection *engine* hands out loads odd values as above. At
    checkout rather than connect, so an engine a host made (and may have
    used) before handing it over is covered too."""
    if not sa.event.contains(engine, "checkout", _on_checkout):
        sa.event.listen(engine, "checkout", _on_checkout)
    return engine


def json_kind(value: Any) -> str:
    """What kind of JSON value *value* is, in JSON's words: object, array,
    string, number, boolean or null."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, (list, tuple)):
        return "array"
    return "object"


# --- what a form or a caller may store ---------------------------------------

# Why a value cannot go into a jsonb column as it is.
NUL = "nul"  # a \u0000: PostgreSQL's text cannot hold it
SURROGATE = "surrogate"  # a lone UTF-16 surrogate: not Unicode text
NUMBER = "number"  # NaN or ±Infinity: not JSON, jsonb refuses it
TOO_DEEP = "too_deep"  # nested deeper than MAX_JSON_DEPTH

# Deeper than this is refused: Python's own parser and encoder stop near a
# thousand levels, and no signal or argument needs more.
MAX_JSON_DEPTH = 500


def json_problem(value: Any) -> tuple[str, str] | None:
    """(problem, the offending piece) when *value* cannot be stored in a
    jsonb column exactly as it is, else None. Walked without recursion, so
    a deep value is answered, not crashed on."""
    stack = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if depth > MAX_JSON_DEPTH:
            return TOO_DEEP, ""
        if isinstance(item, str):
            problem = _text_problem(item)
            if problem:
                return problem
        elif isinstance(item, float):
            if not math.isfinite(item):
                return NUMBER, repr(item)
        elif isinstance(item, dict):
            for key, child in item.items():
                stack.append((key, depth + 1))
                stack.append((child, depth + 1))
        elif isinstance(item, (list, tuple)):
            stack.extend((child, depth + 1) for child in item)
    return None


_SURROGATE = re.compile("[\ud800-\udfff]")


def _text_problem(text: str) -> tuple[str, str] | None:
    if "\x00" in text:
        return NUL, "\\u0000"
    found = _SURROGATE.search(text)
    if found:
        return SURROGATE, f"\\u{ord(found.group()):04x}"
    return None
