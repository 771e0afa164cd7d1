"""What every page's frame needs: the navigation and the stylesheets and
scripts the layout links."""

from __future__ import annotations

from typing import Any

from flask import current_app, request, url_for

from ...i18n import t

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
)
# Endpoints that belong to a nav entry, for aria-current.
NAV_SECTIONS = {
    "pgbus_web.workflows": ("pgbus_web.workflows", "pgbus_web.workflow", "pgbus_web.insights"),
    "pgbus_web.operations": ("pgbus_web.operations", "pgbus_web.operation", "pgbus_web.operation_create"),
}


def has_endpoint(endpoint: str) -> bool:
    return endpoint in current_app.view_functions


def nav() -> list[dict[str, Any]]:
    items = []
    for endpoint, key in NAV:
        if not has_endpoint(endpoint):
            continue
        section = NAV_SECTIONS.get(endpoint, (endpoint,))
        items.append(
            {"url": url_for(endpoint), "label": t(key), "current": request.endpoint in section}
        )
    return items


# What the templates call (template_names.py gives them).
TEMPLATE_NAMES: dict[str, Any] = {"pgbus_nav": nav, "pgbus_assets": {"stylesheets": STYLESHEETS, "scripts": SCRIPTS}}
