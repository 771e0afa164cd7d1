"""The runs index and a run's page, each read once and drawn once for
every viewer alike (docs/performance.md, "Many operators at once").

Every operator who opens the first page at the start of an incident asks
for the same counts, needs-attention groups and runs: reading and drawing
them was all of the page's SQL and most of its CPU. So the index is kept
in two steps, per app:

- **What it shows** (core/page_reads.index_context) is read once per change
  marker and worker states (web/answering/markers.py: any committed
  write to the runs, steps, events, signals and batches, or a worker
  falling silent, moves it), per source (the primary or the replica), per
  request (the path and query, the blocks an htmx request names) and per
  READ_EVERY seconds of the page's clock: what the clock alone decides
  (the overdue and waiting_overdue groups, a run's overdue badge, a
  "last 24 hours" filter) is therefore up to that late (and the time a
  read takes), and the needs-attention block's "as of" says when it was
  read. The marker is read first, on the connection the page then reads
  with, so a remembered read is never older than its marker. Requests
  that arrive while it is being read wait for that read instead of each
  reading it too; a new bucket of the same marker is read (and drawn)
  behind the request that starts it (read_behind), and every request is
  shown the bucket before until it is ready, so a quiet page never stalls
  every ten seconds.
- **Its HTML** (the page's content, or the blocks an htmx request names),
  drawn from one such read, is kept per viewer kind: the language, the time
  zone, the viewer's date in that zone, whether the request may view and
  may act (the buttons), the script root its links start with. Every
  moment written relative to now ("5 minutes ago") is noted while it is
  drawn (timefmt.noting_moments), and the HTML is shown again only while
  the clock is inside every such moment's window of the same words
  (timefmt.same_words): relative times are those a fresh drawing would
  write, never a bucket late. The CSRF token of its
  forms is a placeholder in the kept HTML, replaced with the request's
  own token each time it is shown. The page around it (the top bar, the
  messages, where it was read) is drawn for each request.

While an operation writes, its chunks commit a few times a second.
Their changes move the marker too, but a read made since another chunk
stands for OPERATION_LAG seconds before it is read again, and then it is
read again behind the request that found it old: that request, and the
others until the new read and its drawing are ready, are shown the one
before (read_behind). The pages an operator has open stay as quick as on
a quiet database, and show the operation's progress about that late. Any
other write (an operator's own act, a worker's step) and the operation's
end are shown on the next request (models/changes.by_operation,
docs/operations.md).

A run's page (remember_run) is kept the same way, by the same marker,
in a store of its own (RUNS_KEPT reads), so that operators opening many
runs never push the index's reads out.

A host's ``subject_url`` links may change without the runs, so with one
nothing is kept. Both steps are bounded (READS_KEPT reads,
DRAWINGS_KEPT drawings per read) and forgotten when the catalogs are
reloaded.
"""

from __future__ import annotations

import contextvars
import logging
import secrets
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any, TypeVar

from flask import current_app, g, request, request_tearing_down
from markupsafe import Markup, escape
from sqlalchemy.engine import Connection

from ... import bounded, i18n
from ...core.words import timefmt
from ...plumbing import csrf, hx, reading
from ...plumbing.security import may_act, may_view, powers_key
from ...plumbing.state import state
from . import markers

log = logging.getLogger(__name__)

# Seconds of the page's clock one read stands for.
READ_EVERY = 10
# Seconds a read stands for while only operations' chunks wrote since it.
OPERATION_LAG = 1.0
# Reads kept (the newest): the index's, and the run pages'; drawings kept
# per read.
READS_KEPT = 16
RUNS_KEPT = 64
DRAWINGS_KEPT = 8
# How long a request waits for another's read of the same page before
# reading it itself (that read is bounded by the statement timeout).
WAIT_FOR_READ = 30.0
# How long a read behind a request waits for that request to end (so that
# its drawing does not take the interpreter from the answer) before it
# starts anyway.
WAIT_FOR_ANSWER = 1.0
# The context name that carries the read a page came from.
MEMO = "shared_read"
# The context name that carries the read to be made behind the request
# (_remember to drawn): the new _Read, its key and the function that reads it.
BEHIND = "shared_read_behind"

