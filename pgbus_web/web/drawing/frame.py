"""What every page's frame needs: the navigation and the stylesheets and
scripts the layout links."""

from __future__ import annotations

from typing import Any

from flask import current_app, request, url_for
from sqlalchemy.exc import SQLAlchemyError
from werkzeug.exceptions import HTTPException

from ...i18n import t
from ...plumbing import security
from ...rules import roles

# Assets every page links after pgbus.css and htmx, from the blueprint's static folder.
STYLESHEETS = ("timeline.css", "actions.css")
# idiomorph before focus.js, which merges swapped fragments with it.
SCRIPTS = ("timezone.js", "vendor/idiomorph-ext.min.js", "actions.js", "focus.js", "keys.js")

# The top navigation: (endpoint, message key). An entry whose endpoint is
# not registered (the Locks page in a build without it) is left out.
NAV = (
    ("pgbus_web.workflows", "pgbus.web.nav.workflows"),
    ("pgbus_web.operations", "pgbus.web.nav.operations"),
    ("pgbus_web.locks", "pgbus.web.nav.locks"),
    ("pgbus_web.workers", "pgbus.web.nav.workers"),
    ("pgbus_web.policy", "pgbus.web.nav.policy"),
    ("pgbus_web.sessions", "pgbus.web.nav.sessions"),
)
# Entries drawn only for who holds a power: a link that answers 403 to
# everyone else is noise in their bar.
NAV_POWERS = {"pgbus_web.sessions": roles.SESSIONS}
# Endpoints that belong to a nav entry, for aria-current.
NAV_SECTIONS = {
    "pgbus_web.workflows": ("pgbus_web.workflows", "pgbus_web.workflow", "pgbus_web.insights"),
    "pgbus_web.operations": ("pgbus_web.operations", "pgbus_web.operation", "pgbus_web.operation_create"),
}


def has_endpoint(endpoint: str) -> bool:
    return endpoint in current_app.view_functions


def _may(power: str) -> bool:
    """May this request use *power*? No when that cannot be told: an error
    page drawn because the database or the sign-in failed must not fail
    again over a link."""
    try:
        return security.may(power)
    except (SQLAlchemyError, HTTPException):
        return False


def nav() -> list[dict[str, Any]]:
    items = []
    for endpoint, key in NAV:
        if not has_endpoint(endpoint):
            continue
        if endpoint in NAV_POWERS and not _may(NAV_POWERS[endpoint]):
            continue
        section = NAV_SECTIONS.get(endpoint, (endpoint,))
        items.append({"url": url_for(endpoint), "label": t(key), "current": request.endpoint in section})
    return items


# What the templates call (template_names.py gives them).
TEMPLATE_NAMES: dict[str, Any] = {"pgbus_nav": nav, "pgbus_assets": {"stylesheets": STYLESHEETS, "scripts": SCRIPTS}}
