"""The plain JSON shapes every JSON door reads (pgbus_web.core.representations):
built from the pages' own context and rows, moments as ISO 8601 UTC, and
every odd stored value (±infinity, JSON Python cannot read) serializing."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone

from support.action_support import paused_on_capture, waiting_for_shipment
from support.web_helpers import set_column

from pgbus_web import defaults
from pgbus_web.core import page_reads
from pgbus_web.core import representations as rep
from pgbus_web.core.settings import Settings
from pgbus_web.demo.workflows import REGISTRY
from pgbus_web.models import workflow_index
from pgbus_web.models.values import INFINITY, MINUS_INFINITY, RawJson
from pgbus_web.rules import states, verb_table

SETTINGS = Settings(registry=REGISTRY)


def detail(engine, workflow_id):
    with engine.connect() as conn:
        page = page_reads.run_context(conn, SETTINGS, workflow_id)
    return rep.run_detail(page)


def test_moments_are_iso_utc_and_infinities_their_word():
    assert rep.moment(datetime(2026, 3, 1, 15, 5, tzinfo=timezone(timedelta(hours=1)))) == "2026-03-01T14:05:00Z"
    assert rep.moment(datetime(2026, 3, 1, 14, 5)) == "2026-03-01T14:05:00Z"  # naive: UTC already
    assert rep.moment(INFINITY) == "infinity" and rep.moment(MINUS_INFINITY) == "-infinity"
    assert rep.moment(None) is None


def test_a_row_shapes_each_value_as_plain_does_whatever_its_type():
    # _object skips plain() for the common types; every kind of moment
    # (UTC as psycopg loads it, another zone, naive, microseconds, the
    # infinities) and the other kinds come out exactly as plain() says.
    from zoneinfo import ZoneInfo

    values = {
        "utc": datetime(2026, 3, 1, 14, 5, 7, 123456, tzinfo=UTC),
        "utc_whole": datetime(2026, 3, 1, 14, 5, tzinfo=UTC),
        "zone_utc": datetime(2026, 3, 1, 14, 5, tzinfo=ZoneInfo("UTC")),
        "berlin": datetime(2026, 3, 1, 15, 5, tzinfo=ZoneInfo("Europe/Berlin")),
        "naive": datetime(2026, 3, 1, 14, 5),
        "infinity": INFINITY,
        "minus_infinity": MINUS_INFINITY,
        "text": "x",
        "number": 3,
        "none": None,
        "raw": RawJson("{bad"),
        "nested": {"at": [1, "2"]},
    }
    shaped = rep._object(values, tuple(values))
    assert shaped == {name: rep.plain(value) for name, value in values.items()}
    assert shaped["utc"] == "2026-03-01T14:05:07.123456Z" and shaped["utc_whole"] == "2026-03-01T14:05:00Z"
    assert shaped["zone_utc"] == shaped["utc_whole"] == shaped["berlin"] == shaped["naive"]
    assert shaped["infinity"] == "infinity" and type(shaped["raw"]) is str


def test_a_paused_run_in_detail(engine, runs):
    workflow_id = paused_on_capture(runs)
    shown = json.loads(json.dumps(detail(engine, workflow_id)))
    assert shown["run"]["workflow_id"] == workflow_id and shown["run"]["status"] == states.PAUSED
    assert shown["run"]["stuck_reason"] is None  # given by the caller, who knows the thresholds
    assert shown["run"]["paused_at"].endswith("Z")
    assert shown["available_actions"] == list(verb_table.allowed(states.PAUSED, True))
    assert shown["plan"] == {"action": "retry", "step": "capture_payment"}
    names = [group["name"] for group in shown["steps"]]
    assert names[:2] == ["reserve_stock", "capture_payment"]
    capture = shown["steps"][1]["attempts"][0]
    assert capture["error_class"] == "TimeoutError" and capture["status"] == "failed"
    assert "raw_json" not in shown["run"]


def test_odd_stored_values_serialize(engine, runs):
    workflow_id = waiting_for_shipment(runs)
    set_column(engine, "pgbus_workflows", "created_at", "-infinity", workflow_id)
    set_column(engine, "pgbus_workflows", "arguments", "[" * 3000 + "]" * 3000, workflow_id)
    set_column(engine, "pgbus_workflow_steps", "timeout_at", "infinity", workflow_id)
    shown = detail(engine, workflow_id)
    text = json.dumps(shown)
    back = json.loads(text)
    assert back["run"]["created_at"] == "-infinity"
    assert back["run"]["raw_json"] == ["arguments"] and back["run"]["arguments"].startswith("[[[[")
    assert back["run"]["latest_step"]["timeout_at"] == "infinity"
    # The pages' stuck rule reads the same row without failing.
    with engine.connect() as conn:
        [row] = workflow_index.page(conn, limit=5, now=datetime.now(UTC), **page_reads.thresholds(engine))
    reason = rep.stuck_reason(
        row,
        now=datetime.now(UTC),
        stall_threshold=defaults.STALL_THRESHOLD,
        waiting_threshold=defaults.WAITING_THRESHOLD,
    )
    json.dumps(rep.run_row(row, stuck=reason))


def test_counts_and_groups(engine, runs):
    paused_on_capture(runs)
    paused_on_capture(runs)
    with engine.connect() as conn:
        page = page_reads.index_context(conn, SETTINGS, None, parts=("counts", "attention"))
    shown = json.loads(json.dumps(rep.counts(page["counts"])))
    assert shown["total"] == 2 and shown["totals"][states.PAUSED] == 2 and shown["totals"][states.READY] == 0
    [group] = [rep.attention_group(group, True) for group in page["attention_groups"]]
    assert group["count"] == 2 and group["reason"] == states.PAUSED_ERROR
    assert group["filters"]["reason"] == states.PAUSED_ERROR and "resume" in group["actions"]
    json.dumps(group)


def test_plain_keeps_raw_json_as_its_text():
    assert rep.plain({"a": RawJson("[[1]]"), "b": [INFINITY]}) == {"a": "[[1]]", "b": ["infinity"]}
