"""GET /metrics: the Prometheus exposition of runs, stuck runs and
operations, read from the pages' own queries at most once per interval,
behind sign-in or a token; the example alerting rules checked by promtool."""

from __future__ import annotations

import base64
import shutil
import subprocess
import threading
from pathlib import Path

import pytest
import sqlalchemy as sa
from prometheus_client.parser import text_string_to_metric_families
from support.api_support import token_for
from support.auth_support import OPERATOR, VIEWER, signed_in_app, write_users
from support.web_helpers import make_app

from pgbus_web.extension import PgbusWeb

ROOT = Path(__file__).resolve().parents[2]


def samples(response) -> dict[tuple[str, tuple], float]:
    assert response.status_code == 200, response.get_data(as_text=True)
    assert response.mimetype == "text/plain"
    found = {}
    for family in text_string_to_metric_families(response.get_data(as_text=True)):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


def stuck(found, klass, reason) -> float:
    return found[("pgbus_workflow_stuck_runs", (("reason", reason), ("workflow_class", klass)))]


def runs_of(found, klass, status) -> float:
    return found[("pgbus_workflow_runs", (("status", status), ("workflow_class", klass)))]


def test_a_scrape_counts_runs_and_the_stuck_gauge_falls_after_a_resume_and_the_interval(
    database, database_url, driver, engine
):
    app = make_app(database, metrics_interval=60)
    # The cache's clock by hand: "within the interval" must not depend on
    # how long the command line below takes on a busy machine.
    moment = [0.0]
    app.extensions["pgbus_metrics"].cache.clock = lambda: moment[0]
    client = app.test_client()
    first, second = driver.paused_on_capture(), driver.paused_on_capture(order_id=9)
    driver.completed()  # a control: finished, never stuck

    before = samples(client.get("/metrics"))
    assert stuck(before, "OrderWorkflow", "paused_error") == 2
    assert stuck(before, "RefundWorkflow", "paused_error") == 0
    assert runs_of(before, "OrderWorkflow", "paused") == 2
    assert runs_of(before, "RefundWorkflow", "completed") == 1
    oldest = before[
        ("pgbus_workflow_oldest_stuck_seconds", (("reason", "paused_error"), ("workflow_class", "OrderWorkflow")))
    ]
    assert oldest > 0

    # As an operator would: the stuck group from the command line, one run resumed there.
    from click.testing import CliRunner

    from pgbus_web.launch import main_group

    listed = CliRunner().invoke(main_group, ["attention", "--database-url", database_url])
    assert listed.output.splitlines()[1].split()[:4] == ["2", "OrderWorkflow", "capture_payment", "paused_error"]
    resumed = CliRunner().invoke(
        main_group,
        [
            "runs",
            "resume",
            first,
            "--database-url",
            database_url,
            "--reason",
            "gateway back",
            "--definitions",
            "pgbus_web.demo.workflows",
        ],
    )
    assert resumed.exit_code == 0, resumed.output
    # Within the interval: the same reading, the database not asked again.
    assert stuck(samples(client.get("/metrics")), "OrderWorkflow", "paused_error") == 2
    moment[0] += 60
    after = samples(client.get("/metrics"))
    assert stuck(after, "OrderWorkflow", "paused_error") == 1
    assert runs_of(after, "OrderWorkflow", "paused") == 1
    # Request durations by route, this route's scrapes among them.
    assert (
        after[("pgbus_web_request_duration_seconds_count", (("method", "GET"), ("route", "pgbus_metrics.metrics")))]
        >= 2
    )
    assert second


