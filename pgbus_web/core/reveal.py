"""A Reveal: one run's values the policy redacts, in clear, for a
principal with the reveal power on its class, after the audit line that
says so is written (docs/redaction.md). The one way every door reveals:
the run page's Reveal, ``POST /api/v1/runs/<id>/reveal``, ``pgbus-web
runs show --reveal`` and MCP's ``show_run(reveal=true)``."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy.engine import Engine

from . import page_reads, permissions, redacting
from .settings import Settings


def reveal(
    engine: Engine,
    settings: Settings,
    workflow_id: str,
    *,
    principal: permissions.Principal,
    reason: str | None = None,
    now: datetime | None = None,
) -> dict[str, Any]:
    """The run's page context (reads.run_context) with its values in
    clear. reads.NotFound when there is no run; permissions.NotPermitted
    when *principal* may not reveal on its class (nothing written, nothing
    shown). Read on *engine* (the primary): the audit line just written
    is in the trail it shows."""
    try:
        run = redacting.record_reveal(engine, principal, workflow_id, reason=reason)
    except LookupError:
        raise page_reads.NotFound(workflow_id) from None
    with engine.connect() as conn:
        return page_reads.run_context(conn, settings, run["workflow_id"], now=now, reveal=True)
