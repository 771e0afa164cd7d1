"""The blueprint's side of the security boundary: who may see the pages
(the host's ``can_view`` hook) and the headers every response carries.

The pages satisfy the Content-Security-Policy below: no inline script, no
inline style (colours and sizes come from classes in the stylesheets, or
from SVG presentation attributes), every asset from the blueprint itself.
htmx is told not to inject its own indicator <style> (see layout.html).
"""

from __future__ import annotations

import logging

from flask import Blueprint, abort, g, request

from . import hx
from .extension import state

log = logging.getLogger(__name__)

CONTENT_SECURITY_POLICY = "; ".join(
    (
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self' data:",
        "font-src 'self'",
        # htmx's requests go back to the dashboard only.
        "connect-src 'self'",
        "form-action 'self'",
        "frame-ancestors 'none'",
        "base-uri 'none'",
    )
)
# A dashboard uses none of these browser features.
PERMISSIONS_POLICY = ", ".join(
    f"{feature}=()"
    for feature in (
        "accelerometer",
        "camera",
        "geolocation",
        "gyroscope",
        "magnetometer",
        "microphone",
        "payment",
        "usb",
        "interest-cohort",
    )
)
SECURITY_HEADERS = {
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    # Run URLs name runs; other sites need not learn them.
    "Referrer-Policy": "same-origin",
    "Permissions-Policy": PERMISSIONS_POLICY,
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "Cross-Origin-Opener-Policy": "same-origin",
}

# Endpoints answered without asking can_view: they say nothing about runs.
OPEN_ENDPOINTS = ("static", "health")
# Requests that change something: only for those who may act (can_act).
UNSAFE_METHODS = frozenset(("POST", "PUT", "PATCH", "DELETE"))

_warned_open = False


def _warn_open_once() -> None:
    global _warned_open
    if not _warned_open:
        _warned_open = True
        log.warning(
            "pgbus-web: no can_view hook is configured, so the dashboard is open to "
            "anyone who can reach it; put it behind your app's login and pass can_view"
        )


def may_view() -> bool:
    """True when the host's can_view hook lets this request see the pages
    (asked once per request)."""
    if "_pgbus_may_view" not in g:
        hook = state().settings.can_view
        if hook is None:
            _warn_open_once()
            g._pgbus_may_view = True
        else:
            g._pgbus_may_view = bool(hook(request))
    return g._pgbus_may_view


def may_act() -> bool:
    """True when this request may change runs: can_act, else can_view."""
    hook = state().settings.can_act
    if hook is None:
        return may_view()
    return bool(hook(request))


def _check_view() -> None:
    endpoint = (request.endpoint or "").rpartition(".")[2]
    if endpoint in OPEN_ENDPOINTS:
        return
    if not may_view():
        abort(403)


def _check_act() -> None:
    # Before the CSRF check and the view: a viewer's post reads and writes nothing.
    if request.method in UNSAFE_METHODS and not may_act():
        abort(403)


def _add_headers(response):
    for name, value in SECURITY_HEADERS.items():
        response.headers.setdefault(name, value)
    if response.mimetype == "text/html":
        # Pages show live state: never serve them from a cache.
        response.headers.setdefault("Cache-Control", "no-store")
    return hx.vary_on_hx_request(response)


def init_blueprint(blueprint: Blueprint) -> None:
    blueprint.before_request(_check_view)
    blueprint.before_request(_check_act)
    blueprint.after_request(_add_headers)
