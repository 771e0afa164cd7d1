"""While an operation's chunks write, the kept pages follow them within
shared.OPERATION_LAG rather than on every commit, read again behind the
request that finds them old, which is not made to wait; any other write,
and the operation's end, show on the next request
(models/changes.by_operation, docs/operations.md "The pages while an
operation runs")."""

from __future__ import annotations

from contextlib import contextmanager

import sqlalchemy as sa
from support.action_support import Browser, running
from support.run_views import OPERATOR, badge, page, role_app  # noqa: F401  (fixtures)

from pgbus_web import defaults
from pgbus_web.demo.workflows import REGISTRY
from pgbus_web.models import changes
from pgbus_web.rules import run_filters as filters
from pgbus_web.runtime import operation_policy, operation_record, operation_runner
from pgbus_web.web.answering import page_cache

CANCEL = "UPDATE pgbus_workflows SET status = 'cancelled', finished_at = now() WHERE workflow_id = :w"


def cancel_behind(engine, workflow_id: str, *, by_operation: bool) -> None:
    with engine.begin() as conn:
        if by_operation:
            changes.by_operation(conn)
        conn.execute(sa.text(CANCEL), {"w": workflow_id})


def test_a_chunks_write_shows_once_the_read_has_stood_for_the_lag(
    database, engine, runs, bucket_clock, sent_statements, monkeypatch
):
    monkeypatch.setattr(page_cache, "OPERATION_LAG", 3600.0)
    workflow_id = running(runs)
    alice = Browser(role_app(database).test_client(), OPERATOR)
    before = page(alice, workflow_id)
    cancel_behind(engine, workflow_id, by_operation=True)
    sent_statements.clear()
    held = page(alice, workflow_id)
    assert len(sent_statements) == 1, sent_statements  # the marker only: the read stands
    assert badge(held) == badge(before)
    # The same read, once it has stood for the lag, is read again, behind
    # the request that found it old: that one is shown the read before.
    monkeypatch.setattr(page_cache, "OPERATION_LAG", 0.0)
    assert badge(page(alice, workflow_id)) == badge(before)
    page_cache.settle()
    after = page(alice, workflow_id)
    assert badge(after) != badge(before)
    fresh = page(Browser(role_app(database).test_client(), OPERATOR), workflow_id)
    assert badge(after) == badge(fresh)


def test_any_other_write_shows_at_once(database, engine, runs, bucket_clock, monkeypatch):
    monkeypatch.setattr(page_cache, "OPERATION_LAG", 3600.0)
    workflow_id = running(runs)
    alice = Browser(role_app(database).test_client(), OPERATOR)
    before = page(alice, workflow_id)
    cancel_behind(engine, workflow_id, by_operation=False)
    assert badge(page(alice, workflow_id)) != badge(before)


def test_the_marker_without_operations_moves_for_every_other_write(engine, runs):
    workflow_id = running(runs)
    with engine.connect() as conn:
        first = changes.marker_with(conn, "SELECT 1", {})
    cancel_behind(engine, workflow_id, by_operation=True)
    with engine.connect() as conn:
        second = changes.marker_with(conn, "SELECT 1", {})
    assert second[0] > first[0] and second[1] == first[1]
    with engine.begin() as conn:
        changes.mark(conn)
        third = changes.marker_with(conn, "SELECT 1", {})
    assert third[0] > second[0] and third[1] > second[1]


def test_an_operations_end_shows_at_once(database, engine, runs, bucket_clock, monkeypatch):
    monkeypatch.setattr(page_cache, "OPERATION_LAG", 3600.0)
    workflow_id = running(runs)
    alice = Browser(role_app(database).test_client(), OPERATOR)
    before = page(alice, workflow_id)
    operation = operation_policy.create(
        engine,
        filters.parse({"q": workflow_id}),
        "cancel",
        {},
        reason="lag",
        actor=OPERATOR,
        expected=None,
        registry=REGISTRY,
        thresholds={"threshold": defaults.STALL_THRESHOLD, "waiting_threshold": defaults.WAITING_THRESHOLD},
    )
    runner = operation_runner.Runner(engine, REGISTRY)
    while runner.step(operation["id"]) is not None:
        pass
    assert operation_record.find(engine, operation["id"])["moved"] == 1
    after = page(alice, workflow_id)
    assert badge(after) != badge(before)
    assert badge(after) == badge(page(Browser(role_app(database).test_client(), OPERATOR), workflow_id))


def test_the_read_behind_keeps_no_request_waiting(database, engine, runs, bucket_clock, sent_statements, monkeypatch):
    """While the new read is held up (the runs table locked by another
    transaction), the request that started it and the one after are
    answered from the read before, on the marker alone; once the lock goes,
    the next request is shown the new read without reading it itself."""
    monkeypatch.setattr(page_cache, "OPERATION_LAG", 0.0)
    workflow_id = running(runs)
    app = role_app(database)
    alice, bob = (Browser(app.test_client(), OPERATOR) for _ in range(2))
    before = page(alice, workflow_id)
    cancel_behind(engine, workflow_id, by_operation=True)
    with engine.connect() as holder:
        holder.execute(sa.text("LOCK TABLE pgbus_workflows IN ACCESS EXCLUSIVE MODE"))
        sent_statements.clear()
        assert badge(page(alice, workflow_id)) == badge(before)
        assert badge(page(bob, workflow_id)) == badge(before)
        # Each request read its marker, and the read behind began on its own.
        markers = [statement for statement in sent_statements if "pgbus_web_change" in statement]
        assert len(markers) == 2, sent_statements
        assert len(page_cache._behind) == 1
        holder.rollback()
    page_cache.settle()
    assert not page_cache._behind
    sent_statements.clear()
    after = page(bob, workflow_id)
    assert len(sent_statements) == 1, sent_statements  # the marker: read and drawn behind
    assert badge(after) != badge(before)
    assert badge(after) == badge(page(Browser(role_app(database).test_client(), OPERATOR), workflow_id))


def test_a_read_behind_that_fails_is_read_by_the_next_request(database, engine, runs, bucket_clock, monkeypatch):
    monkeypatch.setattr(page_cache, "OPERATION_LAG", 0.0)
    workflow_id = running(runs)
    alice = Browser(role_app(database).test_client(), OPERATOR)
    before = page(alice, workflow_id)
    cancel_behind(engine, workflow_id, by_operation=True)
    with engine.connect() as holder:
        # The read behind waits for the lock past its own statement timeout.
        holder.execute(sa.text("LOCK TABLE pgbus_workflows IN ACCESS EXCLUSIVE MODE"))
        monkeypatch.setattr(page_cache.reading, "read", _short_timeout(page_cache.reading.read))
        assert badge(page(alice, workflow_id)) == badge(before)
        page_cache.settle()
        holder.rollback()
    after = page(alice, workflow_id)
    assert badge(after) != badge(before)


def _short_timeout(read):
    """reading.read, its sent_statements cancelled after 200 ms (for this
    transaction only: the pooled connection keeps its own setting)."""

    @contextmanager
    def short():
        with read() as conn:
            conn.execute(sa.text("SET LOCAL statement_timeout = '200ms'"))
            yield conn

    return short
