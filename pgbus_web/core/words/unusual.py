"""How the pages show a stored value they cannot show the usual way: a
timestamp at ±infinity, ``arguments`` that are not a JSON object, JSON
Python could not read (``models.values``), a value too large to print
whole. The value is shown as it is, never replaced by something
plausible, and marked: the class ``pgbus-odd`` on the element and a
translated word after it ("unusual value"), so the mark does not depend
on colour, and a screen reader says it too.
"""

from __future__ import annotations

from typing import Any

from babel.numbers import format_decimal
from markupsafe import Markup

from ...i18n import current_locale, t
from ...models.values import Infinite

# JSON longer than this many characters is shown cut, with how long it is:
# a page with a 10 MB argument would take the browser down with it.
JSON_SHOWN_LIMIT = 10_000


def marked(content: Any, *, kind: str) -> Markup:
    """*content* (escaped unless Markup) followed by the marker, in one
    ``pgbus-odd`` element; *kind* says what is odd (``data-odd``)."""
    return Markup(
        '<span class="pgbus-odd" data-odd="{kind}">{content} <span class="pgbus-odd-marker">{marker}</span></span>'
    ).format(kind=kind, content=content, marker=t("pgbus.web.odd.marker"))


def moment(value: Infinite) -> Markup:
    """``infinity`` / ``-infinity``, marked."""
    return marked(Markup('<code class="pgbus-code">{}</code>').format(value.literal), kind="infinite")


def shortened(text: str) -> tuple[str, Markup | None]:
    """*text* cut to JSON_SHOWN_LIMIT characters, and the note that says so
    (None when it is whole)."""
    if len(text) <= JSON_SHOWN_LIMIT:
        return text, None
    note = t(
        "pgbus.web.odd.shortened",
        shown=format_decimal(JSON_SHOWN_LIMIT, locale=current_locale()),
        total=format_decimal(len(text), locale=current_locale()),
    )
    return text[:JSON_SHOWN_LIMIT], Markup(
        '<span class="pgbus-odd-cut">…</span> <span class="pgbus-muted pgbus-small">{}</span>'
    ).format(note)
