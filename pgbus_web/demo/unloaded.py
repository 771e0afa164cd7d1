"""Runs of a class the demo's worker does not load.

A dashboard often watches runs whose definition lives in another process
(or was removed). The demo keeps a few: nobody picks up their due steps, so
they turn overdue and stay so, and their pages show what the dashboard
offers without a step list (no resume, rerun or skip).
"""

from __future__ import annotations

import random
from datetime import timedelta

from sqlalchemy.engine import Engine

from ..runtime import system
from ..runtime.clock import utcnow
from ..runtime.definitions import Step, Workflow

INVOICE = "InvoiceWorkflow"


def _noop(ctx):
    return None


# Declared here only to start runs; deliberately not in demo.workflows.REGISTRY.
INVOICE_WORKFLOW = Workflow(INVOICE, [Step("render_pdf", _noop), Step("send_invoice", _noop)])

# How long ago the runs' first steps fell due: all past the stall threshold.
DUE_AGO = (timedelta(minutes=30), timedelta(days=3))


def seed_unloaded(engine: Engine, runs: int = 12, *, rng: random.Random | None = None) -> int:
    """Start *runs* InvoiceWorkflow runs whose first step fell due a while ago."""
    rng = rng or random.Random()
    now = utcnow()
    low, high = (int(bound.total_seconds()) for bound in DUE_AGO)
    for number in range(1, runs + 1):
        started = now - timedelta(seconds=rng.randint(low, high))
        system.start(
            engine,
            INVOICE_WORKFLOW,
            {"invoice_id": 7000 + number},
            subject_type="Invoice",
            subject_id=7000 + number,
            now=started,
        )
    return runs
