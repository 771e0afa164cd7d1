"""The runs index, read once and drawn once for every viewer alike
(docs/performance.md, "Many operators at once").

Every operator who opens the first page at the start of an incident asks
for the same counts, needs-attention groups and runs: reading and drawing
them was all of the page's SQL and most of its CPU. So the index is kept
in two steps, per app:

- **What it shows** (core/reads.index_context) is read once per change
  marker and worker states (core/worker_reads.poll_marker: any committed
  write to the runs, steps, events, signals and batches, or a worker
  falling silent, moves it), per source (the primary or the replica), per
  request (the path and query, the blocks an htmx request names) and per
  READ_EVERY seconds of the page's clock: what the clock alone decides
  (the overdue and waiting_overdue groups, a run's overdue badge, a
  "last 24 hours" filter) is therefore up to that late, and the
  needs-attention block's "as of" says when it was read. The marker is
  read first, on the connection the page then reads with, so a
  remembered read is never older than its marker. Requests that arrive
  while it is being read wait for that read instead of each reading it too.
- **Its HTML** (the page's content, or the blocks an htmx request names),
  drawn from one such read, is kept per viewer kind: the language, the time
  zone, the viewer's date in that zone, whether the request may view and
  may act (the buttons), the script root its links start with. Every
  moment written relative to now ("5 minutes ago") is noted while it is
  drawn (timefmt.noting_moments), and the HTML is shown again only while
  each such moment still reads the same words: relative times are those a
  fresh drawing would write, never a bucket late. The CSRF token of its
  forms is a placeholder in the kept HTML, replaced with the request's
  own token each time it is shown. The page around it (the top bar, the
  messages, where it was read) is drawn for each request.

A host's ``subject_url`` links may change without the runs, so with one
nothing is kept. Both steps are bounded (READS_KEPT reads,
DRAWINGS_KEPT drawings per read) and forgotten when the catalogs are
reloaded.
"""

from __future__ import annotations

import secrets
import threading
import weakref
from collections import OrderedDict
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Callable, Mapping

from flask import current_app, request
from markupsafe import Markup, escape
from sqlalchemy.engine import Connection

from ... import i18n
from ...core import worker_reads
from ...core.words import timefmt
from ...plumbing import csrf, hx, reading
from ...plumbing.security import may_act, may_view
from ...plumbing.state import state

# Seconds of the page's clock one read stands for.
READ_EVERY = 10
# Reads kept (the newest) and drawings kept per read.
READS_KEPT = 16
DRAWINGS_KEPT = 8
# How long a request waits for another's read of the same page before
# reading it itself (that read is bounded by the statement timeout).
WAIT_FOR_READ = 30.0
# The context name that carries the read a page came from.
MEMO = "shared_read"

# Stands for the request's CSRF token in kept HTML: random per process, so
# no stored value can look like it.
_TOKEN = f"pgbus-csrf-{secrets.token_hex(16)}"


@dataclass(eq=False)
class _Read:
    """One read of a page, and the HTML drawn from it per viewer kind."""

    ready: threading.Event = field(default_factory=threading.Event)
    part: dict[str, Any] | None = None
    drawn: OrderedDict = field(default_factory=OrderedDict)


class _Store:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.reads: OrderedDict[tuple, _Read] = OrderedDict()

    def clear(self) -> None:
        with self.lock:
            self.reads.clear()


_stores: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_stores_lock = threading.Lock()


def _store() -> _Store:
    app = current_app._get_current_object()  # type: ignore[attr-defined]
    with _stores_lock:
        found = _stores.get(app)
        if found is None:
            found = _stores[app] = _Store()
        return found


def _forget_all() -> None:
    with _stores_lock:
        stores = list(_stores.values())
    for store in stores:
        store.clear()


i18n.on_reload(_forget_all)


def remember_index(conn: Connection, now: datetime, read: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """The index's context at *now* (core/reads.Remember): the one read for
    this marker, source, request and clock bucket, or *read*'s."""
    if state().settings.subject_url is not None:
        return read()
    details = hx.details()
    key = (
        worker_reads.poll_marker(conn, state().settings, now),
        reading.route().source,
        int(now.timestamp() // READ_EVERY),
        request.path,
        request.query_string,
        details.wants_fragment,
        details.target or "",
    )
    store = _store()
    with store.lock:
        entry = store.reads.get(key)
        mine = entry is None
        if mine:
            entry = store.reads[key] = _Read()
            while len(store.reads) > READS_KEPT:
                store.reads.popitem(last=False)
        else:
            store.reads.move_to_end(key)
    if mine:
        try:
            entry.part = read()
        finally:
            if entry.part is None:  # the read failed: the next request reads again
                with store.lock:
                    if store.reads.get(key) is entry:
                        del store.reads[key]
            entry.ready.set()
    elif not entry.ready.wait(WAIT_FOR_READ) or entry.part is None:
        return read()
    # Drawn at the request's moment: the relative times are of now.
    return {**entry.part, "now": now, MEMO: entry}


def _viewer(now: datetime) -> tuple:
    """What, besides the read, the HTML depends on."""
    zone = i18n.current_timezone()
    return (
        i18n.current_locale(),
        str(zone),
        timefmt.in_zone(now, timefmt.zone(zone)).date(),
        may_view(),
        may_act(),
        request.script_root,
    )


def _placeholder_field() -> Markup:
    return Markup(f'<input type="hidden" name="{csrf.FIELD_NAME}" value="{_TOKEN}">')


def _placeholder_token() -> str:
    return _TOKEN


def _unique(moments: list) -> list:
    try:
        return list(dict.fromkeys(moments))
    except TypeError:  # a value that cannot be a key: each one checked
        return moments


def drawn(context: Mapping[str, Any], blocks: tuple[str, ...], draw: Callable[[Mapping[str, Any]], str]) -> Markup | None:
    """*blocks* of a page whose *context* came from remember_index, drawn
    by *draw* (given the context to draw with) or as drawn before for this
    kind of viewer; None for a context that was not remembered."""
    entry: _Read | None = context.get(MEMO)
    if entry is None:
        return None
    now = context["now"]
    key = (blocks, bool(context.get("oob")), *_viewer(now))
    store = _store()
    with store.lock:
        kept = entry.drawn.get(key)
    if kept is not None and all(timefmt.relative(moment, now=now) == words for moment, words in kept[1]):
        html = kept[0]
    else:
        with timefmt.noting_moments() as noted:
            html = draw({**context, "csrf_field": _placeholder_field, "csrf_token": _placeholder_token})
        said = tuple((moment, timefmt.relative(moment, now=now)) for moment in _unique(noted))
        with store.lock:
            entry.drawn[key] = (html, said)
            entry.drawn.move_to_end(key)
            while len(entry.drawn) > DRAWINGS_KEPT:
                entry.drawn.popitem(last=False)
    if _TOKEN in html:
        html = html.replace(_TOKEN, str(escape(csrf.token())))
    return Markup(html)
