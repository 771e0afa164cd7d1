"""The extension's state on a Flask app: what the blueprint's requests read
(the settings and the database). A leaf module, so the route modules and
helpers read it without importing the package face."""

from __future__ import annotations

import dataclasses
from typing import Any

from flask import current_app

from ..core.settings import Settings
from ..db import Database

# Key of the extension's state in app.extensions, and the blueprint's name
# (so endpoints are "pgbus_web.workflows", "pgbus_web.workflow", ...).
EXTENSION_NAME = "pgbus_web"


@dataclasses.dataclass
class State:
    """What the blueprint's requests read: the settings and the database."""

    settings: Settings
    database: Database
    # The thread doing queued operations (run_operations), or None: stopped
    # before the database goes, so it never logs a lost connection.
    operations: Any = None


def state() -> State:
    """The extension's state for the current app."""
    return current_app.extensions[EXTENSION_NAME]
