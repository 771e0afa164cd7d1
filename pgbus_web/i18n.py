"""The dashboard's words: key-based messages in twelve languages.

Message ids are keys that mirror pgbus's i18n keys
(``pgbus.workflows.statuses.paused``); the English text lives in the ``en``
catalog like every other language. Catalogs are the ``.po`` files under
``translations/<locale>/LC_MESSAGES/messages.po``, read and kept in memory on
first use: there is no compiled ``.mo`` to go stale next to its source.

The dashboard is a blueprint mounted in host apps that may run their own
Flask-Babel with their own locale selector, so the locale chosen here lives
on ``flask.g`` under our own name and is set only for the blueprint's own
requests: the host's pages keep the host's locale. (Flask-Babel's locale is
one per app and its domains load ``.mo`` files only, which is why it is not
used for the lookup.)

A message missing in a locale (absent, empty or fuzzy) shows the English
text. ``t_html`` and ``tn_html`` trust the message text and escape every
argument that is not already ``Markup``.
"""

from __future__ import annotations

import contextlib
import contextvars
import gettext
import logging
from dataclasses import dataclass
from datetime import timedelta
from functools import lru_cache
from pathlib import Path
from typing import Callable, Iterator, Optional, Union
from urllib.parse import urlencode
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from babel import Locale
from babel.messages.pofile import read_po
from babel.numbers import format_decimal
from markupsafe import Markup

from . import bidi

log = logging.getLogger(__name__)

# The source language: its catalog is the fallback for every other.
FALLBACK_LOCALE = "en"
# The query parameter that picks a language (and is remembered in a cookie).
LOCALE_PARAM = "locale"
LOCALE_COOKIE = "pgbus_locale"
# Written by static/timezone.js from the browser's Intl time zone.
TIMEZONE_COOKIE = "pgbus_tz"
# A chosen language is remembered for a year.
COOKIE_MAX_AGE = timedelta(days=365)
# Language tags browsers send that mean one of our catalogs.
LOCALE_ALIASES = {"no": "nb", "nn": "nb", "jp": "ja", "dk": "da"}
UTC = ZoneInfo("UTC")

_G_LOCALE = "pgbus_web_locale"
_forced_locale: contextvars.ContextVar[Optional[str]] = contextvars.ContextVar(
    "pgbus_web_forced_locale", default=None
)

Entry = Union[str, tuple]


def translations_dir() -> Path:
    """Where the catalogs are: inside the installed package (the wheel
    force-includes them there) or at the root of a source checkout."""
    packaged = Path(__file__).resolve().parent / "translations"
    if packaged.is_dir():
        return packaged
    return Path(__file__).resolve().parent.parent / "translations"


def catalog_path(locale: str) -> Path:
    return translations_dir() / locale / "LC_MESSAGES" / "messages.po"


@lru_cache(maxsize=1)
def available_locales() -> tuple[str, ...]:
    """The locales that have a catalog, English first."""
    found = sorted(
        p.parent.parent.name for p in translations_dir().glob("*/LC_MESSAGES/messages.po")
    )
    if FALLBACK_LOCALE in found:
        found.remove(FALLBACK_LOCALE)
        found.insert(0, FALLBACK_LOCALE)
    return tuple(found)


@dataclass(frozen=True)
class Catalog:
    locale: str
    messages: dict  # key -> str, or a tuple of plural forms
    plural: Callable[[int], int]

    def form(self, entry: Entry, count) -> str:
        if isinstance(entry, str):
            return entry
        index = self.plural(_whole(count))
        return entry[min(index, len(entry) - 1)]


def _whole(count) -> int:
    """The number a plural rule is asked about: a count, or a numeral string."""
    try:
        return abs(int(count))
    except (TypeError, ValueError):
        return 1


def load_catalog(path: Path, locale: str) -> Catalog:
    """Read a ``.po`` file into a Catalog, leaving out empty and fuzzy
    entries so that they fall back to English."""
    with open(path, "rb") as fp:
        po = read_po(fp, locale=locale)
    messages: dict = {}
    for message in po:
        if not message.id or message.fuzzy:
            continue
        if isinstance(message.id, (tuple, list)):
            forms = tuple(message.string or ())
            if forms and all(forms):
                messages[message.id[0]] = forms
        elif message.string:
            messages[message.id] = message.string
    return Catalog(locale, messages, gettext.c2py(po.plural_expr))


