"""Many runs written by set-based SQL, a batch of runs per transaction: the
million-run tables of bench/search.py and bench/operations.py, in minutes
where the demo's seeder (``pgbus-web seed``, every run with its whole
history) takes much longer. Run rows only, plus, when the shape asks, one
failed attempt of each paused run's current step.

A Shape says what the runs look like; run *g* (counting on from the
highest id already there) takes the class, status and step at position
g modulo each list's length, so every combination recurs evenly.
"""

from __future__ import annotations

from dataclasses import dataclass

import sqlalchemy as sa

from pgbus_web import db
from pgbus_web.demo.workflows import REGISTRY

BATCH = 100_000


@dataclass(frozen=True)
class Shape:
    classes: tuple[str, ...]
    subject_types: tuple[str, ...]  # one per class, at the same position
    statuses: tuple[str, ...]
    steps: tuple[str, ...]
    failed_attempts: bool = False  # each paused run's current step failed, 3rd attempt
    arguments: bool = False  # ARGUMENTS below, else {}


# Three classes and their subject types (each subject id shared by three
# runs of different types), every status (four in ten completed), an
# idempotency key on every other run.
MIXED = Shape(
    classes=("OrderWorkflow", "RefundWorkflow", "OnboardingWorkflow"),
    subject_types=("Order", "Refund", "User"),
    statuses=(
        "completed",
        "completed",
        "completed",
        "completed",
        "failed",
        "cancelled",
        "paused",
        "ready",
        "waiting",
        "running",
    ),
    steps=tuple(f"step_{n}" for n in range(7)),
)
# The arguments of a shape that has them (bench/search.py, bench/export.py):
# a customer shared by CUSTOMER_RUNS runs, a nested order id unique to
# the run, an array of tags ("vip" on one run in a hundred).
CUSTOMER_RUNS = 50
ARGUMENTS = (
    f"jsonb_build_object('customer_id', g / {CUSTOMER_RUNS}, 'order', jsonb_build_object('id', g, 'total', g % 997),"
    " 'tags', CASE WHEN g % 100 = 0 THEN jsonb_build_array('vip', 'eu') ELSE jsonb_build_array('eu') END)"
)
MIXED_WITH_ARGUMENTS = Shape(MIXED.classes, MIXED.subject_types, MIXED.statuses, MIXED.steps, arguments=True)
# OrderWorkflow runs paused after capture_payment failed: what a resume
# operation acts on.
PAUSED_AFTER_FAILURE = Shape(
    classes=("OrderWorkflow",),
    subject_types=("Order",),
    statuses=("paused",),
    steps=("capture_payment",),
    failed_attempts=True,
)

RUNS = """
WITH shape AS (
    SELECT CAST(:classes AS text[]) AS classes, CAST(:digests AS text[]) AS digests,
           CAST(:subject_types AS text[]) AS subject_types, CAST(:statuses AS text[]) AS statuses,
           CAST(:steps AS text[]) AS steps
)
INSERT INTO pgbus_workflows (workflow_id, workflow_class, definition_digest, status, current_step,
                             subject_type, subject_id, idempotency_key,
                             started_at, paused_at, created_at, updated_at, arguments)
SELECT gen_random_uuid()::text,
       classes[1 + g % cardinality(classes)],
       digests[1 + g % cardinality(classes)],
       statuses[1 + g % cardinality(statuses)],
       steps[1 + g % cardinality(steps)],
       subject_types[1 + g % cardinality(classes)],
       (g / cardinality(classes))::text,
       CASE WHEN g % 2 = 0 THEN 'Checkout-' || md5(g::text) END,
       moment,
       CASE WHEN statuses[1 + g % cardinality(statuses)] = 'paused' THEN moment END,
       moment,
       moment,
       {arguments}
FROM shape, generate_series(CAST(:first AS bigint), CAST(:last AS bigint)) AS g,
     LATERAL (SELECT now() - make_interval(secs => CAST(:last AS bigint) - g) AS moment) AS spread
"""

FAILED_ATTEMPTS = """
INSERT INTO pgbus_workflow_steps (workflow_id, step_name, status, attempt, error_class,
                                  error_message, finished_at, created_at)
SELECT workflow_id, current_step, 'failed', 3, 'TimeoutError', 'gateway timeout',
       paused_at, paused_at - interval '1 minute'
FROM pgbus_workflows WHERE id > :above AND status = 'paused' ORDER BY id
"""


def insert(url: str, count: int, shape: Shape = MIXED, *, batch: int = BATCH) -> None:
    """Add *count* runs of *shape* to the database at *url* (schema
    installed), then VACUUM ANALYZE what was written. Without the pages'
    statement timeout: a busy machine takes a while."""
    engine = db.create_engine(url, db.UNBOUNDED_STATEMENTS, pool_size=1, max_overflow=0)
    try:
        digests = [REGISTRY.get(name).digest if name in REGISTRY else None for name in shape.classes]
        while count > 0:
            size, count = min(count, batch), count - batch
            with engine.begin() as conn:
                above = conn.execute(sa.text("SELECT COALESCE(max(id), 0) FROM pgbus_workflows")).scalar_one()
                conn.execute(
                    sa.text(RUNS.format(arguments=ARGUMENTS if shape.arguments else "'{}'::jsonb")),
                    {
                        "classes": list(shape.classes),
                        "digests": digests,
                        "subject_types": list(shape.subject_types),
                        "statuses": list(shape.statuses),
                        "steps": list(shape.steps),
                        "first": above + 1,
                        "last": above + size,
                    },
                )
                if shape.failed_attempts:
                    conn.execute(sa.text(FAILED_ATTEMPTS), {"above": above})
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.exec_driver_sql("VACUUM ANALYZE pgbus_workflows")
            if shape.failed_attempts:
                conn.exec_driver_sql("VACUUM ANALYZE pgbus_workflow_steps")
    finally:
        engine.dispose()