def test_concurrent_scrapes_read_the_database_once_per_interval(database, driver, engine):
    driver.paused_on_capture()
    app = make_app(database, metrics_interval=60)
    statements: list[str] = []

    def count(conn, cursor, statement, parameters, context, executemany):
        if "GROUP BY workflow_class, status" in statement:  # status_counts: once per reading
            statements.append(statement)

    sa.event.listen(engine, "before_cursor_execute", count)
    try:
        barrier = threading.Barrier(8)
        answers = []

        def scrape():
            client = app.test_client()
            barrier.wait()
            answers.append(samples(client.get("/metrics")))

        threads = [threading.Thread(target=scrape) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
        assert len(answers) == 8
        assert all(stuck(found, "OrderWorkflow", "paused_error") == 1 for found in answers)
        assert len(statements) == 1
        # A control: once the interval has passed, the next scrape reads again.
        app.extensions["pgbus_metrics"].cache.interval = 0
        samples(app.test_client().get("/metrics"))
        assert len(statements) == 2
    finally:
        sa.event.remove(engine, "before_cursor_execute", count)


def test_operation_outcomes_come_from_the_operations_table(database, engine):
    with engine.begin() as conn:
        conn.execute(
            sa.text(
                "INSERT INTO pgbus_web_operations (verb, filters, ceiling_id, params, reason, actor, status, total, "
                "moved, skipped, refused, created_at) VALUES "
                "('resume', '{}', 1, '{}', 'r', 'cli:x', 'done', 7, 4, 2, 1, now()), "
                "('resume', '{}', 1, '{}', 'r', 'cli:x', 'failed', 3, 1, 0, 0, now())"
            )
        )
    found = samples(make_app(database).test_client().get("/metrics"))
    assert found[("pgbus_web_operation_runs_total", (("outcome", "moved"), ("verb", "resume")))] == 5
    assert found[("pgbus_web_operation_runs_total", (("outcome", "refused"), ("verb", "resume")))] == 1
    assert found[("pgbus_web_operations", (("status", "failed"), ("verb", "resume")))] == 1
    assert found[("pgbus_web_operations", (("status", "cancelled"), ("verb", "resume")))] == 0


def _basic(name, password):
    return {"Authorization": "Basic " + base64.b64encode(f"{name}:{password}".encode()).decode()}


def test_standalone_metrics_need_sign_in_or_a_token(database, engine, tmp_path):
    client = signed_in_app(database, write_users(tmp_path / "users")).test_client()
    refused = client.get("/metrics")
    assert refused.status_code == 401
    assert "pgbus_workflow_runs" not in refused.get_data(as_text=True)
    assert client.get("/metrics", headers={"Authorization": "Bearer pgbw_not-a-token"}).status_code == 401
    assert client.get("/metrics", headers=_basic(VIEWER[0], "wrong")).status_code == 401
    assert samples(client.get("/metrics", headers=_basic(*VIEWER)))
    assert samples(client.get("/metrics", headers=_basic(*OPERATOR)))
    token = token_for(engine, "prometheus", "viewer")
    scraped = client.get("/metrics", headers={"Authorization": f"Bearer {token}"})
    assert samples(scraped)
    assert scraped.headers["X-Content-Type-Options"] == "nosniff"
    with engine.connect() as conn:
        [last_used] = conn.execute(sa.text("SELECT last_used_at FROM pgbus_web_api_tokens")).scalars()
    assert last_used is not None


def test_a_mounted_app_serves_metrics_only_when_it_opts_in(database):
    from flask import Flask

    plain = Flask("host")
    PgbusWeb(plain, url_prefix="/ops", database=database, run_operations=False)
    assert plain.test_client().get("/ops/metrics").status_code == 404

    opted = Flask("host")
    PgbusWeb(
        opted,
        url_prefix="/ops",
        database=database,
        run_operations=False,
        metrics=True,
        can_view=lambda request: request.headers.get("X-Staff") == "yes",
    )
    assert opted.test_client().get("/ops/metrics").status_code == 403
    found = samples(opted.test_client().get("/ops/metrics", headers={"X-Staff": "yes"}))
    assert stuck_pairs(found) == []  # no runs: no series of classes
    assert (
        "pgbus_web_request_duration_seconds_count",
        (("method", "GET"), ("route", "pgbus_metrics.metrics")),
    ) in found


def stuck_pairs(found):
    return [labels for name, labels in found if name == "pgbus_workflow_stuck_runs"]


PROMTOOL = shutil.which("promtool")


@pytest.mark.skipif(
    PROMTOOL is None and not __import__("os").environ.get("CI"),
    reason="promtool (Debian's prometheus package) is not installed; .ci/run installs it",
)
def test_the_example_alerting_rules_pass_promtool():
    checked = subprocess.run(
        [PROMTOOL or "promtool", "check", "rules", str(ROOT / "docs/alerts.yml")], capture_output=True, text=True
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "SUCCESS: 6 rules found" in checked.stdout
    # The rules fire on the metrics' series and stay quiet on the controls.
    tested = subprocess.run(
        [PROMTOOL or "promtool", "test", "rules", str(ROOT / "tests/metrics/alerts_test.yml")],
        capture_output=True,
        text=True,
    )
    assert tested.returncode == 0, tested.stdout + tested.stderr


def test_serve_builds_its_metrics_with_the_interval_asked(database_url):
    from pgbus_web.launch.serve import build_app

    app = build_app(database_url, metrics_interval=3.5)
    try:
        assert app.extensions["pgbus_metrics"].cache.interval == 3.5
        scraped = app.test_client().get("/metrics")  # no sign-in asked (loopback): open
        assert scraped.status_code == 200
        assert "# TYPE pgbus_workflow_stuck_runs gauge" in scraped.get_data(as_text=True)
    finally:
        app.extensions["pgbus_web"].database.primary.dispose()
