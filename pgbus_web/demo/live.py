"""The live side of the demo: new runs keep starting and shipments keep
being confirmed, so the dashboard has something moving while you look."""

from __future__ import annotations

import logging
import random
import threading
from datetime import timedelta

from sqlalchemy.engine import Engine

from ..models import workflow_rows
from ..models.workflow_rows import SubjectAlreadyOngoing
from ..runtime import system, verbs
from ..runtime.clock import utcnow
from ..runtime.errors import WorkflowError
from . import workflows as demo

log = logging.getLogger(__name__)

# Seconds between two new runs.
START_EVERY = 4.0
# A waiting order gets its shipment confirmed after this long, most of the time.
CONFIRM_AFTER = timedelta(seconds=45)
CONFIRM_SHARE = 0.7
# Actor of what the demo does on an operator's behalf.
DEMO_ACTOR = "demo"

# Shipments confirmed per round, newest waits first.
CONFIRM_BATCH = 5


class LiveDemo:
    """A background thread that starts demo runs and confirms shipments."""

    def __init__(self, engine: Engine, *, first_number: int, rng: random.Random | None = None):
        self.engine = engine
        self.number = first_number
        self.rng = rng or random.Random()
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._loop, name="pgbus-demo-live", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self._stop.set()
        self.thread.join(timeout=10)

    def _loop(self) -> None:
        while not self._stop.wait(START_EVERY):
            try:
                self.start_one()
                self.confirm_shipments()
            except Exception:  # noqa: BLE001  (the demo goes on)
                log.exception("demo activity failed")

    def start_one(self) -> None:
        self.number += 1
        workflow_class = self.rng.choice(demo.REGISTRY.names)
        arguments = demo.sample_arguments(workflow_class, self.number, self.rng)
        subject = {demo.ORDER: "Order", demo.ONBOARDING: "User", demo.REFUND: "Refund"}[workflow_class]
        try:
            system.start(
                self.engine,
                workflow_class,
                arguments,
                registry=demo.REGISTRY,
                subject_type=subject,
                subject_id=self.number,
                actor=DEMO_ACTOR,
            )
        except SubjectAlreadyOngoing:
            pass

    def confirm_shipments(self) -> None:
        with self.engine.connect() as conn:
            waiting = workflow_rows.waiting_for_signal(
                conn, "shipment_confirmed", waiting_before=utcnow() - CONFIRM_AFTER, limit=CONFIRM_BATCH
            )
        for workflow_id in waiting:
            if self.rng.random() > CONFIRM_SHARE:
                continue
            try:
                verbs.signal(
                    self.engine,
                    workflow_id,
                    "shipment_confirmed",
                    {"carrier": self.rng.choice(["DHL", "PostNord", "UPS"])},
                    idempotency_key=f"shipment-{workflow_id}",
                    actor=DEMO_ACTOR,
                )
            except WorkflowError:
                pass  # the run moved on meanwhile
