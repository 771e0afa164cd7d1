"""The dashboard's words: key-based messages in twelve languages.

Message ids are keys that mirror pgbus's i18n keys
(``pgbus.workflows.statuses.paused``); the English text lives in the ``en``
catalog like every other language. The catalogs are the dashboard's own
Flask-Babel ``Domain`` (``DOMAIN``, gettext domain ``pgbus_web``, its own
directory), so a host app's catalogs and the dashboard's never mix.

A development checkout reads ``translations/<locale>/LC_MESSAGES/pgbus_web.po``
and compiles it in memory on first use, so it never serves a stale ``.mo``;
the installed wheel carries compiled ``pgbus_web.mo`` files only (built by
``hatch_build.py``). ``catalog_files.compile_po`` does both compilations.

The dashboard is a blueprint mounted in host apps that may run their own
Flask-Babel with their own locale, so the locale chosen here lives on
``flask.g`` under our own name and is set only for the blueprint's own
requests: the host's pages keep the host's locale. The host's choice is
read, never changed: its Flask-Babel selectors (or the ``locale_selector``
and ``timezone_selector`` settings) come after the dashboard's own
``?locale=`` and cookies (docs/i18n.md).

A message missing in a locale (absent, empty or fuzzy) shows the English
text. ``t_html`` and ``tn_html`` trust the message text and escape every
argument that is not already ``Markup``.
"""

from __future__ import annotations

import contextlib
import contextvars
import io
import logging
from collections.abc import Callable, Iterator
from datetime import timedelta, tzinfo
from functools import cache, lru_cache
from pathlib import Path
from typing import Any
from urllib.parse import urlencode
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import flask_babel
from babel import Locale, support
from babel.numbers import format_decimal
from flask import g, has_request_context, request
from markupsafe import Markup

from . import bidi, catalog_files

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
_G_TIMEZONE = "pgbus_web_timezone"
_G_TOKEN = "pgbus_web_choice_token"
# The (locale, zone) of the dashboard request being handled: set by its
# before_request, reset by its teardown. Read by every t() and moment, so
# a context variable rather than flask.g behind two proxies.
_request_choice: contextvars.ContextVar[tuple | None] = contextvars.ContextVar("pgbus_web_request_choice", default=None)
_forced_locale: contextvars.ContextVar[str | None] = contextvars.ContextVar("pgbus_web_forced_locale", default=None)


def translations_dir() -> Path:
    """Where the catalogs are: inside the installed package (the wheel
    puts them there) or at the root of a source checkout."""
    packaged = Path(__file__).resolve().parent / "translations"
    if packaged.is_dir():
        return packaged
    return Path(__file__).resolve().parent.parent / "translations"


@lru_cache(maxsize=1)
def available_locales() -> tuple[str, ...]:
    """The locales that have a catalog, English first."""
    found = catalog_files.locales(translations_dir())
    if FALLBACK_LOCALE in found:
        found.remove(FALLBACK_LOCALE)
        found.insert(0, FALLBACK_LOCALE)
    return tuple(found)


def _compiled(locale: str) -> bytes | None:
    """*locale*'s compiled catalog: from its ``.po`` when there is one (a
    checkout: the source is the only truth), else the wheel's ``.mo``."""
    root = translations_dir()
    source = catalog_files.po_path(root, locale)
    if source.is_file():
        return catalog_files.compile_po(source, locale)
    compiled = catalog_files.mo_path(root, locale)
    if compiled.is_file():
        return compiled.read_bytes()
    return None


@cache
def catalog(locale: str) -> support.Translations | None:
    """*locale*'s own messages, without a fallback (None: no catalog)."""
    data = _compiled(locale)
    if data is None:
        return None
    return support.Translations(io.BytesIO(data), domain=catalog_files.DOMAIN)


@cache
def _with_fallback(locale: str) -> support.NullTranslations:
    # What DOMAIN hands Flask-Babel's gettext: the locale, then English.
    data = _compiled(locale)
    if data is None:
        return catalog(FALLBACK_LOCALE) or support.NullTranslations()
    found = support.Translations(io.BytesIO(data), domain=catalog_files.DOMAIN)
    english = catalog(FALLBACK_LOCALE)
    if english is not None and locale != FALLBACK_LOCALE:
        found.add_fallback(english)
    return found


# What else remembers translated words (timefmt's relative texts): forgotten
# with the catalogs.
_on_reload: list[Callable[[], None]] = []


def on_reload(forget: Callable[[], None]) -> None:
    """Call *forget* whenever the catalogs are reloaded."""
    _on_reload.append(forget)


def reload() -> None:
    """Forget the loaded catalogs (after editing a ``.po`` in a running process)."""
    catalog.cache_clear()
    _with_fallback.cache_clear()
    available_locales.cache_clear()
    _rendered.clear()
    for forget in _on_reload:
        forget()


