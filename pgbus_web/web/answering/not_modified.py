"""Answering an unchanged live-refresh poll with ``304 Not Modified``.

A poll's ETag is a digest of what its fragments depend on:
- the change marker (models/changes.py, read once a request through web/answering/markers.py), which grows with
  every committed write to the runs, steps, events, signals and batches,
  and in the same statement which workers are alive and which gone: a
  worker falling silent writes nothing, and the index flags it at once;
- the time, to the TIME_BUCKET: relative times ("5 minutes ago") and the
  stuck thresholds move with the clock alone, so at least once a bucket a
  poll is answered in full; between, an unchanged page may show a relative
  time or a needs-attention count up to a bucket late;
- the request: its path and query, the fragments it names (HX-Target), the
  locale and time zone it is drawn in, whether it may view and act (the
  buttons), the browser's CSRF value (its forms' tokens);
- the process: a restart (new templates, definitions, settings) draws anew;
- where it was read (plumbing/reading.py): the primary or the replica, and
  the browser's own last write it waits for, so that a page read from a
  replica never stands for one read from the primary after a write.

Only htmx fragment requests are answered this way (never a whole page,
which carries the flashed messages). The marker is read on the
connection the page then reads with, first: a write that commits between
the two reads gives a newer page under the older tag, so the next poll is
answered in full, never the other way round.
"""

from __future__ import annotations

import hashlib
import secrets
import time

from flask import Response, request
from sqlalchemy.engine import Connection

from ... import i18n
from ...plumbing import csrf, hx, reading
from ...plumbing.security import may_act, may_view, powers_key
from . import markers

# Seconds of one time bucket (docs/performance.md).
TIME_BUCKET = 60
# A new process draws every page anew.
_PROCESS = secrets.token_hex(8)


def _now() -> float:
    """Seconds since the epoch (a test holds the clock here)."""
    return time.time()


def _tag(conn: Connection) -> str:
    parts = (
        _PROCESS,
        markers.markers(conn)[0],
        str(int(_now() // TIME_BUCKET)),
        request.full_path,
        hx.details().target or "",
        i18n.current_locale(),
        str(i18n.current_timezone()),
        str(may_view()),
        str(may_act()),
        repr(powers_key()),
        csrf._cookie_value(),
        reading.source_marker(),
    )
    return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:32]


def check(conn: Connection) -> tuple[str | None, Response | None]:
    """For a fragment poll: (its ETag, a 304 answer when the browser has
    it already). (None, None) for any other request."""
    if request.method != "GET" or not hx.details().wants_fragment:
        return None, None
    tag = _tag(conn)
    if tag in request.if_none_match:
        response = Response(status=304)
        return tag, _validators(response, tag)
    return tag, None


def _validators(response: Response, tag: str) -> Response:
    response.set_etag(tag)
    # Kept by the browser only, and always asked again (with If-None-Match).
    response.cache_control.private = True
    response.cache_control.no_cache = True
    response.vary.add("HX-Target")
    return response


def tagged(response: Response, tag: str | None) -> Response:
    """*response* with the poll's ETag, when it is a full answer to one."""
    if tag is not None and response.status_code == 200:
        _validators(response, tag)
    return response
