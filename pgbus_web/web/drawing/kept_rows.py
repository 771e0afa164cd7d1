"""Rows of a table drawn before, shown again while everything they show
is the same: ``{% call kept_row(...) %}<tr>...</tr>{% endcall %}``.

The needs-attention groups are most of the index's drawing (each group's
row with its action forms); when the change marker moves (any write to
any run) the page is drawn again (web/answering/page_cache.py), yet most
groups are as they were. A row is kept by everything it shows: the
values given (the group's own, the words drawn outside the call), what
the clock makes of its moments ("5 minutes ago", the same words as the
drawing would write: the moments are given to timefmt.relative, which
also notes them for the drawing's window), the viewer's language, zone
and day, whether the request may act, the script root and the form
field the CSRF token stands in (a placeholder in a shared drawing, the
browser's own token otherwise, so no browser is shown another's).

Kept per app (its settings decide the buttons), bounded (cleared whole
when full, as cells.run_rows), and forgotten with the catalogs.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from flask import current_app, request
from markupsafe import Markup

from ... import i18n
from ...core.words import timefmt
from ...plumbing.security import may_act, powers_key

# Rows kept per app before starting afresh.
ROWS_KEPT = 2048
_EXTENSION = "pgbus_web_kept_rows"
_apps: list = []


def _forget_all() -> None:
    for kept in _apps:
        kept.clear()


i18n.on_reload(_forget_all)


def _kept() -> dict:
    app = current_app._get_current_object()  # type: ignore[attr-defined]  # the app behind the proxy: a lasting key
    found = app.extensions.get(_EXTENSION)
    if found is None:
        found = app.extensions[_EXTENSION] = {}
        _apps.append(found)
    return found


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return tuple(sorted((name, _plain(item)) for name, item in value.items()))
    if isinstance(value, (list, tuple)):
        return tuple(_plain(item) for item in value)
    return value


def kept_row(kind: str, now: datetime, moments: tuple, *values: Any, caller: Callable[[], str]) -> Markup:
    """The row *caller* draws, or the same row drawn before for the same
    *values*, the same words for *moments* at *now* and the same viewer."""
    zone = timefmt.zone(i18n.current_timezone())
    words = tuple(timefmt.relative(moment, now=now) if isinstance(moment, datetime) else moment for moment in moments)
    try:
        key = (
            kind,
            str(i18n.current_locale()),
            str(zone),
            timefmt.in_zone(now, zone).date(),
            may_act(),
            powers_key(),
            request.script_root,
            _plain(moments),
            words,
            _plain(values),
        )
        hash(key)
    except TypeError:  # a value that cannot be a key: drawn, not kept
        return Markup(caller())
    kept = _kept()
    drawn = kept.get(key)
    if drawn is None:
        drawn = Markup(caller())
        if len(kept) >= ROWS_KEPT:
            kept.clear()
        kept[key] = drawn
    return drawn
