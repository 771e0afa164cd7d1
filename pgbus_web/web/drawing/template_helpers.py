"""Template helpers of the pages: a run's state with the configured
thresholds, JSON values and durations. Given to the
blueprint's templates per request (template_names.py), so they read the
settings and the clock of the request being answered."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from babel.lists import format_list
from babel.numbers import format_decimal
from flask import current_app, g, url_for
from markupsafe import Markup

from ... import bidi
from ...core.words import presenters, timefmt, verb_labels
from ...i18n import current_locale, current_timezone
from ...plumbing import run_ids
from ...plumbing.security import current_policy
from ...rules import run_filters as filters
from . import dom_ids, filter_chips, runtime_words


def run_state(run: Mapping[str, Any], now: datetime) -> presenters.RunState:
    kept = current_policy()
    return presenters.run_state(
        run,
        now=now,
        stall_threshold=kept.stall_threshold,
        waiting_threshold=kept.waiting_threshold,
    )


def status_tone(status: str) -> str:
    """A run status's plain tone (no stuck sharpening), for the counts."""
    return presenters.RUN_TONES.get(status, "gray")


def number(value: int | float | None) -> str:
    """A count as the operator's language writes it: 1,000,000 / 1.000.000."""
    if value is None:
        return ""
    return format_decimal(value, locale=current_locale())


def duration_between(start: datetime | None, end: datetime | None) -> str:
    return timefmt.between(start, end)


def batch_url(batch_id: str) -> str:
    """The batch page's address (the run page and the next sentence link it)."""
    return url_for("pgbus_web.batch", batch_id=batch_id)


def run_url(workflow_id: str) -> str:
    """The run page's address, as url_for writes it: the part before the
    id is asked of url_for once per request and the id written by the
    route's own converter, since a runs table links 50 runs."""
    made = g.get("_pgbus_run_url")
    if made is None:
        converter = current_app.url_map.converters[run_ids.CONVERTER](current_app.url_map)
        made = g._pgbus_run_url = (url_for("pgbus_web.workflow", workflow_id="x")[:-1], converter.to_url)
    prefix, to_url = made
    return prefix + to_url(workflow_id)


def batch_link(name: Any, batch_id: str | None):
    return presenters.batch_link(name, batch_id, batch_url)


def error_words(message: str | None, now: datetime) -> Markup:
    """A stored error message in the operator's language (runtime_words)."""
    return runtime_words.error_message(message, now=now, locale=current_locale(), tz=current_timezone())


def detail_words(key: Any, value: Any, now: datetime) -> Markup:
    """An audit detail's value: a moment or a span through the time
    formatter, anything else as stored JSON."""
    shown = runtime_words.detail_value(key, value, now=now, locale=current_locale(), tz=current_timezone())
    return shown if shown is not None else presenters.stored_json(value)


def listing(items) -> str:
    """*items* as one list in the operator's language ("A, B and C")."""
    return format_list([str(item) for item in items], locale=current_locale())


# What the templates call (template_names.py gives them).
TEMPLATE_NAMES: dict[str, Any] = {
    "format_list": listing,
    "hidden_without_definition": verb_labels.hidden_without_definition,
    "error_words": error_words,
    "detail_words": detail_words,
    "run_state": run_state,
    "json_value": presenters.json_value,
    "batch_progress": presenters.batch_progress,
    "step_open": presenters.step_open,
    "bidi_html": bidi.html,
    "isolate_text": bidi.isolate_text,
    "stored_json": presenters.stored_json,
    "code": presenters.code,
    "batch_link": batch_link,
    "run_url": run_url,
    "duration": timefmt.duration,
    "duration_between": duration_between,
    "status_tone": status_tone,
    "number": number,
    "filter_chips": filter_chips.chips,
    "group_query": filters.group_query,
    "failed_group_query": filters.failed_group_query,
    "group_row_id": dom_ids.group_row_id,
}