@lru_cache(maxsize=None)
def catalog(locale: str) -> Optional[Catalog]:
    path = catalog_path(locale)
    if not path.is_file():
        return None
    return load_catalog(path, locale)


def reload() -> None:
    """Forget the loaded catalogs (after editing a ``.po`` in a running process)."""
    catalog.cache_clear()
    available_locales.cache_clear()


# --- the locale in effect ------------------------------------------------


def match_locale(tag: Optional[str]) -> Optional[str]:
    """The catalog a language tag asks for: ``de-AT`` gives ``de``; None when
    there is none."""
    if not tag:
        return None
    tag = tag.strip().replace("_", "-").lower()
    locales = available_locales()
    if tag in locales:
        return tag
    base = tag.split("-", 1)[0]
    base = LOCALE_ALIASES.get(base, base)
    return base if base in locales else None


def _request_locale() -> Optional[str]:
    from flask import g, has_app_context

    if has_app_context():
        return g.get(_G_LOCALE)
    return None


def current_locale() -> str:
    """The locale of what is being rendered: a forced one, else the one this
    request chose, else English."""
    return _forced_locale.get() or _request_locale() or FALLBACK_LOCALE


@contextlib.contextmanager
def force_locale(locale: str) -> Iterator[str]:
    """Render in ``locale`` inside the block (tests, CLI, mail)."""
    chosen = match_locale(locale)
    if chosen is None:
        raise ValueError(f"no catalog for locale {locale!r}; have {', '.join(available_locales())}")
    token = _forced_locale.set(chosen)
    try:
        yield chosen
    finally:
        _forced_locale.reset(token)


def select_locale(request, default: str = FALLBACK_LOCALE) -> str:
    """``?locale=``, then the cookie, then Accept-Language (best quality
    first, region falling back to the language), then ``default``."""
    for candidate in (request.args.get(LOCALE_PARAM), request.cookies.get(LOCALE_COOKIE)):
        chosen = match_locale(candidate)
        if chosen:
            return chosen
    for tag, _quality in request.accept_languages:
        chosen = match_locale(tag)
        if chosen:
            return chosen
    return match_locale(default) or FALLBACK_LOCALE


def locale_name(locale: str) -> str:
    """A language's own name for itself, as the language menu shows it."""
    name = Locale.parse(locale).get_display_name(locale) or locale
    return name[:1].upper() + name[1:]


def locale_query(locale: str) -> str:
    """The current request's query string with ``locale`` set, for a menu link."""
    from flask import request

    pairs = [(k, v) for k, v in request.args.items(multi=True) if k != LOCALE_PARAM]
    pairs.append((LOCALE_PARAM, locale))
    return "?" + urlencode(pairs)


# --- time zone --------------------------------------------------------------


def parse_timezone(name: Optional[str]) -> Optional[ZoneInfo]:
    if not name or len(name) > 64:
        return None
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        return None


def current_timezone() -> ZoneInfo:
    """The operator's time zone as the browser reported it (cookie
    ``pgbus_tz``), UTC when unknown or not a real zone."""
    from flask import has_request_context, request

    if has_request_context():
        return parse_timezone(request.cookies.get(TIMEZONE_COOKIE)) or UTC
    return UTC


# --- lookup -----------------------------------------------------------------


def _candidates(locale: str) -> Iterator[Catalog]:
    for code in (locale, FALLBACK_LOCALE) if locale != FALLBACK_LOCALE else (locale,):
        found = catalog(code)
        if found is not None:
            yield found


