"""The pages: the dashboard's blueprint, with every route module's routes
on it, its templates and its static files (served by the blueprint itself,
no CDN). ``pgbus_web.extension.PgbusWeb`` mounts it in a Flask app beside
the JSON API."""

from __future__ import annotations

from flask import Blueprint, current_app, g, request

from .. import bounded, db, i18n
from ..plumbing import csrf, reading, run_ids, security, unrouted
from ..plumbing.state import EXTENSION_NAME, state
from .drawing import template_names
from .routes import actions, locks, operations, policy, reveal, sessions, views

__all__ = ["STATIC_URL_PATH", "build_blueprint"]

# Where the blueprint serves its own assets, under its URL prefix; a name
# unlikely to clash with a host app's /static.
STATIC_URL_PATH = "/pgbus-static"


def _selectors() -> tuple:
    """The host's (locale_selector, timezone_selector): the settings', else
    its Flask-Babel's."""
    settings = state().settings
    host_locale, host_zone = i18n.host_selectors(current_app)
    return settings.locale_selector or host_locale, settings.timezone_selector or host_zone


# The pages that stream their answer after the view returns (an export of
# every run): their reads go on past the request's teardown, each read
# with its own bound.
_STREAMED = frozenset({"export_csv", "export_ndjson"})
_BUDGET = "_pgbus_wait_budget"


def _start_waiting() -> None:
    """A page's reads share one wait on the database (db.PAGE_WAIT)."""
    if request.method in ("GET", "HEAD") and (request.endpoint or "").rpartition(".")[2] not in _STREAMED:
        setattr(g, _BUDGET, bounded.start_waiting(db.PAGE_WAIT))


def _end_waiting(_problem=None) -> None:
    token = g.pop(_BUDGET, None)
    if token is not None:
        bounded.end_waiting(token)


def build_blueprint() -> Blueprint:
    """A fresh blueprint with every route module's routes on it."""
    blueprint = Blueprint(
        EXTENSION_NAME,
        __name__,
        template_folder="templates",
        static_folder="static",
        static_url_path=STATIC_URL_PATH,
    )
    # First, so that every read of the request (the policy's, the sign-in's) shares it.
    blueprint.before_request(_start_waiting)
    blueprint.teardown_request(_end_waiting)
    # The language and time-zone cookies keep to the dashboard's prefix,
    # like the CSRF cookie.
    cookie_path = i18n.init_locale(
        blueprint,
        default_locale=lambda: state().settings.default_locale,
        cookie_path=csrf.cookie_path,
        selectors=_selectors,
    )
    security.init_blueprint(blueprint)
    # Read-your-writes across a replica (plumbing/reading.py).
    blueprint.after_request(reading.after_request)
    template_names.init_blueprint(blueprint, cookie_path)

    run_ids.init_blueprint(blueprint)  # before the routes that use it
    unrouted.init_blueprint(blueprint)
    views.register(blueprint)
    operations.register(blueprint)
    reveal.register(blueprint)
    actions.register(blueprint)
    locks.register(blueprint)
    policy.register(blueprint)
    sessions.register(blueprint)
    return blueprint
