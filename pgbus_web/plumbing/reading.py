"""Where a request reads, and read-your-writes across a replica
(docs/replica.md).

Every read of a request goes where ``route()`` says, decided once per
request (db.Database.route): the replica while it is within
``replica_max_lag`` and has replayed past this browser's last write; the
primary otherwise. Its last write is a WAL position:

- after a successful POST to the pages or the API (status below 400:
  something was done), the primary's WAL position read after the commit
  (models/replication.written) goes into the ``pgbus_read_after`` cookie (signed, HttpOnly,
  scoped to the dashboard's prefix, like the CSRF cookie) and into the
  answer's ``Pgbus-Written-Lsn`` header;
- a request that carries the cookie, or a ``Pgbus-Read-After`` header
  with such a position (an API client, a second process), reads the
  primary until the replica has replayed past it; the first read from the
  replica after that deletes the cookie.

Without a replica nothing is read, set or deleted.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

from flask import Response, g, request
from itsdangerous import BadSignature, URLSafeTimedSerializer
from sqlalchemy.engine import Connection

from .. import db
from ..models.replication import lsn_int, lsn_text
from . import csrf
from .security import UNSAFE_METHODS
from .state import state

log = logging.getLogger(__name__)

COOKIE_NAME = "pgbus_read_after"
# Sent by a client that wrote through another door or process.
REQUEST_HEADER = "Pgbus-Read-After"
# On every successful write's answer, when there is a replica.
WRITTEN_HEADER = "Pgbus-Written-Lsn"
SALT = "pgbus-web.read-after"
# A pin older than this is dropped: a replica an hour behind is read
# around anyway (it is past any sane replica_max_lag).
MAX_AGE = 60 * 60


def _serializer() -> URLSafeTimedSerializer:
    return URLSafeTimedSerializer(csrf._secret(), salt=SALT)


def _from_cookie() -> int | None:
    sent = request.cookies.get(COOKIE_NAME)
    if not sent:
        return None
    try:
        value = _serializer().loads(sent, max_age=MAX_AGE)
    except BadSignature:  # a forged, stale or foreign value: no pin
        return None
    return lsn_int(value)


def after() -> int | None:
    """This request's last write (an LSN as an int), the later of the
    cookie's and the header's; None for none."""
    positions = [
        position for position in (_from_cookie(), lsn_int(request.headers.get(REQUEST_HEADER))) if position is not None
    ]
    return max(positions) if positions else None


def route() -> db.Route:
    """Where this request reads (the same for all its reads)."""
    found = g.get("_pgbus_route")
    if found is None:
        database = state().database
        found = database.route(after() if database.replica is not None else None)
        g._pgbus_route = found
    return found


@contextmanager
def read() -> Iterator[Connection]:
    """A connection where this request reads."""
    with state().database.read(route()) as conn:
        yield conn


def note() -> dict | None:
    """What the page says about where it read: None while it reads the
    replica, or the primary for this browser's own write only; else the
    reason (lagging, unreachable, not_standby) and the seconds behind."""
    found = g.get("_pgbus_route")
    if found is None or found.reason in (None, "pinned"):
        return None
    return {"reason": found.reason, "lag": None if found.lag is None else int(found.lag)}


def _wrote() -> bool:
    return request.method in UNSAFE_METHODS


def after_request(response: Response) -> Response:
    """Pin this browser after its write; unpin it once the replica has it."""
    database = state().database
    if database.replica is None:
        return response
    if _wrote():
        if response.status_code < 400:
            try:
                position = database.written()
            except db.UNREACHABLE as problem:
                # Done, but where it ended is unknown: the answer stands.
                log.warning("pgbus-web: could not read the primary's WAL position: %s", problem)
                return response
            text = lsn_text(position)
            response.headers[WRITTEN_HEADER] = text
            response.set_cookie(
                COOKIE_NAME,
                _serializer().dumps(text),
                max_age=MAX_AGE,
                httponly=True,
                samesite="Lax",
                secure=request.is_secure,
                path=csrf.cookie_path(),
            )
        return response
    found = g.get("_pgbus_route")
    if found is not None and found.released and request.cookies.get(COOKIE_NAME):
        response.delete_cookie(
            COOKIE_NAME, path=csrf.cookie_path(), httponly=True, samesite="Lax", secure=request.is_secure
        )
    return response


def source_marker() -> str:
    """Where this request reads, for a poll's ETag: the source and the
    write it waits for."""
    found = route()
    return f"{found.source}:{found.after or ''}"


# What the templates call (template_names.py gives them).
TEMPLATE_NAMES = {"pgbus_read_note": note}
