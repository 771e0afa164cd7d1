"""The dashboard's page templates and the fragments each can answer with:
an HTMX request names an element id (HX-Target), the page renders that
block of its own template (render.py). The routes that draw a page, the
actions that redraw it and the live refresh all read these."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Page:
    template: str
    # Element id -> block name, in the page's order.
    fragments: dict[str, str] = field(default_factory=dict)
    # Fragments the live refresh leaves alone: nothing in them changes
    # unless the page's own controls ask (the index's range links follow
    # its filters, redrawn by the filter form's answer).
    unpolled: frozenset[str] = frozenset()

    @property
    def polled(self) -> tuple[str, ...]:
        """The element ids the live refresh swaps, in the page's order."""
        return tuple(target for target in self.fragments if target not in self.unpolled)

    @property
    def blocks(self) -> tuple[str, ...]:
        return tuple(self.fragments.values())


INDEX = Page(
    "pgbus_web/index.html",
    {
        "pgbus-workers-banner": "workers_banner",
        "pgbus-total": "total",
        "pgbus-counts": "counts",
        "pgbus-attention": "attention",
        "pgbus-runs": "runs",
        "pgbus-filter-ranges": "filter_ranges",
        "pgbus-search": "search",
    },
    unpolled=frozenset({"pgbus-filter-ranges", "pgbus-search"}),
)
RUN = Page(
    "pgbus_web/run.html",
    {
        "pgbus-run-header": "run_header",
        "pgbus-run-steps": "run_steps",
        "pgbus-run-signals": "run_signals",
        "pgbus-run-timeline": "run_timeline",
        "pgbus-run-audit": "run_audit",
    },
)
INSIGHTS = Page("pgbus_web/insights.html", {"pgbus-insights": "insights"})
COMPARE = Page("pgbus_web/compare.html", {"pgbus-compare": "compare"})
BATCH = Page("pgbus_web/batch.html", {"pgbus-batch": "batch"})
WORKERS = Page("pgbus_web/workers.html", {"pgbus-workers": "workers"})
POLICY = Page("pgbus_web/policy.html", {"pgbus-policy": "policy"})
SESSIONS = Page("pgbus_web/sessions.html", {"pgbus-sessions": "sessions"})
LOCKS = Page("pgbus_web/locks/index.html", {"pgbus-locks": "locks"})
ERROR = Page("pgbus_web/error.html")
# Operations (web/routes/operations.py): the preview as a page, and alone (the
# dialog htmx swaps into the page it was asked from); one operation, whose
# progress block polls itself while it runs; the recent ones.
OPERATION_PREVIEW = Page("pgbus_web/operations/preview.html")
OPERATION_DIALOG_TEMPLATE = "pgbus_web/operations/_dialog.html"
OPERATION = Page("pgbus_web/operations/show.html", {"pgbus-operation": "operation"})
OPERATIONS = Page("pgbus_web/operations/index.html", {"pgbus-operations": "operations"})
# The messages area every page has (layout.html), alone.
MESSAGES_TEMPLATE = "pgbus_web/_flash.html"
