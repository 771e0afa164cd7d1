"""Every name the dashboard's templates call, given to them in one place.

The blueprint's templates get them per request (one context processor),
so a host app's Jinja globals are never changed or shadowed outside the
dashboard. _macros.html is imported without context, so what it calls
sits in one namespaced global of the app's environment, ``pgbus_web``;
an app that already has a global of that name is refused at start-up
rather than silently overwritten.
"""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

from flask import Blueprint

from ... import bidi, i18n
from ...core.words import presenters, timefmt
from ...plumbing import csrf, reading
from ..routes import actions, operations, reveal
from . import activity_chart, cells, filter_chips, frame, kept_rows, template_helpers, timeline

# The one global the macros read: pgbus_web.t(...), pgbus_web.presenters...
MACRO_GLOBAL = "pgbus_web"
MACROS = SimpleNamespace(
    t=i18n.t,
    current_locale=i18n.current_locale,
    current_timezone=i18n.current_timezone,
    presenters=presenters,
    cells=cells,
    timefmt=timefmt,
    timeline=timeline,
    bidi=bidi,
    batch_url=template_helpers.batch_url,
)


def context_names(cookie_path: Callable[[], str]) -> dict[str, Any]:
    """What the blueprint's templates read besides their own context."""
    return {
        **i18n.TEMPLATE_GLOBALS,
        "i18n_cookie_path": cookie_path(),
        **frame.TEMPLATE_NAMES,
        **template_helpers.TEMPLATE_NAMES,
        **filter_chips.TEMPLATE_NAMES,
        **csrf.TEMPLATE_NAMES,
        **reading.TEMPLATE_NAMES,
        **actions.TEMPLATE_NAMES,
        **operations.TEMPLATE_NAMES,
        **reveal.TEMPLATE_NAMES,
        **activity_chart.TEMPLATE_NAMES,
        "kept_row": kept_rows.kept_row,
    }


def add_macro_global(env) -> None:
    """Put MACROS in *env* (a Jinja environment) under MACRO_GLOBAL."""
    existing = env.globals.setdefault(MACRO_GLOBAL, MACROS)
    if existing is not MACROS:
        raise RuntimeError(
            f"pgbus-web: the app already has a Jinja global named {MACRO_GLOBAL!r}; "
            "the dashboard's macros need that name"
        )


def init_blueprint(blueprint: Blueprint, cookie_path: Callable[[], str]) -> None:
    blueprint.context_processor(lambda: context_names(cookie_path))

    @blueprint.record_once
    def _macro_global(setup_state) -> None:
        add_macro_global(setup_state.app.jinja_env)
