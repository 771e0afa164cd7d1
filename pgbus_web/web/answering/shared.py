"""The index's needs-attention block, read once and drawn once for every
viewer alike (docs/performance.md, "Many operators at once").

Every operator who opens the first page at the start of an incident asks
for the same groups: reading and drawing them was most of the page's SQL
and almost half of its CPU. So the block is kept in two steps, per app:

- **What it shows** (core/reads.attention_context) is read once per
  change marker (any committed write to the runs, steps, events, signals
  and batches moves it), per source (the primary or the replica) and per
  READ_EVERY seconds of the page's clock: the overdue and
  waiting_overdue groups move with the clock alone, so a quiet database
  still has them read again that often, and the block's "as of" says when
  they were read. The marker is read first, on the connection the groups
  are then read with, so a remembered read is never older than its
  marker. Requests that arrive while it is being read wait for that read
  instead of each reading it too.
- **Its HTML**, drawn from one such read, is kept per viewer kind: the
  language, the time zone, the viewer's date in that zone, whether the
  request may view and may act (the group buttons), the script root its
  links start with and whether the block swaps itself out of band. A
  moment the block writes relative to now ("5 minutes ago") is noted
  while it is drawn (timefmt.noting_moments), and the HTML is shown again
  only while every such moment still reads the same words: it is what a
  fresh drawing would give, never a minute late. The CSRF token of the
  group buttons' forms is a placeholder in the kept HTML, replaced with
  the request's own token each time it is shown.

Both are bounded (READS_KEPT reads, DRAWINGS_KEPT drawings per read) and
forgotten when the catalogs are reloaded.
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
from jinja2_fragments.flask import render_block
from markupsafe import Markup, escape
from sqlalchemy.engine import Connection

from ... import i18n
from ...core import reads
from ...core.words import timefmt
from ...plumbing import csrf, reading
from ...plumbing.security import may_act, may_view

# Seconds of the page's clock one read of the groups stands for.
READ_EVERY = 10
# Reads kept (the newest markers) and drawings kept per read.
READS_KEPT = 4
DRAWINGS_KEPT = 32
# How long a request waits for another's read of the same groups before
# reading them itself (that read is bounded by the statement timeout).
WAIT_FOR_READ = 30.0
# The block's name in the index template, and the context name the
# template prints it from when it is drawn already.
BLOCK = "attention"
DRAWN = "drawn_attention"
# The context name that carries the read a page's groups came from.
MEMO = "attention_memo"

# Stands for the request's CSRF token in kept HTML: random per process, so
# no stored value can look like it.
_TOKEN = f"pgbus-csrf-{secrets.token_hex(16)}"


@dataclass(eq=False)
class _Read:
    """One read of the groups, and the HTML drawn from it per viewer kind."""

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


def remember_attention(conn: Connection, now: datetime, read: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """The needs-attention part of the index at *now* (core/reads.Remember):
    the one read for this marker, source and clock bucket, or *read*'s."""
    key = (reads.change_marker(conn), reading.route().source, int(now.timestamp() // READ_EVERY))
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
    return {**entry.part, MEMO: entry}


def _viewer(now: datetime) -> tuple:
    """What, besides the read, the block's HTML depends on."""
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
    seen: list = []
    for moment in moments:
        if moment not in seen:
            seen.append(moment)
    return seen


def attention_block(template: str, page: dict[str, Any]) -> None:
    """Put the needs-attention block of *page* (an index context with
    common() added) into it as DRAWN, drawn or remembered, when its groups
    came from remember_attention; otherwise the template draws it."""
    entry: _Read | None = page.get(MEMO)
    if entry is None:
        return
    now = page["now"]
    key = (*_viewer(now), bool(page.get("oob")))
    store = _store()
    with store.lock:
        kept = entry.drawn.get(key)
    if kept is not None and all(timefmt.relative(moment, now=now) == words for moment, words in kept[1]):
        html = kept[0]
    else:
        with timefmt.noting_moments() as noted:
            html = render_block(template, BLOCK, **{**page, DRAWN: None, "csrf_field": _placeholder_field,
                                                    "csrf_token": _placeholder_token})
        said = tuple((moment, timefmt.relative(moment, now=now)) for moment in _unique(noted))
        with store.lock:
            entry.drawn[key] = (html, said)
            entry.drawn.move_to_end(key)
            while len(entry.drawn) > DRAWINGS_KEPT:
                entry.drawn.popitem(last=False)
    if _TOKEN in html:
        html = html.replace(_TOKEN, str(escape(csrf.token())))
    page[DRAWN] = Markup(html)

