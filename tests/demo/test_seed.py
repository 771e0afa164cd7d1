"""The seeder: every status and stuck reason shows up, and the rows agree
with each other as the runtime would have written them."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa
from click.testing import CliRunner

from pgbus_web import defaults, schema
from pgbus_web.demo import seed as seeding
from pgbus_web.demo import stories
from pgbus_web.demo import workflows as demo
from pgbus_web.launch import main_group
from pgbus_web.models import recount, workflow_attention, workflow_counts
from pgbus_web.rules import states

NOW = datetime(2026, 3, 10, 12, 0, tzinfo=UTC)
RUNS = 400


@pytest.fixture
def seeded(engine):
    result = seeding.seed(engine, runs=RUNS, seed=7, now=NOW)
    return result


def rows(engine, sql, **binds):
    with engine.connect() as conn:
        return conn.execute(sa.text(sql), binds).all()


def scalar(engine, sql, **binds):
    with engine.connect() as conn:
        return conn.execute(sa.text(sql), binds).scalar_one()


# --- what is there -------------------------------------------------------------


def test_seed_writes_what_it_reports(engine, seeded):
    assert seeded.runs == RUNS
    assert scalar(engine, "SELECT count(*) FROM pgbus_workflows") == RUNS
    assert scalar(engine, "SELECT count(*) FROM pgbus_workflow_steps") == seeded.steps
    assert scalar(engine, "SELECT count(*) FROM pgbus_workflow_events") == seeded.events
    assert scalar(engine, "SELECT count(*) FROM pgbus_workflow_signals") == seeded.signals
    assert scalar(engine, "SELECT count(*) FROM pgbus_batches") == seeded.batches
    assert sum(seeded.statuses.values()) == RUNS


def test_every_status_every_class_and_most_runs_completed(engine, seeded):
    with engine.connect() as conn:
        counts = workflow_counts.status_counts(conn)
    by_status: dict[str, int] = {}
    for (_, status), runs in counts.items():
        by_status[status] = by_status.get(status, 0) + runs
    assert set(by_status) == set(states.RUN)
    assert {klass for klass, _ in counts} == {demo.ORDER, demo.ONBOARDING, demo.REFUND}
    assert 0.8 <= by_status["completed"] / RUNS <= 0.9


def test_every_stuck_reason(engine, seeded):
    with engine.connect() as conn:
        counts = workflow_attention.stuck_reason_counts(
            conn, threshold=defaults.STALL_THRESHOLD, now=NOW, waiting_threshold=defaults.WAITING_THRESHOLD
        )
    assert {reason for _, reason in counts} == set(states.STUCK_REASONS)


def test_a_small_seed_still_shows_every_status_and_reason(engine):
    seeding.seed(engine, runs=len(stories.STORIES) + 1, seed=3, now=NOW)
    with engine.connect() as conn:
        statuses = {status for _, status in workflow_counts.status_counts(conn)}
        reasons = {
            reason
            for _, reason in workflow_attention.stuck_reason_counts(
                conn, threshold=defaults.STALL_THRESHOLD, now=NOW, waiting_threshold=defaults.WAITING_THRESHOLD
            )
        }
    assert statuses == set(states.RUN)
    assert reasons == set(states.STUCK_REASONS)


def test_steps_with_several_attempts_signals_and_batches_of_every_kind(engine, seeded):
    assert scalar(engine, "SELECT count(*) FROM pgbus_workflow_steps WHERE attempt > 1") > 0
    retried = rows(
        engine,
        """
        SELECT DISTINCT s.step_name FROM pgbus_workflow_steps s
        WHERE s.attempt > 1 AND EXISTS (
            SELECT 1 FROM pgbus_workflow_steps f
            WHERE f.workflow_id = s.workflow_id AND f.step_name = s.step_name
              AND f.attempt = s.attempt - 1 AND f.status = 'failed')
    """,
    )
    assert {"capture_payment", "send_welcome_email", "issue_refund"} <= {name for (name,) in retried}
    assert {status for (status,) in rows(engine, "SELECT DISTINCT status FROM pgbus_workflow_signals")} == set(
        states.SIGNAL
    )
    assert {status for (status,) in rows(engine, "SELECT DISTINCT status FROM pgbus_batches")} == {
        states.BATCH_PROCESSING,
        states.BATCH_FINISHED,
    }


def test_operators_act_with_reasons(engine, seeded):
    acted = rows(
        engine,
        """
        SELECT DISTINCT event FROM pgbus_workflow_events
        WHERE actor IN ('dashboard:alice', 'dashboard:bob') AND reason IS NOT NULL
    """,
    )
    assert {"paused", "resumed", "cancelled"} <= {event for (event,) in acted}
    actors = {actor for (actor,) in rows(engine, "SELECT DISTINCT actor FROM pgbus_workflow_events")}
    assert actors == {states.SYSTEM_ACTOR, states.APP_ACTOR, "dashboard:alice", "dashboard:bob"}


def test_moments_lie_in_the_last_30_days_and_nothing_happened_after_now(engine, seeded):
    oldest, newest = rows(engine, "SELECT min(created_at), max(updated_at) FROM pgbus_workflows")[0]
    assert NOW - timedelta(days=31) <= oldest and newest <= NOW
    assert scalar(engine, "SELECT max(created_at) FROM pgbus_workflow_events") <= NOW
    assert scalar(engine, "SELECT max(created_at) FROM pgbus_workflow_events") >= NOW - timedelta(days=1)
    # Only what is due later, or a deadline, lies ahead.
    ahead = rows(
        engine,
        """
        SELECT DISTINCT s.status, w.status FROM pgbus_workflow_steps s
        JOIN pgbus_workflows w USING (workflow_id)
        WHERE s.scheduled_at > :now
    """,
        now=NOW,
    )
    assert set(ahead) <= {("scheduled", "ready"), ("scheduled", "paused"), ("cancelled", "cancelled")}
    spread = scalar(engine, "SELECT max(created_at) - min(created_at) FROM pgbus_workflows WHERE status = 'completed'")
    assert spread > timedelta(days=20)


# --- the rows agree ---------------------------------------------------------------

# The latest step row (highest id) a run in each status may have (docs/runtime.md).
LATEST_STEP = {
    "ready": {"scheduled"},
    "running": {"in_progress"},
    "waiting": {"waiting"},
    "paused": {"failed", "scheduled", "waiting"},
    "completed": {"completed", "skipped"},
    "failed": {"failed"},
    "cancelled": {"cancelled", "failed"},  # failed: it was paused on an error
}


def latest_steps(engine):
    return rows(
        engine,
        """
        SELECT w.workflow_id, w.workflow_class, w.status, w.current_step, w.paused_at, w.finished_at,
               s.step_name, s.status AS step_status, s.wait_for, s.batch_id, s.timeout_at, s.error_class
        FROM pgbus_workflows w
        CROSS JOIN LATERAL (
            SELECT * FROM pgbus_workflow_steps WHERE workflow_id = w.workflow_id ORDER BY id DESC LIMIT 1
        ) s
    """,
    )


def test_each_runs_latest_step_matches_its_status(engine, seeded):
    latest = latest_steps(engine)
    assert len(latest) == RUNS  # every run has steps
    for run in latest:
        assert run.step_status in LATEST_STEP[run.status], run
        assert run.current_step == run.step_name, run
        if run.status == "paused":
            assert run.paused_at is not None, run
        elif run.status != "cancelled":  # cancel leaves when it was paused
            assert run.paused_at is None, run
        assert (run.finished_at is not None) == (run.status in states.TERMINAL), run
        if run.status == "waiting":
            assert (run.wait_for is None) != (run.batch_id is None), run
        if run.status == "failed":
            assert (run.workflow_class, run.step_name, run.error_class) == (demo.REFUND, "issue_refund", "ValueError")


def test_each_run_carries_its_latest_steps_facts(engine, seeded):
    # Seeding writes with the steps trigger off: the runs must carry what
    # the trigger would have written, from their highest-id step row.
    mismatched = rows(
        engine,
        """
        SELECT w.workflow_id FROM pgbus_workflows w
        LEFT JOIN LATERAL (
            SELECT * FROM pgbus_workflow_steps WHERE workflow_id = w.workflow_id ORDER BY id DESC LIMIT 1
        ) s ON TRUE
        WHERE (w.latest_step_id, w.latest_step_name, w.latest_step_status, w.latest_error_class,
               w.latest_scheduled_at, w.latest_waiting_since, w.latest_timeout_at)
              IS DISTINCT FROM (s.id, s.step_name, s.status, s.error_class,
                                s.scheduled_at, s.waiting_since, s.timeout_at)
    """,
    )
    assert mismatched == []
    assert scalar(engine, "SELECT count(*) FROM pgbus_workflows WHERE latest_step_id IS NOT NULL") == RUNS
    assert scalar(engine, "SELECT count(*) FROM pgbus_workflows WHERE latest_waiting_since IS NOT NULL") > 0


def test_the_kept_run_counts_count_the_seeded_runs(engine, seeded):
    # Written with the count triggers off as a superuser: the seeder adds
    # the counts itself.
    from pgbus_web.models import workflow_counts

    with engine.connect() as conn:
        kept, counted = workflow_counts.status_counts(conn), recount.status_counts(conn)
    assert kept == counted and sum(kept.values()) == RUNS


def test_the_kept_activity_and_step_durations_count_the_seeded_runs(engine, seeded):
    # Their triggers did not fire either: the seeder adds the rollups too.
    from pgbus_web.models import step_durations, workflow_activity

    long_ago = datetime(2000, 1, 1, tzinfo=UTC)
    compared = 0
    with engine.connect() as conn:
        for workflow_class in demo.REGISTRY.names:
            assert workflow_activity.kept(conn, workflow_class, since=long_ago) == recount.activity_hours(
                conn, workflow_class, since=long_ago
            )
            kept = step_durations.histograms(conn, workflow_class, since=long_ago.date())
            exact = recount.step_duration_days(conn, workflow_class, since=long_ago.date())
            assert {key: sum(n for _, n in histogram) for key, histogram in kept.items()} == {
                key: attempts for key, (attempts, _, _) in exact.items()
            }
            compared += len(exact)
        started = sum(started for started, _, _ in workflow_activity.kept(conn, demo.ORDER, since=long_ago).values())
    # The control: there was something to compare.
    assert compared > 10 and started > 0


def test_only_the_latest_step_is_open(engine, seeded):
    assert (
        rows(
            engine,
            """
        SELECT s.workflow_id FROM pgbus_workflow_steps s
        WHERE s.status IN ('scheduled', 'waiting', 'in_progress')
          AND s.id <> (SELECT max(id) FROM pgbus_workflow_steps WHERE workflow_id = s.workflow_id)
    """,
        )
        == []
    )


def test_steps_follow_the_definition_with_consecutive_attempts(engine, seeded):
    names = {definition.name: set(definition.step_names) for definition in demo.REGISTRY}
    for klass, step_name in rows(
        engine,
        """
        SELECT DISTINCT w.workflow_class, s.step_name
        FROM pgbus_workflow_steps s JOIN pgbus_workflows w USING (workflow_id)
    """,
    ):
        assert step_name in names[klass]
    assert (
        rows(
            engine,
            """
        SELECT workflow_id, step_name FROM pgbus_workflow_steps
        GROUP BY workflow_id, step_name
        HAVING min(attempt) <> 1 OR max(attempt) <> count(*) OR count(DISTINCT attempt) <> count(*)
            OR array_agg(attempt ORDER BY id) <> array_agg(attempt ORDER BY attempt)
    """,
        )
        == []
    )
    # A retry comes only after a failed attempt (or a skip after a failure).
    assert (
        rows(
            engine,
            """
        SELECT s.id FROM pgbus_workflow_steps s
        JOIN pgbus_workflow_steps before
          ON before.workflow_id = s.workflow_id AND before.step_name = s.step_name AND before.attempt = s.attempt - 1
        WHERE s.attempt > 1 AND before.status <> 'failed'
    """,
        )
        == []
    )


def test_run_digests_and_arguments(engine, seeded):
    digests = demo.REGISTRY.digests()
    mismatched = rows(
        engine,
        """
        SELECT workflow_class, definition_digest, count(*) FROM pgbus_workflows
        WHERE definition_digest <> ALL(CAST(:current AS text[]))
        GROUP BY 1, 2
    """,
        current=list(digests.values()),
    )
    # Only some old OrderWorkflow runs started on an older step list.
    assert {klass for klass, _, _ in mismatched} <= {demo.ORDER}
    assert (
        rows(
            engine,
            """
        SELECT w.workflow_id FROM pgbus_workflows w
        JOIN pgbus_workflow_steps s USING (workflow_id)
        WHERE w.workflow_class = 'OrderWorkflow' AND s.step_name = 'notify_vendors'
          AND w.definition_digest <> :digest
    """,
            digest=digests[demo.ORDER],
        )
        == []
    )
    keys = {tuple(sorted(args)) for (args,) in rows(engine, "SELECT DISTINCT arguments FROM pgbus_workflows")}
    assert ("amount_cents", "customer_id", "fail_capture", "order_id", "vendors") in keys


def test_events_tell_each_runs_story_in_order(engine, seeded):
    first_and_last = rows(
        engine,
        """
        SELECT w.status,
               (array_agg(e.event ORDER BY e.id))[1] AS first_event,
               (array_agg(e.event ORDER BY e.id DESC))[1] AS last_event,
               bool_and(e.created_at >= w.created_at) AS after_start,
               array_agg(e.created_at ORDER BY e.id) = array_agg(e.created_at ORDER BY e.created_at, e.id) AS in_order
        FROM pgbus_workflows w JOIN pgbus_workflow_events e USING (workflow_id)
        GROUP BY w.workflow_id, w.status
    """,
    )
    assert len(first_and_last) == RUNS
    for status, first, last, after_start, in_order in first_and_last:
        assert first == "started"
        assert after_start and in_order
        if status == "completed":
            assert last == "finished"
        if status == "failed":
            assert last == "finished"
        if status == "cancelled":
            assert last == "cancelled"
    # Every paused run has its pause on record, after everything else.
    assert (
        rows(
            engine,
            """
        SELECT w.workflow_id FROM pgbus_workflows w
        WHERE w.status = 'paused' AND NOT EXISTS (
            SELECT 1 FROM pgbus_workflow_events e
            WHERE e.workflow_id = w.workflow_id AND e.event = 'paused' AND e.created_at = w.paused_at)
    """,
        )
        == []
    )
    assert set(stories.states.EVENTS) >= {
        event for (event,) in rows(engine, "SELECT DISTINCT event FROM pgbus_workflow_events")
    }


def test_events_name_steps_of_their_own_run(engine, seeded):
    assert (
        rows(
            engine,
            """
        SELECT e.id FROM pgbus_workflow_events e
        LEFT JOIN pgbus_workflow_steps s ON s.id = e.step_id AND s.workflow_id = e.workflow_id
        WHERE e.step_id IS NOT NULL
          AND (s.id IS NULL OR s.step_name <> e.step_name OR s.attempt <> e.attempt)
    """,
        )
        == []
    )
    # A failed step's event carries its error.
    assert (
        rows(
            engine,
            """
        SELECT e.id FROM pgbus_workflow_events e JOIN pgbus_workflow_steps s ON s.id = e.step_id
        WHERE e.event = 'step_failed' AND e.details ->> 'error_class' IS DISTINCT FROM s.error_class
    """,
        )
        == []
    )


def test_signals_are_claimed_by_a_step_waiting_for_them(engine, seeded):
    assert (
        rows(
            engine,
            """
        SELECT g.id FROM pgbus_workflow_signals g
        LEFT JOIN pgbus_workflow_steps s ON s.id = g.claimed_by_step_id AND s.workflow_id = g.workflow_id
        WHERE (g.status = 'pending' AND (g.claimed_by_step_id IS NOT NULL OR g.consumed_at IS NOT NULL))
           OR (g.status IN ('claimed', 'consumed') AND (s.id IS NULL OR s.wait_for <> g.name OR g.claimed_at IS NULL))
           OR (g.status = 'consumed' AND (g.consumed_at IS NULL OR s.status <> 'completed'))
    """,
        )
        == []
    )
    # Each signal is on record as received.
    assert scalar(engine, "SELECT count(*) FROM pgbus_workflow_events WHERE event = 'signal_received'") == scalar(
        engine, "SELECT count(*) FROM pgbus_workflow_signals"
    )


def test_fan_out_steps_wait_on_their_batch(engine, seeded):
    assert (
        rows(
            engine,
            """
        SELECT s.id FROM pgbus_workflow_steps s
        LEFT JOIN pgbus_batches b USING (batch_id)
        WHERE s.batch_id IS NOT NULL AND (
              b.id IS NULL
           OR s.step_name <> 'notify_vendors'
           OR b.description <> 'OrderWorkflow#notify_vendors'
           OR b.total_jobs NOT BETWEEN :low AND :high
           OR (s.status = 'waiting') <> (b.status = 'processing')
           OR (b.status = 'finished') <> (b.completed_jobs + b.failed_jobs = b.total_jobs))
    """,
            low=demo.MIN_VENDORS,
            high=demo.MAX_VENDORS,
        )
        == []
    )
    assert scalar(engine, "SELECT count(*) FROM pgbus_batches") == scalar(
        engine, "SELECT count(*) FROM pgbus_workflow_steps WHERE batch_id IS NOT NULL"
    )


def test_subjects_and_idempotency_keys_are_unique_where_the_schema_says(engine, seeded):
    # Writing them at all proves it; and a second seed does not collide.
    seeding.seed(engine, runs=100, seed=7, now=NOW)
    assert scalar(engine, "SELECT count(*) FROM pgbus_workflows") == RUNS + 100


def test_ids_taken_from_the_sequences_are_given_back(engine, seeded):
    assert scalar(engine, "SELECT last_value FROM pgbus_workflow_steps_id_seq") == scalar(
        engine, "SELECT max(id) FROM pgbus_workflow_steps"
    )
    assert scalar(engine, "SELECT last_value FROM pgbus_workflow_signals_id_seq") == scalar(
        engine, "SELECT max(id) FROM pgbus_workflow_signals"
    )
    # The next ordinary insert gets the next id.
    with engine.begin() as conn:
        run_id = conn.execute(sa.text("SELECT workflow_id FROM pgbus_workflows LIMIT 1")).scalar_one()
        new = conn.execute(
            sa.text(
                "INSERT INTO pgbus_workflow_steps (workflow_id, step_name, "
                "status) VALUES (:id, 'x', 'skipped') RETURNING id"
            ),
            {"id": run_id},
        ).scalar_one()
    assert new == seeded.steps + 1


def test_the_same_seed_and_now_give_the_same_runs(engine):
    def snapshot():
        return rows(
            engine,
            """
            SELECT workflow_id, workflow_class, status, current_step, created_at, updated_at
            FROM pgbus_workflows ORDER BY workflow_id
        """,
        )

    seeding.seed(engine, runs=60, seed=99, now=NOW)
    first = snapshot()
    with engine.begin() as conn:
        conn.execute(sa.text(f"TRUNCATE {', '.join(schema.TABLES + schema.DERIVED_TABLES)} RESTART IDENTITY CASCADE"))
    seeding.seed(engine, runs=60, seed=99, now=NOW)
    assert snapshot() == first


def test_the_free_texts_need_no_escaping_in_copy():
    texts = [reason for reasons in stories.REASONS.values() for reason in reasons]
    texts += [message for _, message, _ in stories.ERRORS.values()] + list(stories.CARRIERS)
    for text in texts:
        assert stories._copy_safe(text) == text


def test_moments_are_written_as_datetime_isoformat_writes_them():
    # The seeder formats moments itself, for speed; the text must be what
    # (start + timedelta(seconds=moment)).isoformat() gives, to the
    # character, including the microsecond ties timedelta rounds to even.
    import random

    rng = random.Random(3)
    ties = 0
    for _ in range(40):
        start = stories._EPOCH + timedelta(seconds=rng.uniform(1.7e9, 1.8e9))
        moments = stories._Moments(start)
        values = [rng.uniform(0, 40 * 86400) for _ in range(500)]
        # Multiples of 2**-20 s include exact half microseconds.
        values += [rng.randrange(0, 2**20 * 100) / 2**20 for _ in range(1500)]
        values += [float(rng.randrange(0, 10**6)), 0.0, 59.9999995, 86399.9999996]
        for value in values:
            ties += ((value - int(value)) * 1e6) % 1 == 0.5
            assert moments[value] == (start + timedelta(seconds=value)).isoformat(), value
        assert moments[None] == stories.NULL
    assert ties  # the tie-breaking was exercised


def test_seeding_gives_the_gil_back_sooner_only_while_it_plays(engine, monkeypatch):
    # The player thread holds the GIL for shorter turns while the writer
    # sends COPY text (seed.SWITCH_INTERVAL), and the process gets its own
    # interval back afterwards, whether the seed succeeds or fails.
    import sys

    seen = []
    played = stories.Chunk.play

    def play(chunk, story, number):
        seen.append(sys.getswitchinterval())
        return played(chunk, story, number)

    monkeypatch.setattr(stories.Chunk, "play", play)
    before = sys.getswitchinterval()
    seeding.seed(engine, runs=20, seed=1, now=NOW)
    assert seen and set(seen) == {seeding.SWITCH_INTERVAL}
    assert sys.getswitchinterval() == before

    def fail(chunk, story, number):
        raise RuntimeError("player broke")

    monkeypatch.setattr(stories.Chunk, "play", fail)
    with pytest.raises(RuntimeError):
        seeding.seed(engine, runs=20, seed=1, now=NOW)
    assert sys.getswitchinterval() == before


def test_run_ids_are_uuid4_texts():
    import random
    import uuid

    chunk = stories.Chunk(random.Random(9), None, None, 0.0, seeding._old_order_workflow(), {})
    control = random.Random(9)
    for _ in range(2000):
        assert chunk.uuid() == str(uuid.UUID(int=control.getrandbits(128), version=4))


# --- refusing -----------------------------------------------------------------------


@pytest.mark.parametrize("runs", [0, -5, True, 2.5])
def test_a_bad_number_of_runs_is_refused_and_nothing_is_written(engine, runs):
    with pytest.raises(ValueError, match="runs must be a positive whole number"):
        seeding.seed(engine, runs=runs)
    assert scalar(engine, "SELECT count(*) FROM pgbus_workflows") == 0


@pytest.fixture
def empty_database_url(engine, database_url):
    """A database on the test server without the schema."""
    # A name of its own: other test processes may share the server.
    name = f"pgbus_seed_empty_{uuid.uuid4().hex[:8]}"
    admin = sa.create_engine(engine.url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    yield engine.url.set(database=name).render_as_string(hide_password=False)
    with admin.connect() as conn:
        conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    admin.dispose()


def test_without_the_schema_seed_refuses(empty_database_url):
    from pgbus_web import db

    engine = db.create_engine(empty_database_url)
    try:
        with pytest.raises(seeding.SeedError, match="schema is not installed"):
            seeding.seed(engine, runs=5)
        with engine.connect() as conn:
            assert conn.execute(sa.text("SELECT to_regclass('pgbus_workflows')")).scalar_one() is None
    finally:
        engine.dispose()


def test_cli_seeds_and_reports(engine, database_url):
    result = CliRunner().invoke(main_group, ["seed", "--database-url", database_url, "--runs", "30", "--seed", "4"])
    assert result.exit_code == 0, result.output
    assert "Seeded 30 runs" in result.output
    assert scalar(engine, "SELECT count(*) FROM pgbus_workflows") == 30


def test_cli_without_the_schema_fails_in_one_line(empty_database_url):
    result = CliRunner().invoke(main_group, ["seed", "--database-url", empty_database_url, "--runs", "5"])
    assert result.exit_code == 1
    assert "schema is not installed" in result.output
    assert "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_cli_refuses_zero_runs(engine, database_url):
    result = CliRunner().invoke(main_group, ["seed", "--database-url", database_url, "--runs", "0"])
    assert result.exit_code == 2
    assert "--runs" in result.output
    assert scalar(engine, "SELECT count(*) FROM pgbus_workflows") == 0
