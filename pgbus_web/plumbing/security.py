"""The blueprint's side of the security boundary: who may see the pages
(the host's ``can_view`` hook) and the headers every response carries.

"Every response" is every answer in the blueprint's URL space: its routes
(the blueprint's after_request), and the answers Werkzeug's routing gives
before any blueprint is chosen, under the blueprint's prefix (a 404 for an
unknown path, a 405, the redirect of ``//`` to ``/``): an app-wide
after_request that leaves the host's own routes, and anything outside the
prefix, alone. A redirect of the dashboard never names a host: Werkzeug's
routing redirects are absolute URLs built from the request's ``Host``
header, so their Location is cut down to the path (same origin).

The pages satisfy the Content-Security-Policy below: no inline script, no
inline style (colours and sizes come from classes in the stylesheets, or
from SVG presentation attributes), every asset from the blueprint itself.
htmx is told not to inject its own indicator <style> (see layout.html).
"""

from __future__ import annotations

import logging
import re
from urllib.parse import urlsplit, urlunsplit

from flask import Blueprint, Flask, abort, g, request
from werkzeug.utils import redirect

from ..core import permissions, policy
from ..rules import roles
from . import hx
from .state import state
from .unrouted import adopted, under

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


def _host_may_act() -> bool:
    hook = state().settings.can_act
    if hook is None:
        return may_view()
    return bool(hook(request))


def current_policy() -> policy.Policy:
    """The policy, as this process keeps it (read once per request)."""
    if "_pgbus_policy" not in g:
        g._pgbus_policy = policy.current(state().database.primary)
    return g._pgbus_policy


def principal() -> permissions.Principal:
    """Who this request is, as the policy knows them: the name the host's
    actor_name gives, the role its role_of gives (else operator when
    can_act lets them act, viewer otherwise), the groups of groups_of."""
    if "_pgbus_principal" not in g:
        settings = state().settings
        name = str(settings.actor_name(request) or "").strip()[:ACTOR_LIMIT] or "anonymous"
        if settings.role_of is not None:
            role = settings.role_of(request)
            role = role if role in roles.ROLES else roles.VIEWER
        else:
            role = roles.OPERATOR if _host_may_act() else roles.VIEWER
        groups = tuple(settings.groups_of(request) or ()) if settings.groups_of is not None else ()
        g._pgbus_principal = permissions.user(name, role, groups=groups)
    return g._pgbus_principal


def may(power: str, workflow_class: str | None = None) -> bool:
    """May this request use *power* on runs of *workflow_class*?"""
    return permissions.may(principal(), power, workflow_class, current_policy())


def may_act() -> bool:
    """True when this request may change something: any verb on some
    class, approving, or the policy (its role or a grant)."""
    if "_pgbus_may_act" not in g:
        found, kept = principal(), current_policy()
        g._pgbus_may_act = permissions.acts_at_all(found, kept) or any(
            permissions.may_some(found, power, kept) for power in roles.BEYOND_VERBS
        )
    return g._pgbus_may_act


def may_release_locks() -> bool:
    """Uniqueness locks belong to no workflow class: releasing one is for
    whoever may cancel runs of every class (an operator, or a grant on
    "*"), not for a grant narrowed to some classes."""
    return may("cancel", None)


def powers_key() -> tuple:
    """What a drawing for this request depends on, of its powers."""
    return permissions.fingerprint(principal(), current_policy())


def _check_view() -> None:
    endpoint = (request.endpoint or "").rpartition(".")[2]
    if endpoint in OPEN_ENDPOINTS:
        return
    if not may_view():
        abort(403)


def _check_act() -> None:
    # Before the CSRF check and the view: a viewer's post reads and writes nothing.
    if request.method in UNSAFE_METHODS and not adopted() and not may_act():
        abort(403)


# Leading characters a browser reads as the start of another host's
# address ("//evil", "/\\evil", and tabs or newlines it drops first).
_AUTHORITY_START = re.compile(r"^[/\\\t\r\n]{2,}")


def same_origin(location: str) -> str:
    """*location* as a path on this site: scheme and host dropped, and a
    leading run of slashes made one. A path already on this site is kept."""
    parts = urlsplit(location)
    if not parts.scheme and not parts.netloc and not _AUTHORITY_START.match(location):
        return location
    path = "/" + parts.path.lstrip("/\\\t\r\n")
    return urlunsplit(("", "", path, parts.query, parts.fragment))


def _same_origin_redirect(response):
    location = response.headers.get("Location")
    if location is None:
        return
    safe = same_origin(location)
    if safe != location:
        response.headers["Location"] = safe
        if 300 <= response.status_code < 400:
            # Werkzeug's redirect body links to the address too.
            response.set_data(redirect(safe, response.status_code).get_data())


def add_headers(response):
    """The security headers, no-store for pages, Vary: HX-Request, and a
    Location that stays on this site."""
    for name, value in SECURITY_HEADERS.items():
        response.headers.setdefault(name, value)
    if response.mimetype == "text/html":
        # Pages show live state: never serve them from a cache.
        response.headers.setdefault("Cache-Control", "no-store")
    _same_origin_redirect(response)
    return hx.vary_on_hx_request(response)


def init_blueprint(blueprint: Blueprint) -> None:
    blueprint.before_request(_check_view)
    blueprint.before_request(_check_act)
    blueprint.after_request(add_headers)

    @blueprint.record_once
    def _cover_unrouted(setup_state) -> None:
        prefix = (setup_state.url_prefix or "").rstrip("/")

        def unrouted(response):
            # No rule matched (404, 405, a slash redirect): the host's
            # own routes keep their own headers.
            if request.url_rule is None and under(request.path, prefix):
                return add_headers(response)
            return response

        setup_state.app.after_request(unrouted)


def init_standalone(app: Flask) -> None:
    """The standalone app is the dashboard alone: its every answer (the
    root's redirect too) carries the headers."""
    app.after_request(add_headers)


# Longest actor name kept: the audit trail shows it on every line.
ACTOR_LIMIT = 200


def actor() -> str:
    """Who acts, as the audit trail records it: ``dashboard:<name>`` with
    the name from the actor_name setting (the host's resolver)."""
    name = str(state().settings.actor_name(request) or "").strip() or "anonymous"
    return f"dashboard:{name[:ACTOR_LIMIT]}"