# Stands for the request's CSRF token in kept HTML: random per process, so
# no stored value can look like it.
_TOKEN = f"pgbus-csrf-{secrets.token_hex(16)}"


class _Once:
    """A value one request works out while the others that want it wait:
    .value once .ready is set, None when working it out failed."""

    def __init__(self) -> None:
        self.ready = threading.Event()
        self.value: Any = None


# A _Once, or the kind of it a table holds (_claim).
_O = TypeVar("_O", bound=_Once)


class _Read(_Once):
    """One read of a page (.value, its context), and the HTML drawn from
    it per viewer kind (_Once each, their value (html, moments' words)),
    in .store."""

    def __init__(self, store: _Store, marker: str = "") -> None:
        super().__init__()
        self.store = store
        self.drawn: OrderedDict[tuple, _Once] = OrderedDict()
        # The read of the bucket before, for the same marker and request:
        # its drawings are shown while this read's are drawn.
        self.before: _Read | None = None
        # The marker with operations' changes when it was read, and when.
        self.marker = marker
        self.read_at = time.monotonic()
        # The read this one replaces (operations wrote since it): shown
        # while this one is read.
        self.superseded: _Read | None = None
        # Whether a thread reads it behind a request (read_behind).
        self.reading_behind = False

    def behind(self, marker: str) -> bool:
        """Whether operations' chunks wrote since this read, and it has
        stood for OPERATION_LAG seconds."""
        return marker != self.marker and time.monotonic() - self.read_at >= OPERATION_LAG


class _Store:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.reads: OrderedDict[tuple, _Read] = OrderedDict()

    def clear(self) -> None:
        with self.lock:
            self.reads.clear()


_stores: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_stores_lock = threading.Lock()


def _store(kind: str) -> _Store:
    """The app's store of *kind* (the index's, the run pages')."""
    app = current_app._get_current_object()  # type: ignore[attr-defined]  # the app behind the proxy: a lasting key
    with _stores_lock:
        kinds = _stores.get(app)
        if kinds is None:
            kinds = _stores[app] = {}
        found = kinds.get(kind)
        if found is None:
            found = kinds[kind] = _Store()
        return found


def forget_all() -> None:
    """Every app's reads and drawings forgotten (the catalogs' reload; a
    benchmark timing a page as its first request after a change)."""
    with _stores_lock:
        stores = [store for kinds in _stores.values() for store in kinds.values()]
    for store in stores:
        store.clear()


i18n.on_reload(forget_all)


def _claim(
    store: _Store,
    table: OrderedDict[tuple[Any, ...], _O],
    key: tuple[Any, ...],
    make: Callable[[], _O],
    bound: int,
    stale: Callable[[_O], bool] = lambda once: False,
) -> tuple[_O, bool]:
    """The _Once of *key* in *table*, and whether this request is to work
    it out: when there is none yet, or the one there is *stale*."""
    with store.lock:
        once = table.get(key)
        if once is not None and not (once.ready.is_set() and stale(once)):
            table.move_to_end(key)
            return once, False
        once = table[key] = make()
        while len(table) > bound:
            table.popitem(last=False)
        return once, True


def _work_out(store: _Store, table: OrderedDict, key: tuple, once: _Once, work: Callable[[], Any]) -> Any:
    try:
        once.value = work()
    finally:
        if once.value is None:  # it failed: the next request tries again
            with store.lock:
                if table.get(key) is once:
                    del table[key]
        once.ready.set()
    return once.value


def remember_index(conn: Connection, now: datetime, read: Callable[[Connection], dict[str, Any]]) -> dict[str, Any]:
    """The index's context at *now* (core/page_reads.Remember): the one read for
    this marker, source, request and clock bucket, or *read*'s (given the
    connection to read on). While the read of a new bucket is under way
    (behind the request that started it), every request of the same
    marker is shown the read of the bucket before, and its drawings."""
    return _remember(conn, now, read, "index", READS_KEPT)


