"""What every page's frame needs: the navigation, the optional assets that
other parts of the dashboard ship, and URL helpers for the templates."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from flask import Blueprint, current_app, request, url_for

from ..i18n import t

STATIC_DIR = Path(__file__).resolve().parent / "static"

# Assets included on every page when the package ships them (each is
# written by the part of the dashboard that needs it).
OPTIONAL_STYLESHEETS = ("timeline.css", "actions.css")
OPTIONAL_SCRIPTS = ("timezone.js", "pgbus.js", "actions.js")

# The top navigation: (endpoint, message key). An entry whose endpoint is
# not registered (the Locks page in a build without it) is left out.
NAV = (
    ("pgbus_web.workflows", "pgbus.web.nav.workflows"),
    ("pgbus_web.locks", "pgbus.web.nav.locks"),
)
# Endpoints that belong to a nav entry, for aria-current.
NAV_SECTIONS = {
    "pgbus_web.workflows": ("pgbus_web.workflows", "pgbus_web.workflow", "pgbus_web.insights"),
}


def assets() -> dict[str, tuple[str, ...]]:
    return {
        "stylesheets": tuple(name for name in OPTIONAL_STYLESHEETS if (STATIC_DIR / name).is_file()),
        "scripts": tuple(name for name in OPTIONAL_SCRIPTS if (STATIC_DIR / name).is_file()),
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


def init_blueprint(blueprint: Blueprint) -> None:
    found = assets()

    @blueprint.context_processor
    def _chrome() -> dict[str, Any]:
        return {"pgbus_nav": nav, "pgbus_assets": found, "pgbus_has_endpoint": has_endpoint}
