"""Every page of the dashboard with data in it, and the checks of a page's layout in Chromium
(nothing cut, nothing outside the window), with where screenshots go."""

from __future__ import annotations

import os
from pathlib import Path

import sqlalchemy as sa

from pgbus_web.core import page_reads, policy
from pgbus_web.demo.workflows import REGISTRY
from pgbus_web.runtime import operation_policy, operation_record
from support.action_support import operator_app
from support.lock_support import Locks
from support.session_support import seed_sessions
from support.web_helpers import every_state

LOCALES = ["en", "de", "ja"]


def admin_app(database):
    """The standalone app as an admin sees it: the Policy page shows its forms too."""
    return operator_app(
        database,
        actor_name=lambda request: "browser",
        refresh_interval=600,
        worker_gone_after=300,
        role_of=lambda request: "admin",
    )


def pages(app, runs, engine) -> dict[str, str]:
    made = every_state(runs)
    # A changed rule with a long value: the Policy page's value and history.
    policy.change(
        engine,
        "grants",
        [
            {
                "to": "group:payments-on-call",
                "role": "operator",
                "classes": ["OrderWorkflow", "RefundWorkflow"],
                "verbs": ["resume", "rerun"],
            }
        ],
        actor="dashboard:alice",
        reason="the payments on-call retries payments and refunds, nothing else",
    )
    Locks(engine).queue()
    seed_sessions(engine)
    created = operation_policy.create(
        engine,
        operation_record.filters_of({"filters": {"status": "paused"}}),
        "resume",
        None,
        reason="gateway back",
        actor="dashboard:alice",
        expected=None,
        registry=REGISTRY,
        thresholds=page_reads.thresholds(app.extensions["pgbus_web"].database.primary),
    )
    with engine.begin() as conn:
        batch_id = conn.execute(sa.text("SELECT batch_id FROM pgbus_batches LIMIT 1")).scalar_one()
        # Workers alive, stopped and gone; the gone one holds the running
        # run's step (the index's banner).
        gone = (
            conn.execute(
                sa.text(
                    "INSERT INTO pgbus_web_workers (kind, host, pid, "
                    "started_at, heartbeat_at, steps_done, stopped_at) VALUES"
                    " ('worker', 'worker-1.prod.example.com', 4242, now() - interval '3 hours', now(), 1280, NULL),"
                    " ('serve', 'web-1', 17, now() - interval '1 day', now() - interval '2 hours', 0,"
                    "  now() - interval '2 hours'),"
                    " ('worker', 'worker-2.prod.example.com', 977, now() "
                    "- interval '5 hours', now() - interval '6 minutes',"
                    "  5120, NULL) RETURNING id"
                )
            )
            .scalars()
            .all()[-1]
        )
        conn.execute(
            sa.text(
                "UPDATE pgbus_workflow_steps SET worker_id = :w WHERE workflow_id = :id AND status = 'in_progress'"
            ),
            {"w": gone, "id": made["running"]},
        )
        conn.execute(sa.text("SELECT pgmq.create('refunds')"))
        conn.execute(sa.text("SELECT pgmq.send_batch('refunds', ARRAY['{}', '{}', '{}']::jsonb[])"))
        conn.execute(sa.text("UPDATE pgmq.q_refunds SET enqueued_at = now() - interval '40 minutes'"))
    return {
        "index": "/workflows",
        "run": f"/workflows/{made['paused_error']}",
        "batch": f"/batches/{batch_id}",
        "insights": "/workflows/insights/OrderWorkflow",
        "operations": "/workflows/operations",
        "operation": f"/workflows/operations/{created['id']}",
        "locks": "/locks",
        "workers": "/workers",
        "policy": "/policy",
        "sessions": "/sessions",
    }


SCREENSHOTS_ENV = "PGBUS_TEST_SCREENSHOTS"


DIALOG = "dialog#pgbus-operation-dialog"


GROUP_BUTTON = '#pgbus-attention tr.pgbus-attention-group[data-reason="paused_error"] form[data-verb="retry"] button'


# Visible elements that hide their overflow yet hold wider text than they
# show; hidden on purpose (visually hidden, 1px) or clamped ones aside.
CUT_TEXT = """() => {
  const cut = [];
  for (const el of document.querySelectorAll('body *')) {
    const style = getComputedStyle(el);
    const hides = ['hidden', 'clip'].includes(style.overflowX);
    if (!hides || style.visibility === 'hidden' || el.closest('[data-pgbus-clamp]')) continue;
    const box = el.getBoundingClientRect();
    if (box.width <= 1 || box.height <= 1 || !el.textContent.trim()) continue;
    if (el.scrollWidth > el.clientWidth + 1) {
      cut.push(el.tagName.toLowerCase() + '.' + el.className + ' ' + el.scrollWidth + '>' + el.clientWidth
               + ' ' + el.textContent.trim().slice(0, 40));
    }
  }
  return cut;
}"""


INSIDE = """(sel) => { const r = document.querySelector(sel).getBoundingClientRect();
  return r.top >= 0 && r.left >= 0 && r.bottom <= innerHeight && r.right <= innerWidth; }"""


def saved_to() -> Path | None:
    named = os.environ.get(SCREENSHOTS_ENV)
    if not named:
        return None
    folder = Path(named)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def with_locale(path: str, locale: str) -> str:
    return f"{path}{'&' if '?' in path else '?'}locale={locale}"