class DashboardDomain(flask_babel.Domain):
    """The dashboard's Flask-Babel domain: its own directory and gettext
    domain, in the dashboard's locale (``current_locale()``), never the
    host app's. It needs no ``Babel`` on the app, so a host without
    Flask-Babel gets none installed."""

    def __init__(self) -> None:
        super().__init__(domain=catalog_files.DOMAIN)

    @property
    def translation_directories(self) -> list[str]:
        return [str(translations_dir())]

    def get_translations(self) -> support.NullTranslations:
        return _with_fallback(current_locale())


DOMAIN = DashboardDomain()


# --- the locale in effect ------------------------------------------------


def match_locale(tag: str | None) -> str | None:
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


def current_locale() -> str:
    """The locale of what is being rendered: a forced one, else the one this
    request chose, else English."""
    forced = _forced_locale.get()
    if forced:
        return forced
    choice = _request_choice.get()
    return choice[0] if choice is not None else FALLBACK_LOCALE


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


def host_selectors(app) -> tuple[Callable | None, Callable | None]:
    """The host app's Flask-Babel ``locale_selector`` and
    ``timezone_selector``, when the host set Flask-Babel up with them."""
    config = app.extensions.get("babel")
    return getattr(config, "locale_selector", None), getattr(config, "timezone_selector", None)


def select_locale(request, default: str = FALLBACK_LOCALE, host: Callable[[], Any] | None = None) -> str:
    """``?locale=``, then the cookie, then the host's choice (*host*: a
    selector returning a code, a Babel Locale or None), then
    Accept-Language (best quality first, region falling back to the
    language), then ``default``."""
    for candidate in (request.args.get(LOCALE_PARAM), request.cookies.get(LOCALE_COOKIE)):
        chosen = match_locale(candidate)
        if chosen:
            return chosen
    if host is not None:
        chosen = match_locale(_tag(host()))
        if chosen:
            return chosen
    for tag, _quality in request.accept_languages:
        chosen = match_locale(tag)
        if chosen:
            return chosen
    return match_locale(default) or FALLBACK_LOCALE


def _tag(value) -> str | None:
    # A selector may answer "de_AT", Locale("de", "AT") or None.
    if isinstance(value, Locale):
        return str(value)
    return value if isinstance(value, str) else None


@lru_cache(maxsize=64)
def locale_name(locale: str) -> str:
    """A language's own name for itself, as the language menu shows it
    (Babel's, looked up once per language: every page's menu lists all)."""
    name = Locale.parse(locale).get_display_name(locale) or locale
    return name[:1].upper() + name[1:]


def locale_query(locale: str) -> str:
    """The current request's query string with ``locale`` set, for a menu link."""
    pairs = [(k, v) for k, v in request.args.items(multi=True) if k != LOCALE_PARAM]
    pairs.append((LOCALE_PARAM, locale))
    return "?" + urlencode(pairs)


# --- time zone --------------------------------------------------------------


def parse_timezone(name: str | None) -> ZoneInfo | None:
    if not name or len(name) > 64:
        return None
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        return None


def as_zone(value) -> ZoneInfo | None:
    """A host selector's answer as a ZoneInfo: a zone name, a ZoneInfo, or a
    pytz zone (Flask-Babel's kind); None for anything else."""
    if isinstance(value, ZoneInfo):
        return value
    if isinstance(value, str):
        return parse_timezone(value)
    if isinstance(value, tzinfo):
        return parse_timezone(getattr(value, "zone", None))
    return None


def select_timezone(request, host: Callable[[], Any] | None = None) -> ZoneInfo:
    """The browser's zone (cookie ``pgbus_tz``, written by timezone.js),
    else the host's choice (*host*: a selector), else UTC."""
    chosen = parse_timezone(request.cookies.get(TIMEZONE_COOKIE))
    if chosen is None and host is not None:
        chosen = as_zone(host())
    return chosen or UTC


def current_timezone() -> ZoneInfo:
    """The operator's time zone as this request chose it (select_timezone);
    outside the dashboard's requests the cookie's, else UTC."""
    choice = _request_choice.get()
    if choice is not None:
        return choice[1]
    if has_request_context():
        return parse_timezone(request.cookies.get(TIMEZONE_COOKIE)) or UTC
    return UTC


# --- lookup -----------------------------------------------------------------


def _whole(count) -> int:
    """The number a plural rule is asked about: a count, or a numeral string."""
    try:
        return abs(int(count))
    except (TypeError, ValueError):
        return 1


