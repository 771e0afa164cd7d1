"""The kept run counts (schema/v3.sql): equal to count(*) by class and
status after random histories of inserts, status and class changes,
deletes, prunes, rolled-back writes, TRUNCATE and concurrent writers; a
version 2 database gets them filled on upgrade; `db repair` refills them
after writes the triggers never saw; the pages read them."""

from __future__ import annotations

import random
import threading

import pytest
import sqlalchemy as sa
from click.testing import CliRunner
from support.count_checks import insert_runs, random_step

from pgbus_web import schema
from pgbus_web.launch import main_group
from pgbus_web.models import recount, workflow_counts, workflow_rows
from pgbus_web.rules import states


def kept(engine) -> dict:
    with engine.connect() as conn:
        return workflow_counts.status_counts(conn)


def counted(engine) -> dict:
    with engine.connect() as conn:
        return recount.status_counts(conn)


def assert_exact(engine) -> dict:
    truth = counted(engine)
    assert kept(engine) == truth
    return truth


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_kept_counts_equal_count_star_after_random_histories(engine, seed):
    rng = random.Random(seed)
    for step in range(60):
        with engine.begin() as conn:
            for k in range(rng.randrange(1, 4)):
                random_step(conn, rng, f"{step}.{k}")
        if step % 10 == 0:
            assert_exact(engine)
    truth = assert_exact(engine)
    assert sum(truth.values()) > 20  # the history left runs to count
    with engine.begin() as conn:
        conn.execute(sa.text("TRUNCATE pgbus_workflows CASCADE"))
    assert kept(engine) == {} == counted(engine)
    with engine.begin() as conn:
        insert_runs(conn, rng, "after", 10)
    assert sum(assert_exact(engine).values()) == 10


def test_deltas_are_folded_and_the_fold_changes_no_count(engine):
    rng = random.Random(7)
    written = 0
    for step in range(200):
        with engine.begin() as conn:
            # The fold is chosen by the server's random(): seeded per write,
            # so the test sees the same folds on every run.
            conn.execute(sa.text("SELECT setseed(:s)"), {"s": step / 200})
            before = conn.execute(sa.text("SELECT count(*) FROM pgbus_workflow_count_deltas")).scalar_one()
            insert_runs(conn, rng, f"r{step}", 3)
            after = conn.execute(sa.text("SELECT count(*) FROM pgbus_workflow_count_deltas")).scalar_one()
            written += max(after - before, 0)
    truth = assert_exact(engine)
    with engine.connect() as conn:
        deltas = conn.execute(sa.text("SELECT count(*) FROM pgbus_workflow_count_deltas")).scalar_one()
    # 200 writes, each folding at odds 1/32: most of what was written is folded.
    assert written > 200
    assert deltas < written / 2
    with engine.begin() as conn:
        conn.execute(sa.text("SELECT pgbus_workflow_counts_fold()"))
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT count(*) FROM pgbus_workflow_count_deltas")).scalar_one() == 0
    assert kept(engine) == truth


def test_four_concurrent_writers_keep_them_exact(engine):
    with engine.begin() as conn:
        insert_runs(conn, random.Random(1), "c", 400)
    errors = []

    def worker(n: int) -> None:
        rng = random.Random(n)
        try:
            for _ in range(150):
                with engine.begin() as conn:
                    run = workflow_rows.lock_for(conn, f"c-{rng.randrange(1, 401)}")
                    workflow_rows.transition(conn, run["workflow_id"], from_=run["status"], to=rng.choice(states.RUN))
                    if rng.random() < 0.1:
                        insert_runs(conn, rng, f"w{n}-{rng.random()}", 2)
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert_exact(engine)


def test_pages_read_the_kept_counts(engine):
    """The status counts come from the kept rows, not from the runs: a
    run written with the triggers off is not counted until a repair."""
    with engine.begin() as conn:
        insert_runs(conn, random.Random(3), "p", 14)
    truth = assert_exact(engine)
    with engine.begin() as conn:
        conn.execute(sa.text("SET LOCAL session_replication_role = replica"))
        conn.execute(
            sa.text(
                "INSERT INTO pgbus_workflows (workflow_id, workflow_class, status) VALUES ('quiet', 'Order', 'running')"
            )
        )
    assert kept(engine) == truth
    with engine.connect() as conn:
        assert workflow_counts.class_exists(conn, "Order")
        assert not workflow_counts.class_exists(conn, "Nobody")
        order = workflow_counts.class_status_counts(conn, "Order")
    assert order == {status: runs for (klass, status), runs in truth.items() if klass == "Order"}


def db(url: str, *args: str):
    return CliRunner().invoke(main_group, ["db", *args, "--database-url", url])


def test_db_check_finds_wrong_counts_and_repair_refills_them(engine, database_url):
    rng = random.Random(11)
    with engine.begin() as conn:
        insert_runs(conn, rng, "x", 30)
    with engine.begin() as conn:
        conn.execute(sa.text("SET LOCAL session_replication_role = replica"))
        conn.execute(sa.text("UPDATE pgbus_workflows SET status = 'failed' WHERE id % 3 = 0"))
        conn.execute(sa.text("DELETE FROM pgbus_workflows WHERE id % 5 = 0"))
    assert kept(engine) != counted(engine)
    before = kept(engine)

    checked = db(database_url, "check")
    assert checked.exit_code == 1, checked.output
    assert "run counts by class and status disagree with the runs" in checked.output
    assert kept(engine) == before  # check changes nothing

    repaired = db(database_url, "repair")
    assert repaired.exit_code == 0, repaired.output
    assert repaired.output.splitlines()[-2].startswith("Refilled ")
    assert_exact(engine)
    clean = db(database_url, "check")
    assert (clean.exit_code, clean.output.splitlines()[-3:-1]) == (
        0,
        ["The run counts agree with the runs.", "The needs-attention counts agree with the runs."],
    )
    # And they stay exact through writes after the repair.
    for step in range(20):
        with engine.begin() as conn:
            random_step(conn, rng, f"after{step}")
    assert_exact(engine)


def test_an_upgrade_from_version_2_fills_the_counts_from_the_runs(scratch):  # noqa: F811
    url, engine = scratch
    schema.install(engine, target=2)
    with engine.begin() as conn:
        insert_runs(conn, random.Random(5), "old", 50)
        truth = recount.status_counts(conn)
    result = CliRunner().invoke(main_group, ["db", "install", "--database-url", url])
    assert result.exit_code == 0, result.output
    assert kept(engine) == truth and sum(truth.values()) == 50
    with engine.begin() as conn:
        conn.execute(sa.text("DELETE FROM pgbus_workflows WHERE id <= 10"))
    assert sum(assert_exact(engine).values()) == 40