def remember_run(conn: Connection, now: datetime, read: Callable[[Connection], dict[str, Any]]) -> dict[str, Any]:
    """A run page's context at *now*, as remember_index keeps the index's
    (the request's path and query name the run and its windows)."""
    return _remember(conn, now, read, "run", RUNS_KEPT)


def _remember(
    conn: Connection, now: datetime, read: Callable[[Connection], dict[str, Any]], kind: str, kept: int
) -> dict[str, Any]:
    if state().settings.subject_url is not None:
        return read(conn)
    details = hx.details()
    # Keyed by the marker without operations' changes; those make a read
    # stale only once it has stood for OPERATION_LAG (_Read.behind).
    marker, settled = markers.markers(conn, now)
    same = (
        settled,
        reading.route().source,
        request.path,
        request.query_string,
        details.wants_fragment,
        details.target or "",
    )
    bucket = int(now.timestamp() // READ_EVERY)
    store = _store(kind)
    key = (*same, bucket)
    with store.lock:
        previous = store.reads.get(key)
    entry, mine = _claim(store, store.reads, key, lambda: _Read(store, marker), kept, lambda once: once.behind(marker))
    with store.lock:
        before = store.reads.get((*same, bucket - 1))
    if before is not None and not (before.ready.is_set() and before.value is not None):
        before = None
    if mine:
        if before is not None:
            before.before = None  # one bucket back, never a chain
        entry.before = before
        if previous is not None and previous is not entry and previous.value is not None:
            previous.superseded = None  # never a chain
            entry.superseded = previous
            # Only operations' chunks wrote since it (the one reason a read
            # of the same key is replaced): this request is shown it too,
            # and drawn() reads the new one behind it.
            return {**previous.value, "now": now, MEMO: previous, BEHIND: (entry, key, read)}
        if before is not None:
            # A new bucket of the clock, the same marker: the bucket before
            # is shown to this request too, and the new one read behind it.
            return {**before.value, "now": now, MEMO: before, BEHIND: (entry, key, read)}
        _work_out(store, store.reads, key, entry, lambda: read(conn))
    elif not entry.ready.is_set() and entry.superseded is not None:
        entry = entry.superseded
    elif not entry.ready.is_set() and before is not None:
        entry = before
    elif not entry.ready.wait(WAIT_FOR_READ) or entry.value is None:
        return read(conn)
    # Drawn at the request's moment: the relative times are of now.
    return {**entry.value, "now": now, MEMO: entry}


def _viewer(now: datetime) -> tuple:
    """What, besides the read, the HTML depends on."""
    zone = i18n.current_timezone()
    return (
        i18n.current_locale(),
        str(zone),
        timefmt.in_zone(now, timefmt.zone(zone)).date(),
        may_view(),
        may_act(),
        powers_key(),
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


def drawn(
    context: Mapping[str, Any], blocks: tuple[str, ...], draw: Callable[[Mapping[str, Any]], str]
) -> Markup | None:
    """*blocks* of a page whose *context* came from remember_index or
    remember_run, drawn
    by *draw* (given the context to draw with) or as drawn before for this
    kind of viewer; None for a context that was not remembered."""
    entry: _Read | None = context.get(MEMO)
    if entry is None:
        return None
    now = context["now"]
    key = (blocks, bool(context.get("oob")), *_viewer(now))
    at = timefmt.utc(now)

    def stale(once: _Once) -> bool:
        return once.value is None or not once.value[1] <= at <= once.value[2]

    store = entry.store
    if BEHIND in context:
        read_behind(store, context, key, draw)
    once, mine = _claim(store, entry.drawn, key, _Once, DRAWINGS_KEPT, stale)
    if mine:
        html = _work_out(store, entry.drawn, key, once, lambda: _draw(context, draw))[0]
    elif not once.ready.is_set() and (earlier := _drawn_before(store, entry, key, stale)) is not None:
        # The bucket before's drawing, for the same marker, while this one is drawn.
        html = earlier
    elif not once.ready.wait(WAIT_FOR_READ) or stale(once):
        # Drawn for another moment's words (or not at all): this one's own.
        html = _draw(context, draw)[0]
    else:
        html = once.value[0]
    if _TOKEN in html:
        html = html.replace(_TOKEN, str(escape(csrf.token())))
    return Markup(html)


def _draw(context: Mapping[str, Any], draw: Callable[[Mapping[str, Any]], str]) -> tuple[str, datetime, datetime]:
    """The HTML *draw* makes of *context* (its CSRF token a placeholder),
    and the window of the clock in which it reads as drawn."""
    now = context["now"]
    with timefmt.noting_moments() as noted:
        html = draw({**context, "csrf_field": _placeholder_field, "csrf_token": _placeholder_token})
    # While the clock is inside every noted moment's window, each reads
    # the words it was drawn with.
    since, until = timefmt.ALWAYS
    for moment in _unique(noted):
        low, high = timefmt.same_words(moment, now=now)
        since, until = max(since, low), min(until, high)
    return html, since, until


# The reads being made behind a request (read_behind), for settle().
_behind: set[threading.Thread] = set()


def read_behind(
    store: _Store, context: Mapping[str, Any], key: tuple, draw: Callable[[Mapping[str, Any]], str]
) -> None:
    """Make the read _remember put in *context* (BEHIND), and this
    request's drawing of it (*key*), on a thread of its own, while the
    request is answered from the read before. The new read is made ready
    only once that drawing is in it, so the request that next asks for it
    draws nothing either. The thread runs in a copy of the request's
    context variables (Flask's request and app contexts, the language and
    zone chosen for it), as the request would have, and reads on a
    connection of its own from where the request reads, once the request
    has been answered (its teardown)."""
    fresh, read_key, read = context[BEHIND]
    with store.lock:
        if fresh.reading_behind:  # one thread per read, however often it is drawn
            return
        fresh.reading_behind = True
    drawing = {name: value for name, value in context.items() if name != BEHIND}

    def work() -> dict[str, Any]:
        with reading.read() as conn:
            value = read(conn)
        made = _Once()
        made.value = _draw({**drawing, **value, MEMO: fresh}, draw)
        made.ready.set()
        with store.lock:
            fresh.drawn[key] = made
        return value

    answered = threading.Event()
    g.setdefault(_ANSWERS, []).append(answered)

    def run() -> None:
        answered.wait(WAIT_FOR_ANSWER)
        try:
            # Not the request's wait on the database (copied with its
            # context): nobody waits on this read, each statement has its bound.
            with bounded.waiting(None):
                _work_out(store, store.reads, read_key, fresh, work)
        except Exception:  # the next request reads it itself (_work_out forgot it)
            log.exception("pgbus-web: reading a page behind its request failed")
        finally:
            with _stores_lock:
                _behind.discard(thread)

    thread = threading.Thread(
        target=contextvars.copy_context().run, args=(run,), daemon=True, name="pgbus-web-read-behind"
    )
    with _stores_lock:
        _behind.add(thread)
    thread.start()


# The name in flask.g of the events that tell this request's reads behind
# it that it has been answered.
_ANSWERS = "_pgbus_read_behind_answered"


def _answered(sender, **extra) -> None:
    for answered in g.pop(_ANSWERS, ()):
        answered.set()


request_tearing_down.connect(_answered, weak=False)


def settle(timeout: float = WAIT_FOR_READ) -> None:
    """Wait for the reads being made behind requests (a test, or a
    benchmark, that then asks for the page they make)."""
    with _stores_lock:
        threads = list(_behind)
    for thread in threads:
        thread.join(timeout)


def _drawn_before(store: _Store, entry: _Read, key: tuple, stale: Callable[[_Once], bool]) -> str | None:
    for earlier in (entry.superseded, entry.before):
        with store.lock:
            before = earlier.drawn.get(key) if earlier is not None else None
        if before is not None and before.ready.is_set() and not stale(before):
            return before.value[0]
    return None