def _render(key: str, count: Optional[int], kwargs: dict, fmt: Callable[[str, dict], object]):
    """Look ``key`` up in the current locale then English, and format it.
    A translation that fails to format (a placeholder it should not have)
    falls back to English as well."""
    locale = current_locale()
    if isinstance(kwargs.get("count"), int) and not isinstance(kwargs["count"], bool):
        # Shown with the language's digit grouping: 1,234 / 1.234 / 1 234.
        kwargs = {**kwargs, "count": format_decimal(kwargs["count"], locale=locale)}
    for found in _candidates(locale):
        entry = found.messages.get(key)
        if entry is None:
            continue
        text = found.form(entry, count if count is not None else 1)
        try:
            return fmt(text, kwargs)
        except (KeyError, ValueError, TypeError) as error:
            if found.locale == FALLBACK_LOCALE:
                raise
            log.warning("pgbus-web: %s message %s does not format (%s)", found.locale, key, error)
    log.warning("pgbus-web: message %s is in no catalog", key)
    return fmt(key, {})


def _format_text(text: str, kwargs: dict) -> str:
    # A name holding a bidi control is isolated (FSI … PDI): it cannot
    # turn the rest of the sentence around (bidi.py).
    return text % {name: bidi.isolate_text(value) for name, value in kwargs.items()}


def _format_html(text: str, kwargs: dict) -> Markup:
    # Markup's % escapes every argument that is not Markup itself; a name
    # holding a bidi control goes in a <bdi>.
    return Markup(text) % {name: bidi.isolate_html(value) for name, value in kwargs.items()}


def t(key: str, **kwargs) -> str:
    """The message ``key`` in the current locale. A plural key given
    ``count=`` picks its plural form."""
    return _render(key, kwargs.get("count"), kwargs, _format_text)


def t_html(key: str, **kwargs) -> Markup:
    """An ``_html`` message: its own markup kept, non-Markup arguments escaped."""
    return _render(key, kwargs.get("count"), kwargs, _format_html)


def tn(key: str, count: int, **kwargs) -> str:
    """The plural form of ``key`` for ``count`` (also given as ``%(count)s``)."""
    return _render(key, count, {**kwargs, "count": count}, _format_text)


def tn_html(key: str, count: int, **kwargs) -> Markup:
    return _render(key, count, {**kwargs, "count": count}, _format_html)


# --- wiring into Flask --------------------------------------------------------

TEMPLATE_GLOBALS = {
    "t": t,
    "t_html": t_html,
    "tn": tn,
    "tn_html": tn_html,
    "current_locale": current_locale,
    "current_timezone": current_timezone,
    "available_locales": available_locales,
    "locale_name": locale_name,
    "locale_query": locale_query,
}


def init_locale(
    target,
    default_locale: Union[str, Callable[[], str]] = FALLBACK_LOCALE,
    cookie_path: Union[str, Callable[[], str]] = "/",
) -> Callable[[], str]:
    """Pick the locale for each request of *target* (a Blueprint or a whole
    Flask app) and remember ``?locale=`` in a cookie. ``default_locale`` is
    a code or a callable returning one (read per request, so it can come
    from settings). Returns the cookie path as a callable, for the page
    that tells timezone.js where its cookie goes."""
    from flask import g, request

    def default() -> str:
        return default_locale() if callable(default_locale) else default_locale

    # A blueprint mounted under a prefix keeps its cookies to that prefix,
    # not the whole host site; timezone.js reads the same path from the page.
    def path() -> str:
        return cookie_path() if callable(cookie_path) else cookie_path

    def choose_locale():
        g.setdefault(_G_LOCALE, select_locale(request, default()))

    def remember_locale(response):
        asked = match_locale(request.args.get(LOCALE_PARAM))
        if asked and asked != request.cookies.get(LOCALE_COOKIE):
            response.set_cookie(
                LOCALE_COOKIE,
                asked,
                max_age=int(COOKIE_MAX_AGE.total_seconds()),
                path=path(),
                samesite="Lax",
                httponly=True,
                secure=request.is_secure,
            )
        return response

    target.before_request(choose_locale)
    target.after_request(remember_locale)
    return path


def init_app(
    target,
    default_locale: Union[str, Callable[[], str]] = FALLBACK_LOCALE,
    cookie_path: Union[str, Callable[[], str]] = "/",
) -> None:
    """init_locale, and give *target*'s templates ``t``, ``t_html``,
    ``tn``, ``tn_html``, ``current_locale`` and friends (per request: a
    host's Jinja globals are left alone)."""
    path = init_locale(target, default_locale, cookie_path)
    target.context_processor(lambda: {**TEMPLATE_GLOBALS, "i18n_cookie_path": path()})
