"""A run id in a URL: ``/workflows/<id>``, ``/workflows/<id>/<verb>``.

A run id is any text another writer chose, so it may hold a ``/``
(``orders/1042``) or be a word the dashboard's own routes use after
``/workflows/`` (``bulk``, ``insights``): ``/workflows/bulk/cancel`` would
be the bulk route, not Cancel on the run ``bulk``. The ``pgbus_run_id``
converter takes the rest of the path (slashes included; the verb is
always the last segment), and writes an id that would be misread as
``~`` and its UTF-8 in URL-safe base64, which no route word and no
readable id starts with:

- the first segment is a route word (RESERVED), or the id starts with ``~``;
- an empty, ``.`` or ``..`` segment (a leading, trailing or doubled
  slash; browsers fold dot segments away);
- a last segment that names something done to a run (ACTIONS: a verb,
  ``signals``, ``reveal``): ``/runs/orders/cancel`` is Cancel on the run
  ``orders``, and the API's read of one run (READ_CONVERTER) never takes
  that address, so its ``Allow`` names only the post.

Every other id is its own URL, percent-encoded as usual, so a link stays
readable. Reading back, ``~…`` is decoded (a segment that is not good
base64 of UTF-8 stays as it is, and finds no run).
"""

from __future__ import annotations

import base64
import binascii

from flask import Blueprint
from werkzeug.routing import PathConverter

from ..rules import verb_table

CONVERTER = "pgbus_run_id"
# The converter of a route that reads one run: not an address ending in ACTIONS.
READ_CONVERTER = "pgbus_run_id_read"
ESCAPE = "~"
# The first path segments after /workflows/ that other routes own.
# tests/web/test_web_run_ids.py checks that every static one is listed.
RESERVED = frozenset({"bulk", "insights", "operations", "export.csv", "export.ndjson", "compare"})
# The last path segments after a run id that routes own: what is done to it.
ACTIONS = frozenset({*verb_table.BY_NAME, "signals", "reveal"})


def needs_escape(workflow_id: str) -> bool:
    segments = workflow_id.split("/")
    return (
        workflow_id.startswith(ESCAPE)
        or segments[0] in RESERVED
        or any(segment in ("", ".", "..") for segment in segments)
        or (len(segments) > 1 and segments[-1] in ACTIONS)
    )


def escape(workflow_id: str) -> str:
    return ESCAPE + base64.urlsafe_b64encode(workflow_id.encode("utf-8")).rstrip(b"=").decode("ascii")


def unescape(segment: str) -> str | None:
    """The id an escaped segment stands for; None when it is not one that
    ``escape`` writes."""
    body = segment[len(ESCAPE) :]
    try:
        raw = base64.b64decode(body + "=" * (-len(body) % 4), altchars=b"-_", validate=True)
        workflow_id = raw.decode("utf-8")
    except (binascii.Error, ValueError):
        return None
    return workflow_id if escape(workflow_id) == segment else None


class RunIdConverter(PathConverter):
    """The rest of the path, as above."""

    def to_python(self, value: str) -> str:
        if not value.startswith(ESCAPE):
            return value
        head, slash, rest = value.partition("/")
        workflow_id = unescape(head)
        return value if workflow_id is None else workflow_id + slash + rest

    def to_url(self, value: str) -> str:
        value = str(value)
        return escape(value) if needs_escape(value) else super().to_url(value)


class RunReadConverter(RunIdConverter):
    """A run id, but not one whose last segment is in ACTIONS: that address
    is the action's (the id itself is then written escaped)."""

    regex = "[^/].*?" + "".join(f"(?<!/{action})" for action in sorted(ACTIONS))


def init_blueprint(blueprint: Blueprint) -> None:
    """Register the converters on the app; before the routes that use them."""

    @blueprint.record_once
    def _converter(setup_state) -> None:
        setup_state.app.url_map.converters.setdefault(CONVERTER, RunIdConverter)
        setup_state.app.url_map.converters.setdefault(READ_CONVERTER, RunReadConverter)