def _lookup(found: support.Translations, key: str, count) -> str | None:
    """*key*'s text in *found* (the form for *count* of a plural), or None."""
    # gettext gives a plural entry's singular; a count picks its form.
    if count is None:
        text = found.gettext(key)
    else:
        text = found.ngettext(key, key, _whole(count))
        if text == key:
            text = found.gettext(key)
    return None if text == key else text


def _count_text(count: int, locale: str) -> str:
    # Shown with the language's digit grouping: 1,234 / 1.234 / 1 234.
    # Below 1000 every catalog's language writes plain ASCII digits, so
    # the common small count skips Babel's number formatting.
    if 0 <= count < 1000:
        return str(count)
    return format_decimal(count, locale=locale)


# Formatted messages per (locale, key, count, formatter, arguments): a page
# asks for the same words many times (column labels, "by system", status
# names), and a message is a pure function of these. An argument's type is
# part of the key, since Markup("<b>") equals "<b>" but formats unescaped.
# Cleared with the catalogs (reload) and whole when full.
_rendered: dict = {}
_RENDERED_MAX = 20_000


def _render(key: str, count: int | None, kwargs: dict, fmt: Callable[[str, dict], object]):
    """_render_fresh, remembered when its arguments can be a dict key."""
    locale = current_locale()
    try:
        memo = (locale, key, count, fmt, tuple((name, type(value), value) for name, value in kwargs.items()))
        text = _rendered.get(memo)
    except TypeError:  # an argument that cannot be hashed: format it afresh
        return _render_fresh(locale, key, count, kwargs, fmt)
    if text is None:
        text = _render_fresh(locale, key, count, kwargs, fmt)
        if len(_rendered) >= _RENDERED_MAX:
            _rendered.clear()
        _rendered[memo] = text
    return text


def _render_fresh(locale: str, key: str, count: int | None, kwargs: dict, fmt: Callable[[str, dict], object]):
    """Look ``key`` up in *locale* then English, and format it. A
    translation that fails to format (a placeholder it should not have)
    falls back to English as well."""
    given = kwargs.get("count")
    if isinstance(given, int) and not isinstance(given, bool):
        kwargs = {**kwargs, "count": _count_text(given, locale)}
    for code in (locale, FALLBACK_LOCALE) if locale != FALLBACK_LOCALE else (locale,):
        found = catalog(code)
        text = None if found is None else _lookup(found, key, count)
        if text is None:
            continue
        try:
            return fmt(text, kwargs)
        except (KeyError, ValueError, TypeError) as error:
            if code == FALLBACK_LOCALE:
                raise
            log.warning("pgbus-web: %s message %s does not format (%s)", code, key, error)
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


Selectors = Callable[[], tuple]


def init_locale(
    target,
    default_locale: str | Callable[[], str] = FALLBACK_LOCALE,
    cookie_path: str | Callable[[], str] = "/",
    selectors: Selectors | None = None,
) -> Callable[[], str]:
    """Pick the locale and the time zone for each request of *target* (a
    Blueprint or a whole Flask app), once, and remember ``?locale=`` in a
    cookie. ``default_locale`` is a code or a callable returning one (read
    per request, so it can come from settings); *selectors* returns the
    host's ``(locale_selector, timezone_selector)``, either None. Returns
    the cookie path as a callable, for the page that tells timezone.js
    where its cookie goes."""

    def default() -> str:
        return default_locale() if callable(default_locale) else default_locale

    # A blueprint mounted under a prefix keeps its cookies to that prefix,
    # not the whole host site; timezone.js reads the same path from the page.
    def path() -> str:
        return cookie_path() if callable(cookie_path) else cookie_path

    def choose():
        # Once per request: every t() and every moment reads the result.
        host_locale, host_zone = selectors() if selectors is not None else (None, None)
        if _G_LOCALE in g:
            return
        setattr(g, _G_LOCALE, select_locale(request, default(), host_locale))
        setattr(g, _G_TIMEZONE, select_timezone(request, host_zone))
        setattr(g, _G_TOKEN, _request_choice.set((g.get(_G_LOCALE), g.get(_G_TIMEZONE))))

    def forget(_error=None):
        token = g.pop(_G_TOKEN, None)
        if token is not None:
            _request_choice.reset(token)

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

    target.before_request(choose)
    target.after_request(remember_locale)
    target.teardown_request(forget)
    return path


def init_app(
    target,
    default_locale: str | Callable[[], str] = FALLBACK_LOCALE,
    cookie_path: str | Callable[[], str] = "/",
    selectors: Selectors | None = None,
) -> None:
    """init_locale, and give *target*'s templates ``t``, ``t_html``,
    ``tn``, ``tn_html``, ``current_locale`` and friends (per request: a
    host's Jinja globals are left alone)."""
    path = init_locale(target, default_locale, cookie_path, selectors)
    target.context_processor(lambda: {**TEMPLATE_GLOBALS, "i18n_cookie_path": path()})
