"""The runs counted by class, status and hour of created_at, kept by the
run count triggers (the schema version that adds pgbus_workflow_hour_counts):
a range's counts read from them (full hours) and from the index (the partial
first and last hours) equal count(*) over the runs created in the range,
after random histories, the seeders and `db repair`; the kept hours alone
do not, on a range that starts mid-hour (the control)."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa
from click.testing import CliRunner
from support.count_checks import CLASSES, random_step

from pgbus_web import schema
from pgbus_web.demo import seed as seeding
from pgbus_web.demo.history import seed_history
from pgbus_web.launch import main_group
from pgbus_web.models import recount, workflow_counts
from pgbus_web.rules import states

T0 = datetime(2026, 3, 10, 12, 0, tzinfo=UTC)


def insert_spread(conn, rng, prefix: str, n: int) -> None:
    """*n* runs created at random moments over two days before T0."""
    conn.execute(
        sa.text(
            "INSERT INTO pgbus_workflows (workflow_id, workflow_class, status, created_at) "
            "SELECT :prefix || '-' || g, (CAST(:classes AS text[]))[1 + (g * 7 + :salt) % 3], "
            "(CAST(:statuses AS text[]))[1 + (g * 5 + :salt) % 7], "
            "CAST(:t0 AS timestamptz) - ((g * 7919 + :salt) % 172800) * interval '1 second' "
            "FROM generate_series(1, :n) g"
        ),
        {
            "prefix": prefix,
            "classes": list(CLASSES),
            "statuses": list(states.RUN),
            "n": n,
            "salt": rng.randrange(100000),
            "t0": T0,
        },
    )


def step(conn, rng, name: str) -> None:
    action = rng.randrange(4)
    if action == 0:
        insert_spread(conn, rng, f"h{name}", rng.randrange(1, 40))
    elif action == 1:
        # A run moved to another hour (a hand-written fix of created_at).
        conn.execute(
            sa.text(
                "UPDATE pgbus_workflows SET created_at = created_at - :shift * interval '1 minute' "
                "WHERE id IN (SELECT id FROM pgbus_workflows ORDER BY random() LIMIT 3)"
            ),
            {"shift": rng.randrange(1, 600)},
        )
    else:
        # Inserts at now(), status changes, class moves, deletes, prunes and
        # a rolled-back write, as for the counts by status.
        random_step(conn, rng, name)


def ranges(rng, engine):
    """Ranges with partial hours at both ends, one within an hour, one open
    at its end, and one on whole hours."""
    with engine.connect() as conn:
        low, high = conn.execute(sa.text("SELECT min(created_at), max(created_at) FROM pgbus_workflows")).one()
    found = [
        (low + timedelta(minutes=17, seconds=3), high - timedelta(minutes=11)),
        (T0 - timedelta(hours=30, minutes=41), T0 - timedelta(hours=2, minutes=9)),
        (T0 - timedelta(hours=5, minutes=50), T0 - timedelta(hours=5, minutes=10)),
        (T0 - timedelta(hours=20, minutes=30), None),
        (T0 - timedelta(hours=24), T0 - timedelta(hours=3)),
    ]
    for _ in range(4):
        start = low + (high - low) * rng.random()
        found.append((start, start + (high - start) * rng.random()))
    return found


def recounted(conn, workflow_class, start, end) -> dict[str, int]:
    rows = conn.execute(
        sa.text(
            "SELECT status, count(*) FROM pgbus_workflows WHERE workflow_class = :c AND created_at >= :a "
            "AND (CAST(:b AS timestamptz) IS NULL OR created_at < :b) GROUP BY status"
        ),
        {"c": workflow_class, "a": start, "b": end},
    )
    return dict(rows.all())


def assert_exact(engine, rng, classes=CLASSES + ("Moved",)) -> int:
    """The kept range counts equal count(*) for every class and range; the
    number of runs the ranges held (to show the check was not vacuous)."""
    seen = 0
    with engine.connect() as conn:
        assert workflow_counts.hour_counts(conn) == recount.hour_counts(conn)
        for start, end in ranges(rng, engine):
            for workflow_class in classes:
                truth = recounted(conn, workflow_class, start, end)
                assert (
                    workflow_counts.class_status_counts(conn, workflow_class, created_from=start, created_to=end)
                    == truth
                ), (workflow_class, start, end)
                seen += sum(truth.values())
    return seen


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_kept_range_counts_equal_a_recount_after_random_histories(engine, seed):
    rng = random.Random(seed)
    with engine.begin() as conn:
        insert_spread(conn, rng, "base", 300)
    for number in range(40):
        with engine.begin() as conn:
            for k in range(rng.randrange(1, 4)):
                step(conn, rng, f"{number}.{k}")
        if number % 10 == 0:
            assert assert_exact(engine, rng) > 0
    # Everything folded, and again.
    with engine.begin() as conn:
        workflow_counts.fold_counts(conn)
    assert assert_exact(engine, rng) > 50
    with engine.begin() as conn:
        conn.execute(sa.text("TRUNCATE pgbus_workflows CASCADE"))
        assert workflow_counts.hour_counts(conn) == {}


def test_the_kept_hours_alone_miss_a_range_that_starts_mid_hour(engine):
    """The control: without its partial hours a range counts the runs of
    the whole hours it touches, which differs from the truth."""
    with engine.begin() as conn:
        insert_spread(conn, random.Random(4), "c", 2000)
    start, end = T0 - timedelta(hours=10, minutes=30), T0 - timedelta(hours=1, minutes=20)
    with engine.connect() as conn:
        truth = recounted(conn, "Order", start, end)
        exact = workflow_counts.class_status_counts(conn, "Order", created_from=start, created_to=end)
        whole_hours = workflow_counts.kept_hours_status_counts(
            conn, "Order", start=start.replace(minute=0), end=end.replace(minute=0) + timedelta(hours=1)
        )
        full_only = workflow_counts.kept_hours_status_counts(
            conn, "Order", start=start.replace(minute=0) + timedelta(hours=1), end=end.replace(minute=0)
        )
    assert exact == truth and sum(truth.values()) > 100
    assert whole_hours != truth and full_only != truth
    assert sum(full_only.values()) < sum(truth.values()) < sum(whole_hours.values())


def test_the_seeders_fill_the_hourly_counts(engine):
    rng = random.Random(8)
    seeding.seed(engine, runs=150, seed=5, now=T0)  # into empty tables
    assert assert_exact(engine, rng, classes=_classes(engine)) > 0
    seeding.seed(engine, runs=120, seed=6, now=T0, chunk_size=50)  # chunk by chunk
    seed_history(engine, runs=400, chunk_size=150)
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT count(*) FROM pgbus_workflows")).scalar_one() >= 670
    assert assert_exact(engine, rng, classes=_classes(engine)) > 0


def _classes(engine) -> tuple[str, ...]:
    with engine.connect() as conn:
        return tuple(conn.execute(sa.text("SELECT DISTINCT workflow_class FROM pgbus_workflows")).scalars())


def test_db_check_finds_wrong_hours_and_repair_refills_them(engine, database_url):
    rng = random.Random(12)
    with engine.begin() as conn:
        insert_spread(conn, rng, "x", 200)
    with engine.begin() as conn:
        # Moved to another hour with the triggers off: the totals by status
        # still agree, the hours do not.
        conn.execute(sa.text("SET LOCAL session_replication_role = replica"))
        conn.execute(
            sa.text("UPDATE pgbus_workflows SET created_at = created_at - interval '3 hours' WHERE id % 4 = 0")
        )
    with engine.connect() as conn:
        assert workflow_counts.status_counts(conn) == recount.status_counts(conn)
        before = workflow_counts.hour_counts(conn)
        assert before != recount.hour_counts(conn)

    checked = CliRunner().invoke(main_group, ["db", "check", "--database-url", database_url])
    assert checked.exit_code == 1, checked.output
    assert "disagree with the runs" in checked.output and " UTC: " in checked.output
    with engine.connect() as conn:
        assert workflow_counts.hour_counts(conn) == before  # check changes nothing

    repaired = CliRunner().invoke(main_group, ["db", "repair", "--database-url", database_url])
    assert repaired.exit_code == 0, repaired.output
    assert assert_exact(engine, rng) > 0
    for number in range(15):
        with engine.begin() as conn:
            step(conn, rng, f"after{number}")
    assert assert_exact(engine, rng) > 0


def test_the_upgrade_fills_the_hours_from_a_recount(scratch):  # noqa: F811
    """The migration that adds the hourly counts fills them from the runs
    already there (written by the earlier version's triggers, whose deltas
    carry no hour), and its triggers keep them from then on."""
    url, engine = scratch
    adds = next(
        version
        for version, name in enumerate(schema.MIGRATIONS, 1)
        if "CREATE TABLE IF NOT EXISTS pgbus_workflow_hour_counts" in schema._sql(name)
    )
    schema.install(engine, target=adds - 1)
    rng = random.Random(21)
    with engine.begin() as conn:
        insert_spread(conn, rng, "old", 400)
        conn.execute(sa.text("UPDATE pgbus_workflows SET status = 'failed' WHERE id % 7 = 0"))
    schema.install(engine)
    with engine.connect() as conn:
        assert workflow_counts.status_counts(conn) == recount.status_counts(conn)
        truth = recount.hour_counts(conn)
        assert workflow_counts.hour_counts(conn) == truth and sum(truth.values()) == 400
    for number in range(10):
        with engine.begin() as conn:
            step(conn, rng, f"up{number}")
    assert assert_exact(engine, rng) > 0
