"""Step durations per day: the histograms the triggers keep give each
step's median and 95th percentile per UTC day within the documented bound
of an exact recount (percentile_cont over the same attempts), folded or
not; a wrong bucket edge breaks that; pruning runs leaves them; the
insights page shows them, odd stored values included."""

from __future__ import annotations

import os
import random
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa
from support.browser import WAIT_MS, axe_violations, requires_chromium, serve
from support.web_helpers import Runs, make_app, soup, text_of

from pgbus_web.core.words.timefmt import duration
from pgbus_web.demo import workflows as demo
from pgbus_web.models import recount, step_durations
from pgbus_web.runtime import system
from pgbus_web.runtime.worker import Worker

LONG_AGO = datetime(2000, 1, 1, tzinfo=UTC).date()
STEPS = ("reserve", "charge", "notify")


def _random_history(engine, *, seed: int = 27, attempts: int = 1500) -> None:
    """Attempts of three steps over five UTC days with random run times
    (log-uniform from 0.1 ms to a day, some negative, some exactly 0),
    most inserted already finished (one statement), the rest started then
    finished by an UPDATE per attempt; and refunds a worker runs."""
    chance = random.Random(seed)
    runs = Runs(engine)
    run_ids = [runs.make("completed", workflow_class=demo.ORDER) for _ in range(20)]
    now = datetime.now(UTC)
    rows = []
    for index in range(attempts):
        finished = now - timedelta(days=chance.randrange(5), seconds=chance.uniform(0, 3600))
        roll = chance.random()
        seconds = 0.0 if roll < 0.03 else -chance.uniform(0, 5) if roll < 0.06 else 10 ** chance.uniform(-4, 5)
        rows.append((chance.choice(run_ids), STEPS[index % 3], finished - timedelta(seconds=seconds), finished))
    inserted, updated = rows[: attempts * 4 // 5], rows[attempts * 4 // 5 :]
    with engine.begin() as conn:
        conn.execute(
            sa.text(
                "INSERT INTO pgbus_workflow_steps (workflow_id, step_name, status, started_at, finished_at)"
                " SELECT w, s, 'completed', a, b FROM unnest(CAST(:w AS text[]), CAST(:s AS text[]),"
                " CAST(:a AS timestamptz[]), CAST(:b AS timestamptz[])) AS t(w, s, a, b)"
            ),
            {
                "w": [r[0] for r in inserted],
                "s": [r[1] for r in inserted],
                "a": [r[2] for r in inserted],
                "b": [r[3] for r in inserted],
            },
        )
    with engine.begin() as conn:
        for workflow_id, name, started, finished in updated:
            step_id = conn.execute(
                sa.text(
                    "INSERT INTO pgbus_workflow_steps (workflow_id, step_name, status, started_at)"
                    " VALUES (:w, :s, 'in_progress', :a) RETURNING id"
                ),
                {"w": workflow_id, "s": name, "a": started},
            ).scalar_one()
            conn.execute(
                sa.text("UPDATE pgbus_workflow_steps SET status = 'completed', finished_at = :b WHERE id = :id"),
                {"b": finished, "id": step_id},
            )
            # A later write to a finished attempt does not count it again.
            conn.execute(sa.text("UPDATE pgbus_workflow_steps SET result = '{}' WHERE id = :id"), {"id": step_id})
    for number in range(3):
        system.start(engine, demo.REFUND, {"refund_id": number}, registry=demo.REGISTRY)
    Worker(engine, demo.REGISTRY).drain()


def _compare(engine, workflow_class):
    """[(day, step, what, kept, exact)] for every percentile of every kept
    (day, step), and whether the attempts and the days agree exactly."""
    with engine.connect() as conn:
        kept = step_durations.histograms(conn, workflow_class, since=LONG_AGO)
        exact = recount.step_duration_days(conn, workflow_class, since=LONG_AGO)
    assert set(kept) == set(exact)
    pairs = []
    for key, histogram in kept.items():
        attempts, median, p95 = exact[key]
        assert sum(count for _, count in histogram) == attempts
        pairs.append((*key, "p50", step_durations.percentile(histogram, 0.5), median))
        pairs.append((*key, "p95", step_durations.percentile(histogram, 0.95), p95))
    return pairs


def _outside(pairs):
    return [pair for pair in pairs if not step_durations.within_bound(pair[3], pair[4])]


def test_the_kept_percentiles_are_within_the_bound_of_a_full_recount(engine):
    _random_history(engine)
    pairs = _compare(engine, demo.ORDER)
    # The control: five days of three steps, percentiles far apart in size.
    assert len(pairs) == 5 * 3 * 2
    assert min(exact for *_, exact in pairs) < 10 < 100 < max(exact for *_, exact in pairs)
    assert _outside(pairs) == []
    with engine.begin() as conn:
        step_durations.fold(conn)
        assert conn.execute(sa.text("SELECT count(*) FROM pgbus_workflow_step_duration_deltas")).scalar() == 0
    assert _outside(_compare(engine, demo.ORDER)) == []
    # The worker's refunds are counted under their own class.
    refunds = _compare(engine, demo.REFUND)
    assert refunds and _outside(refunds) == []


@pytest.mark.scale
def test_the_bound_is_tight_enough_that_a_wrong_bucket_edge_fails(engine):
    _random_history(engine)
    with engine.begin() as conn:
        step_durations.fold(conn)
        # Every attempt one bucket too high: an edge off by one step (9%).
        conn.execute(
            sa.text(
                "WITH moved AS (DELETE FROM pgbus_workflow_step_durations RETURNING *)"
                " INSERT INTO pgbus_workflow_step_duration_deltas (workflow_class, step_name, day, bucket, attempts)"
                " SELECT workflow_class, step_name, day, bucket + 1, attempts FROM moved"
            )
        )
    assert _outside(_compare(engine, demo.ORDER)) != []


def test_the_python_and_the_schema_buckets_agree(engine):
    chance = random.Random(5)
    values = [0.0, 0.0005, 0.001, 0.002, 1.0, 60.0] + [10 ** chance.uniform(-4, 9) for _ in range(500)]
    with engine.connect() as conn:
        found = conn.execute(
            sa.text(
                "SELECT array_agg(pgbus_step_duration_bucket(v) ORDER BY o)"
                " FROM unnest(CAST(:v AS float8[])) WITH ORDINALITY AS t(v, o)"
            ),
            {"v": values},
        ).scalar_one()
    assert found == [step_durations.bucket_of(value) for value in values]
    for value in values[3:]:
        assert step_durations.within_bound(step_durations.representative(step_durations.bucket_of(value)), value)


def test_pruning_runs_leaves_the_kept_durations(engine):
    _random_history(engine, attempts=300)
    now = datetime.now(UTC)
    with engine.connect() as conn:
        before = step_durations.per_day(conn, demo.ORDER, now=now)
    with engine.begin() as conn:
        conn.execute(sa.text("DELETE FROM pgbus_workflows WHERE workflow_class = :c"), {"c": demo.ORDER})
    with engine.connect() as conn:
        after = step_durations.per_day(conn, demo.ORDER, now=now)
        recounted = recount.step_duration_days(conn, demo.ORDER, since=LONG_AGO)
    assert len(before) == 5 and after == before
    assert recounted == {}  # the control: the steps themselves are gone


def test_the_page_shows_the_days_and_takes_odd_stored_values(engine, database):
    runs = Runs(engine)
    now = datetime.now(UTC)
    run_id = runs.make("completed", workflow_class=demo.ORDER)
    with engine.begin() as conn:
        for started, finished in (
            ("now() - interval '2 seconds'", "now()"),  # 2 s
            ("now() - interval '2 seconds'", "now()"),
            ("now()", "now() - interval '1 hour'"),  # negative: counts as 0
            ("NULL", "now()"),  # never started: not counted
            ("'-infinity'", "now()"),  # no run time: not counted
            ("'1970-01-01'", "now()"),  # huge
        ):
            conn.execute(
                sa.text(
                    "INSERT INTO pgbus_workflow_steps (workflow_id, step_name, status, started_at, finished_at)"
                    f" VALUES (:w, 'charge', 'completed', {started}, {finished})"
                ),
                {"w": run_id},
            )
        # Odd rows written by hand into the kept table itself.
        conn.execute(
            sa.text(
                "INSERT INTO pgbus_workflow_step_durations (workflow_class, step_name, day, bucket, attempts) VALUES"
                " (:c, 'odd', :d, -5, 1), (:c, 'odd', :d, 2000000000, 1), (:c, 'odd', :d, 10, -7),"
                " (:c, 'gone', :d, 10, -3)"
            ),
            {"c": demo.ORDER, "d": (now - timedelta(days=1)).date()},
        )
    client = make_app(database).test_client()
    response = client.get(f"/workflows/insights/{demo.ORDER}")
    assert response.status_code == 200
    page = soup(response)
    section = page.select_one(".pgbus-step-days")
    today, yesterday = (
        section.select(f'tbody[data-day="{day.isoformat()}"]')
        for day in (
            datetime.combine(now.date(), datetime.min.time(), UTC),
            datetime.combine((now - timedelta(days=1)).date(), datetime.min.time(), UTC),
        )
    )
    assert len(today) == 1 and len(yesterday) == 1
    charge = today[0].select_one('tr[data-step="charge"]')
    cells = [text_of(cell) for cell in charge.select("td")]
    with engine.connect() as conn:
        exact = recount.step_duration_days(conn, demo.ORDER, since=LONG_AGO)
    attempts, median, p95 = exact[(now.date(), "charge")]
    assert attempts == 4 and cells[0] == "4"
    # The median of 0, 2, 2, huge is 2 s, kept within the bound: "2s".
    assert cells[1] == duration(2.0) == "2s"
    assert cells[2] != "—"
    # A bucket below 0 reads as 0, one past any real run time as the last
    # one; negative attempts leave a step out.
    odd = [text_of(cell) for cell in yesterday[0].select_one('tr[data-step="odd"]').select("td")]
    assert odd[0] == "2" and odd[1] != "—"
    assert yesterday[0].select_one('tr[data-step="gone"]') is None
    assert section.select_one('[role="region"][tabindex="0"]') is not None


def test_a_class_with_no_finished_step_says_so(engine, database):
    Runs(engine).make("running", workflow_class=demo.ORDER)
    page = soup(make_app(database).test_client().get(f"/workflows/insights/{demo.ORDER}"))
    section = page.select_one(".pgbus-step-days")
    assert section.select_one("table") is None and section.select_one(".pgbus-empty") is not None


# --- in the browser ---------------------------------------------------------------------------

SCREEN_SIZES = [(1280, 800), (390, 844)]


@pytest.fixture
def insights_server(database):
    yield from serve(make_app(database, refresh_interval=600))


@requires_chromium
@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_the_page_with_its_days_fits_and_is_axe_clean(chromium, insights_server, engine, scheme):
    _random_history(engine, attempts=400)
    folder = os.environ.get("PGBUS_TEST_SCREENSHOTS")
    problems: dict[str, object] = {}
    for width, height in SCREEN_SIZES:
        context = chromium.new_context(
            viewport={"width": width, "height": height}, color_scheme=scheme, timezone_id="Asia/Tokyo"
        )
        page = context.new_page()
        page.set_default_timeout(WAIT_MS)
        try:
            for locale in ("en", "de", "ja"):
                where = f"{locale} {width} {scheme}"
                page.goto(f"{insights_server}/workflows/insights/{demo.ORDER}?locale={locale}")
                page.wait_for_load_state("load")
                # The control: the section is there with its five days.
                days = page.locator(".pgbus-step-days tbody").count()
                if days != 5:
                    problems[f"{where}: days"] = days
                widths = page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
                if widths[0] > widths[1]:
                    problems[f"{where}: wider than the window"] = widths
                violations = axe_violations(page)
                if violations:
                    problems[f"{where}: axe"] = violations
                if folder:
                    Path(folder).mkdir(parents=True, exist_ok=True)
                    page.screenshot(path=f"{folder}/insights-{locale}-{width}x{height}-{scheme}.png")
                    page.locator(".pgbus-step-days").screenshot(
                        path=f"{folder}/step-days-{locale}-{width}x{height}-{scheme}.png"
                    )
        finally:
            context.close()
    assert problems == {}, problems


def test_the_pages_figures_are_the_histograms_percentiles(engine):
    """per_day picks the buckets around each rank on the server; the figures
    are the ones ``percentile`` reads from every bucket row."""
    _random_history(engine)
    now = datetime.now(UTC)
    with engine.connect() as conn:
        days = step_durations.per_day(conn, demo.ORDER, now=now, days=10_000)
        kept = step_durations.histograms(conn, demo.ORDER, since=LONG_AGO)
    page = {(day["day"].date(), row["step_name"]): row for day in days for row in day["steps"]}
    assert set(page) == set(kept) and len(page) == 5 * 3
    for key, histogram in kept.items():
        row = page[key]
        assert row["attempts"] == sum(count for _, count in histogram)
        assert row["median_seconds"] == pytest.approx(step_durations.percentile(histogram, 0.5), rel=1e-12)
        assert row["p95_seconds"] == pytest.approx(step_durations.percentile(histogram, 0.95), rel=1e-12)
    # The control: the two percentiles differ, so one cannot pass for the other.
    assert any(row["median_seconds"] != row["p95_seconds"] for row in page.values())


FOLD_LOCK = 8099550702862692452  # pgbus_workflow_step_durations_fold's key


def _bulk_finished_steps(engine, run_id, count):
    with engine.begin() as conn:
        conn.execute(
            sa.text(
                "INSERT INTO pgbus_workflow_steps (workflow_id, step_name, status, started_at, finished_at)"
                " SELECT :w, 'step_' || (g % 40), 'completed', now() - g * interval '1 second', now()"
                " FROM generate_series(1, :n) AS g"
            ),
            {"w": run_id, "n": count},
        )


def _deltas(engine):
    with engine.connect() as conn:
        return conn.execute(sa.text("SELECT count(*) FROM pgbus_workflow_step_duration_deltas")).scalar_one()


def test_a_statement_writing_many_finished_attempts_folds_them_as_it_goes(engine):
    """The fold moves its own transaction's deltas too: a statement writing
    thousands of finished attempts leaves a few dozen delta rows (one in 32
    rows folds; none in its last 1,000 has odds of 1e-14)."""
    run_id = Runs(engine).make("completed", workflow_class=demo.ORDER)
    # The control: with the fold lock held elsewhere, every attempt the
    # statement writes stays a delta row.
    # Counted from what the tests before left, not from nothing.
    before = _deltas(engine)
    with engine.connect() as holder:
        holder.execute(sa.text("SELECT pg_advisory_lock(:k)"), {"k": FOLD_LOCK})
        try:
            _bulk_finished_steps(engine, run_id, 2000)
            assert _deltas(engine) == before + 2000
        finally:
            holder.execute(sa.text("SELECT pg_advisory_unlock(:k)"), {"k": FOLD_LOCK})
            holder.commit()
    _bulk_finished_steps(engine, run_id, 2000)
    assert _deltas(engine) < 1000
    with engine.connect() as conn:
        kept = step_durations.histograms(conn, demo.ORDER, since=LONG_AGO)
    assert sum(count for histogram in kept.values() for _, count in histogram) == 4000


def test_scheduling_and_starting_a_step_calls_no_duration_trigger(engine):
    """The worker's writes that do not finish an attempt are skipped by the
    triggers' WHEN, without a call; the one that finishes it calls once."""
    run_id = Runs(engine).make("running", workflow_class=demo.ORDER)
    calls = (
        "SELECT COALESCE(sum(calls), 0) FROM pg_stat_user_functions"
        " WHERE funcname = 'pgbus_workflow_steps_durations_on_finish'"
    )
    with engine.connect() as conn:
        conn.execute(sa.text("SET track_functions = 'pl'"))
        step_id = conn.execute(
            sa.text(
                "INSERT INTO pgbus_workflow_steps (workflow_id, step_name, status, scheduled_at)"
                " VALUES (:w, 'reserve', 'scheduled', now()) RETURNING id"
            ),
            {"w": run_id},
        ).scalar_one()
        conn.execute(
            sa.text("UPDATE pgbus_workflow_steps SET status = 'in_progress', started_at = now() WHERE id = :id"),
            {"id": step_id},
        )
        # The transaction's own calls, before it ends (pg_stat_xact_*).
        before_finish = conn.execute(
            sa.text(calls.replace("pg_stat_user_functions", "pg_stat_xact_user_functions"))
        ).scalar_one()
        conn.execute(
            sa.text("UPDATE pgbus_workflow_steps SET status = 'completed', finished_at = now() WHERE id = :id"),
            {"id": step_id},
        )
        after_finish = conn.execute(
            sa.text(calls.replace("pg_stat_user_functions", "pg_stat_xact_user_functions"))
        ).scalar_one()
        conn.commit()
    assert (before_finish, after_finish) == (0, 1)
