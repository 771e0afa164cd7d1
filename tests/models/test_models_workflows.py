"""pgbus_workflows: the row lock, single-winner transitions, insert_run's
two uniqueness rules, and the counting and grouping queries behind the
needs-attention view, all against a real PostgreSQL."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa
from sqlalchemy.exc import OperationalError

from pgbus_web.models import (
    events,
    signals,
    steps,
    workflow_attention,
    workflow_capped_counts,
    workflow_counts,
    workflow_index,
    workflow_rows,
    workflow_upkeep,
    workflow_windows,
)
from pgbus_web.rules import states, stuck

NOW = datetime(2026, 3, 10, 12, 0, tzinfo=UTC)
THRESHOLD = timedelta(minutes=10)
WAITING_THRESHOLD = timedelta(hours=24)

_insert_step = sa.text(
    """
    INSERT INTO pgbus_workflow_steps
        (workflow_id, step_name, status, attempt, scheduled_at, started_at, finished_at,
         wait_for, waiting_since, timeout_at, error_class, error_message)
    VALUES
        (:workflow_id, :step_name, :status, :attempt, :scheduled_at, :started_at, :finished_at,
         :wait_for, :waiting_since, :timeout_at, :error_class, :error_message)
    RETURNING id
    """
)


def add_step(conn, workflow_id, step_name, status, **columns):
    values = {
        "attempt": 1,
        "scheduled_at": None,
        "started_at": None,
        "finished_at": None,
        "wait_for": None,
        "waiting_since": None,
        "timeout_at": None,
        "error_class": None,
        "error_message": None,
        **columns,
    }
    return conn.execute(
        _insert_step, {"workflow_id": workflow_id, "step_name": step_name, "status": status, **values}
    ).scalar_one()


@pytest.fixture
def make_run(engine, new_id):
    """make_run(status, step=(name, step_status, {columns}) or None, **run columns) -> workflow_id"""

    def make(status, step=None, *, workflow_class="OrderWorkflow", **attrs):
        workflow_id = new_id()
        with engine.begin() as conn:
            workflow_rows.insert_run(
                conn,
                {
                    "workflow_id": workflow_id,
                    "workflow_class": workflow_class,
                    "status": status,
                    "current_step": step[0] if step else None,
                    **attrs,
                },
            )
            if step:
                name, step_status, columns = (*step, {})[:3]
                add_step(conn, workflow_id, name, step_status, **columns)
        return workflow_id

    return make


def paused_on(name, error_class, message="boom", *, paused_at):
    """Run columns and its failed step, for a run paused on an error."""
    return {
        "step": (name, "failed", {"error_class": error_class, "error_message": message}),
        "paused_at": paused_at,
    }


def count_runs(engine):
    with engine.connect() as conn:
        return conn.execute(sa.text("SELECT count(*) FROM pgbus_workflows")).scalar_one()


# --- lock_for -----------------------------------------------------------------


def test_lock_for_returns_the_row_and_holds_its_lock_until_the_transaction_ends(engine, make_run):
    workflow_id = make_run("ready")
    probe = sa.text("SELECT id FROM pgbus_workflows WHERE workflow_id = :id FOR UPDATE NOWAIT")
    with engine.connect() as holder, engine.connect() as other:
        with holder.begin():
            run = workflow_rows.lock_for(holder, workflow_id)
            assert run["workflow_id"] == workflow_id
            assert run["status"] == "ready"
            with pytest.raises(OperationalError) as caught:
                with other.begin():
                    other.execute(probe, {"id": workflow_id})
            assert caught.value.orig.sqlstate == "55P03"  # lock_not_available
        # Committed: the lock is gone.
        with other.begin():
            assert other.execute(probe, {"id": workflow_id}).scalar_one() == run["id"]


def test_lock_for_an_unknown_run_is_none(engine, new_id):
    with engine.begin() as conn:
        assert workflow_rows.lock_for(conn, new_id()) is None


# --- transition ---------------------------------------------------------------


def test_transition_moves_the_row_once(engine, make_run):
    workflow_id = make_run("ready")
    with engine.begin() as conn:
        assert workflow_rows.transition(conn, workflow_id, from_="ready", to="running", current_step="capture") == 1
        assert workflow_rows.transition(conn, workflow_id, from_="ready", to="running") == 0
        run = workflow_rows.find(conn, workflow_id)
    assert (run["status"], run["current_step"]) == ("running", "capture")


def test_transition_from_a_list_of_statuses(engine, make_run):
    workflow_id = make_run("waiting")
    with engine.begin() as conn:
        assert workflow_rows.transition(conn, workflow_id, from_=states.ONGOING, to="cancelled", finished_at=NOW) == 1
        run = workflow_rows.find(conn, workflow_id)
    assert (run["status"], run["finished_at"]) == ("cancelled", NOW)


def test_two_concurrent_transitions_have_exactly_one_winner(engine, make_run):
    workflow_id = make_run("paused")
    results = {}
    first_moved = threading.Event()

    def second():
        with engine.begin() as conn:
            conn.execute(sa.text("SET LOCAL lock_timeout = '10s'"))
            first_moved.wait(5)
            # Blocks on the first transaction's row lock, then re-checks the
            # status it finds committed.
            results["second"] = workflow_rows.transition(conn, workflow_id, from_="paused", to="cancelled")

    with engine.begin() as conn:
        results["first"] = workflow_rows.transition(conn, workflow_id, from_="paused", to="ready")
        worker = threading.Thread(target=second)
        worker.start()
        first_moved.set()
        worker.join(0.5)
        assert worker.is_alive(), "the second UPDATE should wait for the first transaction"
    worker.join(10)
    assert results == {"first": 1, "second": 0}
    with engine.connect() as conn:
        assert workflow_rows.find(conn, workflow_id)["status"] == "ready"


def test_transition_refuses_an_unknown_column_and_changes_nothing(engine, make_run):
    workflow_id = make_run("ready")
    with engine.begin() as conn:
        with pytest.raises(ValueError, match="not a pgbus_workflows column: status = 'x'; --"):
            workflow_rows.transition(conn, workflow_id, from_="ready", to="running", **{"status = 'x'; --": 1})
        assert workflow_rows.find(conn, workflow_id)["status"] == "ready"


def test_transition_touches_updated_at(engine, make_run):
    long_ago = datetime(2001, 1, 1, tzinfo=UTC)
    workflow_id = make_run("ready", updated_at=long_ago)
    with engine.begin() as conn:
        workflow_rows.transition(conn, workflow_id, from_="ready", to="running")
        assert workflow_rows.find(conn, workflow_id)["updated_at"] > long_ago


# --- insert_run ---------------------------------------------------------------


def test_insert_run_with_a_taken_idempotency_key_inserts_nothing(engine, new_id):
    first, second = new_id(), new_id()
    with engine.begin() as conn:
        assert (
            workflow_rows.insert_run(
                conn,
                {
                    "workflow_id": first,
                    "workflow_class": "OrderWorkflow",
                    "status": "ready",
                    "idempotency_key": "order-1042",
                    "arguments": {"order_id": 1042},
                },
            )
            is True
        )
        assert (
            workflow_rows.insert_run(
                conn,
                {
                    "workflow_id": second,
                    "workflow_class": "OrderWorkflow",
                    "status": "ready",
                    "idempotency_key": "order-1042",
                    "arguments": {"order_id": 9},
                },
            )
            is False
        )
        assert workflow_rows.find(conn, second) is None
        assert workflow_rows.find(conn, first)["arguments"] == {"order_id": 1042}
    assert count_runs(engine) == 1


def test_the_same_idempotency_key_in_another_class_is_another_run(engine, new_id):
    with engine.begin() as conn:
        for klass in ("OrderWorkflow", "RefundWorkflow"):
            assert (
                workflow_rows.insert_run(
                    conn,
                    {"workflow_id": new_id(), "workflow_class": klass, "status": "ready", "idempotency_key": "k"},
                )
                is True
            )
    assert count_runs(engine) == 2


def test_a_second_ongoing_run_for_a_subject_raises_and_leaves_the_transaction_usable(engine, new_id):
    subject = {"workflow_class": "OrderWorkflow", "subject_type": "Order", "subject_id": "1042"}
    with engine.begin() as conn:
        workflow_rows.insert_run(conn, {"workflow_id": new_id(), "status": "paused", **subject})
        with pytest.raises(workflow_rows.SubjectAlreadyOngoing) as caught:
            workflow_rows.insert_run(conn, {"workflow_id": new_id(), "status": "ready", **subject})
        assert str(caught.value) == "OrderWorkflow already has an ongoing run for Order 1042"
        assert (caught.value.subject_type, caught.value.subject_id) == ("Order", "1042")
        # The savepoint rolled back alone: this transaction goes on.
        assert (
            workflow_rows.insert_run(
                conn, {"workflow_id": new_id(), "status": "ready", **subject, "subject_id": "1043"}
            )
            is True
        )
    assert count_runs(engine) == 2


def test_terminal_runs_do_not_hold_the_subject(engine, new_id):
    subject = {"workflow_class": "OrderWorkflow", "subject_type": "Order", "subject_id": "1042"}
    with engine.begin() as conn:
        for status in states.TERMINAL:
            workflow_rows.insert_run(conn, {"workflow_id": new_id(), "status": status, **subject})
        assert workflow_rows.insert_run(conn, {"workflow_id": new_id(), "status": "ready", **subject}) is True
        # Another class may run for the same subject at the same time.
        assert (
            workflow_rows.insert_run(
                conn, {"workflow_id": new_id(), "status": "ready", **subject, "workflow_class": "RefundWorkflow"}
            )
            is True
        )
    assert count_runs(engine) == 5


def test_a_finished_run_frees_its_subject(engine, new_id):
    subject = {"workflow_class": "OrderWorkflow", "subject_type": "Order", "subject_id": "7"}
    first = new_id()
    with engine.begin() as conn:
        workflow_rows.insert_run(conn, {"workflow_id": first, "status": "running", **subject})
        workflow_rows.transition(conn, first, from_="running", to="completed")
        assert workflow_rows.insert_run(conn, {"workflow_id": new_id(), "status": "ready", **subject}) is True


def test_insert_run_refuses_an_unknown_column_and_inserts_nothing(engine, new_id):
    with engine.begin() as conn:
        with pytest.raises(ValueError, match="not a pgbus_workflows column: owner"):
            workflow_rows.insert_run(
                conn, {"workflow_id": new_id(), "workflow_class": "OrderWorkflow", "status": "ready", "owner": "x"}
            )
    assert count_runs(engine) == 0


# --- status_counts ------------------------------------------------------------


def test_status_counts_by_class_and_status(engine, make_run):
    for _ in range(3):
        make_run("completed")
    make_run("paused")
    make_run("paused", workflow_class="RefundWorkflow")
    make_run("failed", workflow_class="RefundWorkflow")
    with engine.connect() as conn:
        assert workflow_counts.status_counts(conn) == {
            ("OrderWorkflow", "completed"): 3,
            ("OrderWorkflow", "paused"): 1,
            ("RefundWorkflow", "paused"): 1,
            ("RefundWorkflow", "failed"): 1,
        }


def test_status_counts_of_no_runs_is_empty(engine):
    with engine.connect() as conn:
        assert workflow_counts.status_counts(conn) == {}


# --- stuck_reason_counts ------------------------------------------------------


@pytest.fixture
def one_run_per_case(make_run):
    """One run for every way a run can (or cannot) be stuck, keyed by what it shows."""
    long_ago = NOW - timedelta(days=2)
    return {
        "stalled": make_run("paused", **paused_on("capture", states.STEP_STALLED_ERROR, paused_at=long_ago)),
        "paused_error": make_run("paused", **paused_on("capture", "TimeoutError", paused_at=long_ago)),
        "paused_manual": make_run(
            "paused", step=("capture", "scheduled", {"scheduled_at": long_ago}), paused_at=long_ago
        ),
        "paused_without_step": make_run("paused", paused_at=long_ago),
        "overdue": make_run("ready", step=("capture", "scheduled", {"scheduled_at": NOW - timedelta(minutes=11)})),
        "due_recently": make_run("ready", step=("capture", "scheduled", {"scheduled_at": NOW - timedelta(minutes=9)})),
        "due_later": make_run("ready", step=("send_tips", "scheduled", {"scheduled_at": NOW + timedelta(days=1)})),
        "waiting_overdue": make_run(
            "waiting",
            step=(
                "await_profile",
                "waiting",
                {"wait_for": "profile_completed", "waiting_since": NOW - timedelta(hours=25)},
            ),
            workflow_class="OnboardingWorkflow",
        ),
        "waiting_with_timeout": make_run(
            "waiting",
            step=(
                "await_shipment",
                "waiting",
                {
                    "wait_for": "shipment_confirmed",
                    "waiting_since": NOW - timedelta(days=2),
                    "timeout_at": NOW + timedelta(days=1),
                },
            ),
        ),
        "waiting_recently": make_run(
            "waiting",
            step=(
                "await_profile",
                "waiting",
                {"wait_for": "profile_completed", "waiting_since": NOW - timedelta(hours=23)},
            ),
            workflow_class="OnboardingWorkflow",
        ),
        "running_long": make_run("running", step=("capture", "in_progress", {"started_at": long_ago})),
        "completed": make_run("completed", step=("send_receipt", "completed", {"finished_at": long_ago})),
        "failed": make_run(
            "failed", step=("issue_refund", "failed", {"error_class": "ValueError"}), workflow_class="RefundWorkflow"
        ),
    }


def test_stuck_reason_counts_names_each_reason(engine, one_run_per_case):
    with engine.connect() as conn:
        counts = workflow_attention.stuck_reason_counts(
            conn, threshold=THRESHOLD, now=NOW, waiting_threshold=WAITING_THRESHOLD
        )
    assert counts == {
        ("OrderWorkflow", "stalled"): 1,
        ("OrderWorkflow", "paused_error"): 1,
        ("OrderWorkflow", "paused_manual"): 2,  # on a pending step, and before any step
        ("OrderWorkflow", "overdue"): 1,
        ("OnboardingWorkflow", "waiting_overdue"): 1,
    }


def test_stuck_reason_summary_gives_the_oldest_since_of_each_pair(engine, make_run):
    """The metrics' oldest stuck age: the earliest paused_at, scheduled_at
    or waiting_since of each (class, reason); not-stuck runs do not count."""
    oldest, newer = NOW - timedelta(hours=5), NOW - timedelta(hours=1)
    make_run("paused", **paused_on("capture", "TimeoutError", paused_at=newer))
    make_run("paused", **paused_on("capture", "TimeoutError", paused_at=oldest))
    make_run("ready", step=("capture", "scheduled", {"scheduled_at": NOW - timedelta(minutes=30)}))
    make_run("ready", step=("capture", "scheduled", {"scheduled_at": NOW - timedelta(days=9)}), workflow_class="X")
    # A control: due a minute ago is not overdue, so it is not counted.
    make_run("ready", step=("capture", "scheduled", {"scheduled_at": NOW - timedelta(minutes=1)}))
    with engine.connect() as conn:
        summary = workflow_attention.stuck_reason_summary(conn, threshold=THRESHOLD, now=NOW)
        only_order = workflow_attention.stuck_reason_summary(
            conn, threshold=THRESHOLD, now=NOW, workflow_class="OrderWorkflow"
        )
    assert summary == {
        ("OrderWorkflow", "paused_error"): (2, oldest),
        ("OrderWorkflow", "overdue"): (1, NOW - timedelta(minutes=30)),
        ("X", "overdue"): (1, NOW - timedelta(days=9)),
    }
    assert only_order == {key: value for key, value in summary.items() if key[0] == "OrderWorkflow"}


def test_waiting_overdue_needs_a_waiting_threshold(engine, one_run_per_case):
    with engine.connect() as conn:
        counts = workflow_attention.stuck_reason_counts(conn, threshold=THRESHOLD, now=NOW)
    assert ("OnboardingWorkflow", "waiting_overdue") not in counts
    assert sum(counts.values()) == 5


def test_a_wait_with_a_timeout_is_never_waiting_overdue(engine, make_run):
    make_run(
        "waiting",
        step=(
            "await_shipment",
            "waiting",
            {
                "wait_for": "shipment_confirmed",
                "waiting_since": NOW - timedelta(days=30),
                "timeout_at": NOW - timedelta(days=27),
            },
        ),
    )
    with engine.connect() as conn:
        assert (
            workflow_attention.stuck_reason_counts(
                conn, threshold=THRESHOLD, now=NOW, waiting_threshold=timedelta(minutes=1)
            )
            == {}
        )


def test_stuck_reasons_read_the_latest_step_only(engine, make_run, new_id):
    # The first attempt stalled; the second failed on a timeout: paused_error.
    workflow_id = make_run("paused", **paused_on("capture", states.STEP_STALLED_ERROR, paused_at=NOW))
    # Stalled once, retried, now due in the future: not stuck at all.
    retried = make_run("ready", **paused_on("capture", states.STEP_STALLED_ERROR, paused_at=None))
    with engine.begin() as conn:
        add_step(conn, workflow_id, "capture", "failed", attempt=2, error_class="TimeoutError")
        add_step(conn, retried, "capture", "scheduled", attempt=2, scheduled_at=NOW + timedelta(minutes=5))
        assert workflow_attention.stuck_reason_counts(conn, threshold=THRESHOLD, now=NOW) == {
            ("OrderWorkflow", "paused_error"): 1
        }


def test_stuck_reason_counts_for_one_class(engine, one_run_per_case):
    with engine.connect() as conn:
        counts = workflow_attention.stuck_reason_counts(
            conn,
            threshold=THRESHOLD,
            now=NOW,
            waiting_threshold=WAITING_THRESHOLD,
            workflow_class="OnboardingWorkflow",
        )
    assert counts == {("OnboardingWorkflow", "waiting_overdue"): 1}


def test_the_threshold_moves_the_overdue_line(engine, one_run_per_case):
    with engine.connect() as conn:
        counts = workflow_attention.stuck_reason_counts(conn, threshold=timedelta(minutes=5), now=NOW)
    assert counts[("OrderWorkflow", "overdue")] == 2


# --- attention_groups ---------------------------------------------------------


def test_attention_groups_biggest_first_with_when_and_newest_message(engine, make_run):
    for minutes, message in ((30, "gateway 1"), (10, "gateway newest"), (50, "gateway oldest")):
        make_run(
            "paused",
            **paused_on("capture_payment", "TimeoutError", message, paused_at=NOW - timedelta(minutes=minutes)),
        )
    for minutes in (5, 120):
        make_run(
            "paused",
            **paused_on(
                "send_welcome_email",
                "smtplib.SMTPServerDisconnected",
                "closed",
                paused_at=NOW - timedelta(minutes=minutes),
            ),
            workflow_class="OnboardingWorkflow",
        )
    make_run("paused", step=("reserve_stock", "scheduled", {}), paused_at=NOW - timedelta(minutes=1))

    with engine.connect() as conn:
        groups = workflow_attention.attention_groups(conn, threshold=THRESHOLD, now=NOW)

    assert [(g["workflow_class"], g["step_name"], g["reason"], g["error_class"], g["count"]) for g in groups] == [
        ("OrderWorkflow", "capture_payment", "paused_error", "TimeoutError", 3),
        ("OnboardingWorkflow", "send_welcome_email", "paused_error", "smtplib.SMTPServerDisconnected", 2),
        ("OrderWorkflow", "reserve_stock", "paused_manual", None, 1),
    ]
    capture = groups[0]
    assert capture["first_seen_at"] == NOW - timedelta(minutes=50)
    assert capture["last_seen_at"] == NOW - timedelta(minutes=10)
    assert capture["error_message"] == "gateway newest"
    assert groups[2]["error_message"] is None


def test_attention_groups_of_equal_size_newest_stuck_first(engine, make_run):
    make_run("paused", **paused_on("capture_payment", "TimeoutError", paused_at=NOW - timedelta(hours=3)))
    make_run("ready", step=("reserve_stock", "scheduled", {"scheduled_at": NOW - timedelta(hours=1)}))
    make_run(
        "paused",
        **paused_on("issue_refund", "ValueError", paused_at=NOW - timedelta(hours=2)),
        workflow_class="RefundWorkflow",
    )
    with engine.connect() as conn:
        groups = workflow_attention.attention_groups(conn, threshold=THRESHOLD, now=NOW)
    assert [g["step_name"] for g in groups] == ["reserve_stock", "issue_refund", "capture_payment"]
    overdue = groups[0]
    assert (overdue["reason"], overdue["first_seen_at"]) == ("overdue", NOW - timedelta(hours=1))


def test_attention_groups_limit(engine, make_run):
    for step in ("a", "b", "c"):
        make_run("paused", step=(step, "scheduled", {}), paused_at=NOW)
    with engine.connect() as conn:
        assert len(workflow_attention.attention_groups(conn, threshold=THRESHOLD, now=NOW, limit=2)) == 2


def test_attention_groups_for_one_class(engine, one_run_per_case):
    with engine.connect() as conn:
        groups = workflow_attention.attention_groups(
            conn,
            threshold=THRESHOLD,
            now=NOW,
            waiting_threshold=WAITING_THRESHOLD,
            workflow_class="OnboardingWorkflow",
        )
    assert [(g["step_name"], g["reason"], g["count"]) for g in groups] == [("await_profile", "waiting_overdue", 1)]
    assert groups[0]["first_seen_at"] == NOW - timedelta(hours=25)


def test_a_paused_run_without_steps_is_grouped_on_its_current_step(engine, make_run):
    make_run("paused", current_step="reserve_stock", paused_at=NOW)
    with engine.connect() as conn:
        (group,) = workflow_attention.attention_groups(conn, threshold=THRESHOLD, now=NOW)
    assert (group["step_name"], group["reason"], group["error_class"]) == ("reserve_stock", "paused_manual", None)


# --- attention_ids ------------------------------------------------------------


def test_attention_ids_oldest_stuck_first_with_a_limit(engine, make_run):
    ids = {
        minutes: make_run(
            "paused", **paused_on("capture_payment", "TimeoutError", paused_at=NOW - timedelta(minutes=minutes))
        )
        for minutes in (20, 90, 45)
    }
    make_run("paused", **paused_on("capture_payment", "OSError", paused_at=NOW - timedelta(days=1)))
    group = {
        "workflow_class": "OrderWorkflow",
        "step_name": "capture_payment",
        "reason": "paused_error",
        "error_class": "TimeoutError",
    }
    with engine.connect() as conn:
        assert workflow_attention.attention_ids(conn, group, threshold=THRESHOLD, now=NOW) == [
            ids[90],
            ids[45],
            ids[20],
        ]
        assert workflow_attention.attention_ids(conn, group, threshold=THRESHOLD, now=NOW, limit=2) == [
            ids[90],
            ids[45],
        ]


def test_attention_ids_without_an_error_class_match_runs_without_one(engine, make_run):
    manual = make_run("paused", step=("capture_payment", "scheduled", {}), paused_at=NOW)
    make_run("paused", **paused_on("capture_payment", "TimeoutError", paused_at=NOW))
    group = {
        "workflow_class": "OrderWorkflow",
        "step_name": "capture_payment",
        "reason": "paused_manual",
        "error_class": None,
    }
    with engine.connect() as conn:
        assert workflow_attention.attention_ids(conn, group, threshold=THRESHOLD, now=NOW) == [manual]
        # A group as attention_groups returns it walks the same runs.
        (listed,) = [
            g
            for g in workflow_attention.attention_groups(conn, threshold=THRESHOLD, now=NOW)
            if g["reason"] == "paused_manual"
        ]
        assert workflow_attention.attention_ids(conn, listed, threshold=THRESHOLD, now=NOW) == [manual]


def test_attention_ids_of_waiting_overdue_need_the_waiting_threshold(engine, one_run_per_case):
    group = {
        "workflow_class": "OnboardingWorkflow",
        "step_name": "await_profile",
        "reason": "waiting_overdue",
        "error_class": None,
    }
    with engine.connect() as conn:
        assert workflow_attention.attention_ids(conn, group, threshold=THRESHOLD, now=NOW) == []
        assert workflow_attention.attention_ids(
            conn, group, threshold=THRESHOLD, now=NOW, waiting_threshold=WAITING_THRESHOLD
        ) == [one_run_per_case["waiting_overdue"]]


def test_attention_ids_ties_in_since_go_by_id(engine, make_run):
    first = make_run("paused", **paused_on("capture_payment", "TimeoutError", paused_at=NOW))
    second = make_run("paused", **paused_on("capture_payment", "TimeoutError", paused_at=NOW))
    group = {
        "workflow_class": "OrderWorkflow",
        "step_name": "capture_payment",
        "reason": "paused_error",
        "error_class": "TimeoutError",
    }
    with engine.connect() as conn:
        assert workflow_attention.attention_ids(conn, group, threshold=THRESHOLD, now=NOW) == [first, second]


# --- stale --------------------------------------------------------------------


def test_delete_stale_takes_the_runs_steps_events_and_signals(engine, make_run):
    stale = make_run("completed", step=("send_receipt", "completed", {}), updated_at=NOW - timedelta(days=40))
    kept = make_run("completed", step=("send_receipt", "completed", {}), updated_at=NOW - timedelta(days=2))
    with engine.begin() as conn:
        for workflow_id in (stale, kept):
            step = steps.latest(conn, workflow_id)
            events.record(conn, workflow_id=workflow_id, event="finished", actor="system", step=step)
            signals.insert_signal(conn, workflow_id=workflow_id, name="shipment_confirmed", payload={"n": 1})

    with engine.begin() as conn:
        assert workflow_upkeep.delete_stale(conn, before=NOW - timedelta(days=30)) == 1

    with engine.connect() as conn:
        for table in ("pgbus_workflows", "pgbus_workflow_steps", "pgbus_workflow_events", "pgbus_workflow_signals"):
            left = conn.execute(sa.text(f"SELECT DISTINCT workflow_id FROM {table}")).scalars().all()
            assert left == [kept], table


def test_delete_stale_limit(engine, make_run):
    for days in (40, 41, 42):
        make_run("completed", updated_at=NOW - timedelta(days=days))
    with engine.begin() as conn:
        assert workflow_upkeep.delete_stale(conn, before=NOW, limit=2) == 2
    assert count_runs(engine) == 1


# --- definition_outdated ------------------------------------------------------


@pytest.mark.parametrize(
    "run_digest, current_digest, outdated",
    [
        ("abc", "abc", False),
        ("abc", "def", True),
        (None, "def", True),  # started before digests were recorded
        ("abc", None, False),  # definition not registered here: nothing to compare
    ],
)
def test_definition_outdated(run_digest, current_digest, outdated):
    assert workflow_rows.definition_outdated({"definition_digest": run_digest}, current_digest) is outdated


def test_waiting_for_signal_lists_the_runs_whose_latest_step_waits_for_it_since_before(runs, engine):
    from support.web_helpers import step

    now = datetime.now(UTC)
    old = now - timedelta(minutes=10)

    def waiting(signal, since):
        return runs.make("waiting", step("await_shipment", "waiting", wait_for=signal, waiting_since=since))

    first, second = waiting("shipment_confirmed", old), waiting("shipment_confirmed", old)
    waiting("shipment_confirmed", now)  # not yet long enough
    waiting("other_signal", old)  # another signal
    # An older attempt waited for it, the latest does not.
    runs.make(
        "waiting",
        step("await_shipment", "waiting", wait_for="shipment_confirmed", waiting_since=old),
        step("await_shipment", "waiting", wait_for="other_signal", waiting_since=old),
    )
    with engine.connect() as conn:
        found = workflow_rows.waiting_for_signal(
            conn, "shipment_confirmed", waiting_before=now - timedelta(minutes=1), limit=5
        )
        assert found == [second, first]
        assert workflow_rows.waiting_for_signal(
            conn, "shipment_confirmed", waiting_before=now - timedelta(minutes=1), limit=1
        ) == [second]
        assert workflow_rows.any_run(conn)
        assert workflow_rows.highest_id(conn) == 5


def _plan_of(engine, call) -> str:
    """The plan of the statement *call* sends (EXPLAIN of exactly it)."""
    sent = []

    def grab(conn, cursor, statement, parameters, context, executemany):
        sent.append((statement, parameters))

    sa.event.listen(engine, "before_cursor_execute", grab)
    try:
        with engine.connect() as conn:
            call(conn)
    finally:
        sa.event.remove(engine, "before_cursor_execute", grab)
    statement, parameters = sent[-1]
    with engine.connect() as conn:
        cursor = conn.connection.driver_connection.cursor()
        cursor.execute("EXPLAIN " + statement, parameters)
        return "\n".join(row[0] for row in cursor.fetchall())


@pytest.mark.parametrize("reason", sorted(stuck.BY_REASON))
def test_a_stuck_filter_counts_and_walks_without_reading_a_runs_steps(engine, reason):
    # At ten million runs each latest-step lookup is a random read: the
    # count beside the runs and an operation's walk read the run rows alone.
    where, binds = workflow_index.page_where(
        threshold=THRESHOLD,
        waiting_threshold=WAITING_THRESHOLD,
        reason=reason,
        step_name="capture",
        error_class="TimeoutError",
    )
    count = _plan_of(
        engine, lambda conn: workflow_capped_counts.status_counts_up_to(conn, where=where, binds=binds, cap=10_000)
    )
    walk = _plan_of(
        engine,
        lambda conn: workflow_windows.walk_window(
            conn, where=where, binds=binds, after_id=0, ceiling_id=10**9, limit=200
        ),
    )
    assert "pgbus_workflow_steps" not in count and "pgbus_workflow_steps" not in walk
    # Control: the page itself shows each run's latest step, so it reads them.
    page = _plan_of(
        engine,
        lambda conn: workflow_index.page(
            conn, limit=50, threshold=THRESHOLD, waiting_threshold=WAITING_THRESHOLD, reason=reason
        ),
    )
    assert "pgbus_workflow_steps" in page
