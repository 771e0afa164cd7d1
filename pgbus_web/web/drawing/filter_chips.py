"""The index's active filters shown as chips: a label, a value in the
operator's words and the link that drops that one filter."""

from __future__ import annotations

from typing import Any

from ...i18n import t
from ...rules import run_filters
from ...rules.run_filters import RunFilters

# Chips: (query parameter, RunFilters attribute, label key, value key prefix).
_CHIPS = (
    ("q", "q", "pgbus.workflows.search.chip", None),
    ("workflow_class", "workflow_class", "pgbus.workflows.filters.workflow_class", None),
    ("status", "status", "pgbus.workflows.filters.status", "pgbus.workflows.statuses."),
    ("reason", "reason", "pgbus.workflows.filters.reason", "pgbus.workflows.attention.reasons."),
    ("subject", "subject", "pgbus.workflows.filters.subject", None),
    ("step", "step", "pgbus.workflows.filters.step", None),
    ("error_class", "error_class", "pgbus.workflows.filters.error_class", None),
    ("since", "since", "pgbus.workflows.filters.since", "pgbus.workflows.ranges."),
    ("from", "raw_from", "pgbus.workflows.filters.from", None),
    ("to", "raw_to", "pgbus.workflows.filters.to", None),
    ("operation", "operation", "pgbus.workflows.filters.operation", None),
    ("worker", "worker", "pgbus.workflows.filters.worker", None),
)


def chips(filters: RunFilters) -> list[dict[str, Any]]:
    """The active filters as label, value and the query without that filter."""
    found = []
    for name, attribute, label_key, value_prefix in _CHIPS:
        value = getattr(filters, attribute)
        if name == "error_class" and filters.no_error_class:
            name, value, value_prefix = "no_error_class", t("pgbus.workflows.filters.no_error_class"), None
        if not value:
            continue
        found.append(
            {
                "name": name,
                "label": t(label_key),
                "value": t(value_prefix + value) if value_prefix else str(value),
                "query": filters.query(**{name: None}),
            }
        )
    for key, matches in (
        ("pgbus.workflows.filters.argument", filters.arguments),
        ("pgbus.workflows.filters.signal_payload", filters.signals),
    ):
        for match in matches:
            found.append(
                {
                    "name": match.name,
                    "label": t(key, path=match.path),
                    "value": match.value,
                    "query": filters.query(**{match.name: None}),
                }
            )
    return found


def short_search(search: str | None) -> dict[str, int] | None:
    """For a search too short to be looked for as part of a run id (one
    word under SEARCH_ID_FRAGMENT_MIN characters), the lengths that are
    (anywhere in the id, and at its start); None for any other search.
    "No run matches" alone leaves the operator guessing why."""
    if not search or len(search.split()) != 1 or len(search) >= run_filters.SEARCH_ID_FRAGMENT_MIN:
        return None
    return {"min": run_filters.SEARCH_ID_FRAGMENT_MIN, "prefix": run_filters.SEARCH_ID_PREFIX_MIN}


# What the templates call (template_names.py gives them).
TEMPLATE_NAMES = {"short_search": short_search}
