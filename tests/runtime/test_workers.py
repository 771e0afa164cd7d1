"""Workers and queues: a real ``pgbus-web worker`` appears alive on the
Workers page; killed (SIGKILL) it is flagged gone on the runs index within
worker_gone_after, before its run is stalled, with the run it held; a
clean stop marks it stopped; odd heartbeat rows never break a page; the
PGMQ queues show their depth and oldest message."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa
from support import slow_workflows
from support.waiting import wait_until
from support.web_helpers import make_app, soup, text_of

from pgbus_web.core import settings as settings_module
from pgbus_web.core import worker_reads
from pgbus_web.demo import workflows as demo
from pgbus_web.extension import PgbusWeb
from pgbus_web.models import pgmq_queues
from pgbus_web.runtime import system
from pgbus_web.runtime.heartbeat import SERVE, WORKER, Heartbeat
from pgbus_web.runtime.worker import Worker

TESTS = Path(__file__).resolve().parents[1]
GONE_AFTER = timedelta(seconds=2)


def _wait_for(predicate, timeout=30.0):
    return wait_until(predicate, timeout=timeout, what="the worker's rows and pages")


def _worker_process(database_url, definitions, *extra):
    return subprocess.Popen(
        [
            sys.executable,
            "-c",
            "from pgbus_web.launch import main; main()",
            "worker",
            "--definitions",
            definitions,
            "--poll-interval",
            "0.05",
            "--heartbeat-interval",
            "0.2",
            *extra,
        ],
        env={
            **os.environ,
            "PGBUS_DATABASE_URL": database_url,
            "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")]),
        },
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _row_of(engine, pid):
    with engine.connect() as conn:
        row = conn.execute(sa.text("SELECT * FROM pgbus_web_workers WHERE pid = :pid"), {"pid": pid}).first()
    return dict(row._mapping) if row is not None else None


def _step_holder(engine, workflow_id):
    with engine.connect() as conn:
        return conn.execute(
            sa.text("SELECT worker_id FROM pgbus_workflow_steps WHERE workflow_id = :id AND status = 'in_progress'"),
            {"id": workflow_id},
        ).scalar()


def _banner_ids(client):
    page = soup(client.get("/workflows"))
    banner = page.select_one("#pgbus-workers-banner")
    assert banner is not None
    return page, banner, [int(node["data-worker-id"]) for node in banner.select(".pgbus-gone-worker")]


def _page_states(client):
    page = soup(client.get("/workers"))
    return {int(row["data-worker-id"]): row["data-state"] for row in page.select(".pgbus-worker-row")}


def test_a_killed_worker_is_flagged_on_the_index_before_its_run_stalls(engine, database, database_url):
    held = system.start(engine, slow_workflows.SLOW_WORKFLOW, {"hold_seconds": 120}, registry=slow_workflows.REGISTRY)
    # A control: a run no worker holds (its class is not one the worker runs).
    other = system.start(engine, demo.REFUND, {"refund_id": 7}, registry=demo.REGISTRY)
    app = make_app(database, worker_gone_after=GONE_AFTER)
    client = app.test_client()
    process = _worker_process(database_url, "support.slow_workflows")
    try:
        row = _wait_for(lambda: _row_of(engine, process.pid))
        assert row is not None, process.stderr.read() if process.poll() is not None else "no heartbeat row"
        assert (row["kind"], row["host"], row["stopped_at"]) == (WORKER, os.uname().nodename[:255], None)
        # The step it started records it, from the claim's own statement.
        assert _wait_for(lambda: _step_holder(engine, held["workflow_id"])) == row["id"]
        assert _page_states(client)[row["id"]] == "alive"
        _, banner, ids = _banner_ids(client)
        assert ids == [] and banner.has_attr("hidden")
        # Its heartbeat goes on while its step's own code runs.
        first = row["heartbeat_at"]
        assert _wait_for(lambda: _row_of(engine, process.pid)["heartbeat_at"] > first, timeout=5)

        process.send_signal(signal.SIGKILL)
        process.wait(timeout=10)
        flagged = _wait_for(lambda: _banner_ids(client)[2] == [row["id"]], timeout=GONE_AFTER.total_seconds() + 30)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=10)
    assert flagged, "the killed worker was never flagged"
    page, banner, _ = _banner_ids(client)
    assert not banner.has_attr("hidden")
    runs = [link["href"].rsplit("/", 1)[1] for link in banner.select(".pgbus-gone-worker-run")]
    assert runs == [held["workflow_id"]]
    assert held["workflow_id"] not in text_of(page.select_one("#pgbus-attention"))
    # Not stalled yet: no needs-attention group, the step still in progress.
    assert page.select(".pgbus-attention-group") == []
    assert _step_holder(engine, held["workflow_id"]) == row["id"]
    # The link lists exactly the runs it held (the control is not among them).
    listed = soup(client.get(banner.select_one(".pgbus-gone-worker-runs")["href"]))
    ids = [node["data-workflow-id"] for node in listed.select("[data-workflow-id]")]
    assert held["workflow_id"] in ids and other["workflow_id"] not in ids
    assert _page_states(client)[row["id"]] == "gone"


def test_a_clean_stop_marks_the_worker_stopped_and_never_flags_it(engine, database, database_url):
    run = system.start(engine, demo.REFUND, {"refund_id": 1}, registry=demo.REGISTRY)
    client = make_app(database, worker_gone_after=GONE_AFTER).test_client()
    process = _worker_process(database_url, "pgbus_web.demo.workflows")
    try:
        row = _wait_for(lambda: _row_of(engine, process.pid))
        assert row is not None
        with engine.connect() as conn:
            assert _wait_for(
                lambda: (
                    conn.execute(
                        sa.text("SELECT status FROM pgbus_workflows WHERE workflow_id = :id"),
                        {"id": run["workflow_id"]},
                    ).scalar()
                    == "completed"
                    or conn.rollback()
                )
            )
        process.send_signal(signal.SIGTERM)
        process.communicate(timeout=20)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 0
    stopped = _row_of(engine, process.pid)
    assert stopped["stopped_at"] is not None and stopped["steps_done"] == 3
    # The time is the behaviour: past GONE_AFTER a stopped worker is still "stopped", never "gone".
    time.sleep(GONE_AFTER.total_seconds() + 0.2)
    assert _page_states(client)[row["id"]] == "stopped"
    assert _banner_ids(client)[2] == []
    with engine.connect() as conn:
        assert (
            conn.execute(
                sa.text("SELECT count(*) FROM pgbus_workflow_steps WHERE workflow_id = :id AND worker_id = :w"),
                {"id": run["workflow_id"], "w": row["id"]},
            ).scalar()
            == 3
        )


def test_every_step_a_worker_starts_records_it_and_none_without_a_heartbeat(engine):
    beating = Worker(engine, demo.REGISTRY, heartbeat=Heartbeat(engine, WORKER))
    first = system.start(engine, demo.REFUND, {"refund_id": 1}, registry=demo.REGISTRY)
    beating.drain()
    silent = Worker(engine, demo.REGISTRY)  # the control: no row, no id
    second = system.start(engine, demo.REFUND, {"refund_id": 2}, registry=demo.REGISTRY)
    silent.drain()
    beating.beat(force=True)  # the throttled beat: steps_done written at the next one
    with engine.connect() as conn:
        holders = dict(
            conn.execute(
                sa.text(
                    "SELECT workflow_id, array_agg(DISTINCT coalesce(worker_id, "
                    "-1)) FROM pgbus_workflow_steps GROUP BY 1"
                )
            ).all()
        )
        row = conn.execute(sa.text("SELECT * FROM pgbus_web_workers")).one()
    assert holders == {first["workflow_id"]: [beating.worker_id], second["workflow_id"]: [-1]}
    assert row.id == beating.worker_id and row.steps_done == 3


def test_a_heartbeat_writes_at_most_once_per_interval(engine):
    heartbeat = Heartbeat(engine, WORKER, interval=3600)
    assert heartbeat.beat() is True  # registers
    assert [heartbeat.beat(steps_done=n) for n in range(50)] == [False] * 50
    assert heartbeat.beat(steps_done=9, force=True) is True
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT steps_done FROM pgbus_web_workers")).scalar_one() == 9


def test_a_pruned_row_comes_back_with_the_next_beat_and_old_rows_are_pruned(engine):
    with engine.begin() as conn:
        conn.execute(
            sa.text(
                "INSERT INTO pgbus_web_workers (kind, host, pid, started_at, heartbeat_at) VALUES"
                " ('worker', 'old', 1, now() - interval '3 days', now() - interval '2 days'),"
                " ('worker', 'recent', 2, now() - interval '3 hours', now() - interval '2 hours')"
            )
        )
    heartbeat = Heartbeat(engine, SERVE, interval=0)
    heartbeat.register()
    with engine.begin() as conn:
        hosts = sorted(conn.execute(sa.text("SELECT host FROM pgbus_web_workers")).scalars())
        conn.execute(sa.text("DELETE FROM pgbus_web_workers WHERE id = :id"), {"id": heartbeat.id})
    assert hosts == sorted(["recent", heartbeat.host])
    heartbeat.beat(steps_done=4)
    with engine.connect() as conn:
        assert (
            conn.execute(
                sa.text("SELECT steps_done FROM pgbus_web_workers WHERE id = :id"), {"id": heartbeat.id}
            ).scalar()
            == 4
        )


ODD_ROWS = [
    # host, pid, started_at, heartbeat_at, steps_done, operation_id
    ("NULL", "0", "now() - interval '1 hour'", "now() - interval '1 hour'", "-5", "NULL"),
    ("''", "-1", "'-infinity'", "now() + interval '1 day'", str(2**62), str(-3)),
    ("repeat('h', 5000)", str(2**62), "now()", "'infinity'", "0", str(2**63 - 1)),
    (
        "'<script>alert(1)</script>'",
        "NULL",
        "now() + interval '1 year'",
        "now() - interval '1 minute'",
        str(-(2**62)),
        "0",
    ),
]


def test_odd_heartbeat_rows_never_break_the_pages(engine, database):
    with engine.begin() as conn:
        for host, pid, started, beat, steps_done, operation in ODD_ROWS:
            conn.execute(
                sa.text(
                    "INSERT INTO pgbus_web_workers (kind, host, pid, "
                    "started_at, heartbeat_at, steps_done, operation_id)"
                    f" VALUES ('worker', {host}, {pid}, {started}, {beat}, {steps_done}, {operation})"
                )
            )
        ids = conn.execute(sa.text("SELECT id FROM pgbus_web_workers ORDER BY id")).scalars().all()
    # A run held by the first (gone) row, so the banner draws its odd values.
    held = system.start(engine, demo.REFUND, {"refund_id": 3}, registry=demo.REGISTRY)
    with engine.begin() as conn:
        conn.execute(
            sa.text(
                "UPDATE pgbus_workflow_steps SET status = 'in_progress', started_at = now(), worker_id = :w"
                " WHERE workflow_id = :id"
            ),
            {"w": ids[0], "id": held["workflow_id"]},
        )
        conn.execute(
            sa.text("UPDATE pgbus_workflows SET status = 'running' WHERE workflow_id = :id"),
            {"id": held["workflow_id"]},
        )
    app = make_app(database, worker_gone_after=GONE_AFTER)
    client = app.test_client()
    for locale in ("en", "de", "ja"):
        answer = client.get(f"/workers?locale={locale}")
        assert answer.status_code == 200
        assert "<script>alert(1)</script>" not in answer.get_data(as_text=True)
    states = _page_states(client)
    # Future and infinite heartbeats are alive; a row silent an hour or a minute is gone.
    assert states == {ids[0]: "gone", ids[1]: "alive", ids[2]: "alive", ids[3]: "gone"}
    page, banner, flagged = _banner_ids(client)
    # The one holding a run, and the one fallen silent a minute ago holding none.
    assert flagged == [ids[0], ids[3]]
    assert held["workflow_id"] in [link["title"] for link in banner.select(".pgbus-gone-worker-run")]
    assert client.get(f"/workflows?worker={ids[0]}").status_code == 200
    api = client.get("/api/v1/workers")
    assert api.status_code == 200
    assert sorted(item["id"] for item in api.get_json()["workers"]) == ids


@pytest.mark.parametrize("value", ["abc", "0", "-1", str(2**63), "1.5", "٣"])
def test_a_bad_worker_filter_is_refused_with_a_sentence(database, value):
    client = make_app(database).test_client()
    answer = client.get("/workflows", query_string={"worker": value})
    assert answer.status_code == 400
    assert "worker" in text_of(soup(answer).select_one(".pgbus-notice-error") or soup(answer))


def test_the_gone_threshold_must_stay_well_below_the_stalled_one():
    locales = ("en",)
    good = settings_module.check(settings_module.Settings(worker_gone_after=20), locales)
    assert good.worker_gone_after == timedelta(seconds=20)
    # The stall threshold is the policy's now; the setting is held to half its default.
    for gone in (timedelta(minutes=6), timedelta(0), timedelta(seconds=301)):
        with pytest.raises(settings_module.SettingError, match="worker_gone_after"):
            settings_module.check(settings_module.Settings(worker_gone_after=gone), locales)
    # Half of the default stall threshold is the most it may be.
    settings_module.check(settings_module.Settings(worker_gone_after=300), locales)


def test_the_setting_comes_from_the_app_config(database):
    from flask import Flask

    app = Flask("host")
    app.config.update(PGBUS_WEB_WORKER_GONE_AFTER=7, SECRET_KEY="x")
    PgbusWeb(app, database=database, run_operations=False)
    assert app.extensions["pgbus_web"].settings.worker_gone_after == timedelta(seconds=7)


def test_the_queues_show_their_depth_and_oldest_message(engine, database):
    with engine.begin() as conn:
        pgmq_queues.create(conn, "orders")
        pgmq_queues.create(conn, "empty_one")
        pgmq_queues.send_batch(conn, "orders", [json.dumps({"n": n}) for n in range(3)])
        conn.execute(sa.text("UPDATE pgmq.q_orders SET enqueued_at = now() - interval '2 hours' WHERE msg_id = 1"))
        conn.execute(sa.text("UPDATE pgmq.q_orders SET vt = now() + interval '1 hour' WHERE msg_id = 2"))
    page = soup(make_app(database).test_client().get("/workers"))
    rows = {row["data-queue"]: row for row in page.select(".pgbus-queue-row")}
    assert sorted(rows) == ["empty_one", "orders"]
    cells = [text_of(cell) for cell in rows["orders"].select("td")]
    assert cells[1:3] == ["3", "2"] and "2 hours ago" in cells[3]
    assert [text_of(cell) for cell in rows["empty_one"].select("td")][1:] == ["0", "0", "—"]
    with engine.connect() as conn:
        found = {row["queue_name"]: row for row in worker_reads.queue_rows(conn)}
    assert 7190 < found["orders"]["oldest_age_seconds"] < 7300
    assert found["empty_one"]["oldest_age_seconds"] is None


def test_a_serving_process_doing_operations_keeps_a_row(engine, database):
    app = make_app(database, run_operations=True)
    operations = app.extensions["pgbus_web"].operations
    row = _wait_for(lambda: _row_of(engine, os.getpid()), timeout=10)
    assert row is not None and row["kind"] == SERVE and row["stopped_at"] is None
    operations.stop()
    assert _row_of(engine, os.getpid())["stopped_at"] is not None


def test_metrics_give_the_workers_by_state_and_the_queues(engine, database):
    from prometheus_client.parser import text_string_to_metric_families

    with engine.begin() as conn:
        conn.execute(
            sa.text(
                "INSERT INTO pgbus_web_workers (kind, host, pid, heartbeat_at, stopped_at) VALUES"
                " ('worker', 'a', 1, now(), NULL), ('worker', 'b', 2, now(), NULL),"
                " ('worker', 'c', 3, now() - interval '1 minute', NULL),"
                " ('serve', 'd', 4, now() - interval '1 hour', now() - interval '1 hour')"
            )
        )
        pgmq_queues.create(conn, "orders")
        pgmq_queues.create(conn, "idle")
        pgmq_queues.send_batch(conn, "orders", ['{"n": 1}', '{"n": 2}'])
        conn.execute(sa.text("UPDATE pgmq.q_orders SET enqueued_at = now() - interval '10 minutes'"))
    answer = make_app(database, worker_gone_after=GONE_AFTER).test_client().get("/metrics")
    found = {}
    for family in text_string_to_metric_families(answer.get_data(as_text=True)):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    workers = {labels: value for (name, labels), value in found.items() if name == "pgbus_web_workers"}
    assert workers == {
        (("kind", "worker"), ("state", "alive")): 2,
        (("kind", "worker"), ("state", "gone")): 1,
        (("kind", "worker"), ("state", "stopped")): 0,
        (("kind", "serve"), ("state", "alive")): 0,
        (("kind", "serve"), ("state", "gone")): 0,
        (("kind", "serve"), ("state", "stopped")): 1,
    }
    assert found[("pgbus_pgmq_queue_depth", (("queue", "orders"),))] == 2
    assert found[("pgbus_pgmq_queue_depth", (("queue", "idle"),))] == 0
    assert 595 < found[("pgbus_pgmq_oldest_message_age_seconds", (("queue", "orders"),))] < 700
    assert found[("pgbus_pgmq_oldest_message_age_seconds", (("queue", "idle"),))] == 0


def _two_rows(engine):
    with engine.begin() as conn:
        conn.execute(
            sa.text(
                "INSERT INTO pgbus_web_workers (kind, host, pid, heartbeat_at) VALUES"
                " ('worker', 'alive-host', 11, now()), ('worker', 'gone-host', 12, now() - interval '2 minutes')"
            )
        )
        pgmq_queues.create(conn, "orders")


def test_the_command_line_lists_workers_and_queues(engine, database_url):
    from click.testing import CliRunner

    from pgbus_web.launch import main_group

    _two_rows(engine)
    listed = CliRunner().invoke(main_group, ["workers", "--database-url", database_url])
    assert listed.exit_code == 0, listed.output
    lines = listed.output.splitlines()
    assert lines[0].split()[:4] == ["ID", "KIND", "STATE", "HOST"]
    assert lines[1].split()[:4] == ["1", "worker", "alive", "alive-host"]
    assert lines[2].split()[:4] == ["2", "worker", "gone", "gone-host"]
    assert any(line.split()[:3] == ["orders", "0", "0"] for line in lines)
    as_json = CliRunner().invoke(main_group, ["workers", "--json", "--database-url", database_url])
    objects = [json.loads(line) for line in as_json.output.splitlines()]
    assert [item["worker"]["state"] for item in objects if "worker" in item] == ["alive", "gone"]
    assert [item["queue"]["queue_name"] for item in objects if "queue" in item] == ["orders"]
    # A longer threshold: the silent one is alive again.
    longer = CliRunner().invoke(
        main_group, ["workers", "--json", "--gone-after", "250", "--database-url", database_url]
    )
    assert [
        json.loads(line)["worker"]["state"] for line in longer.output.splitlines() if "worker" in json.loads(line)
    ] == ["alive", "alive"]
    refused = CliRunner().invoke(main_group, ["workers", "--gone-after", "400", "--database-url", database_url])
    assert refused.exit_code == 2 and "worker_gone_after" in refused.output


def test_the_mcp_tool_reads_the_same_rows(engine):
    from pgbus_web.core.settings import Settings
    from pgbus_web.mcp.server import READ_TOOLS, Tools

    _two_rows(engine)
    assert "list_workers" in READ_TOOLS
    found = Tools(engine, Settings()).list_workers()
    assert [(row["host"], row["state"]) for row in found["workers"]] == [("alive-host", "alive"), ("gone-host", "gone")]
    assert [row["queue_name"] for row in found["queues"]] == ["orders"]


def test_the_api_lists_queues(engine, database):
    _two_rows(engine)
    client = make_app(database).test_client()
    answer = client.get("/api/v1/queues")
    assert answer.status_code == 200
    assert answer.get_json() == {
        "queues": [
            {"queue_name": "orders", "depth": 0, "visible": 0, "oldest_enqueued_at": None, "oldest_age_seconds": None}
        ]
    }
    workers = client.get("/api/v1/workers").get_json()
    assert workers["gone_after_seconds"] == 30
    assert [row["state"] for row in workers["workers"]] == ["alive", "gone"]


def test_a_poll_draws_the_banner_anew_when_a_worker_falls_silent(database, engine, runs, monkeypatch):
    from support.action_support import ago, operator_app
    from support.web_helpers import step

    from pgbus_web.rules import states
    from pgbus_web.web.answering import not_modified

    still = (time.time() // not_modified.TIME_BUCKET + 0.5) * not_modified.TIME_BUCKET
    monkeypatch.setattr(not_modified, "_now", lambda: still)
    held = runs.make(states.RUNNING, step("charge", "in_progress", started_at=ago(minutes=1)))
    with engine.begin() as conn:
        worker_id = conn.execute(
            sa.text("INSERT INTO pgbus_web_workers (kind, host, pid) VALUES ('worker', 'h', 1) RETURNING id")
        ).scalar()
        conn.execute(
            sa.text("UPDATE pgbus_workflow_steps SET worker_id = :w WHERE workflow_id = :id"),
            {"w": worker_id, "id": held},
        )
    client = operator_app(database, worker_gone_after=GONE_AFTER).test_client()
    headers = {"HX-Request": "true", "HX-Target": "pgbus-workers-banner"}
    first = client.get("/workflows", headers=headers)
    tag = first.headers["ETag"]
    assert soup(first).select(".pgbus-gone-worker") == []
    # Unchanged: 304 (the control).
    assert client.get("/workflows", headers={**headers, "If-None-Match": tag}).status_code == 304
    # The worker falls silent: nothing but its own row is older.
    with engine.begin() as conn:
        conn.execute(sa.text("UPDATE pgbus_web_workers SET heartbeat_at = now() - interval '1 minute'"))
    again = client.get("/workflows", headers={**headers, "If-None-Match": tag})
    assert again.status_code == 200
    assert [int(node["data-worker-id"]) for node in soup(again).select(".pgbus-gone-worker")] == [worker_id]


def test_the_banner_keeps_a_gone_worker_holding_nothing_only_until_the_stalled_threshold(engine, database):
    with engine.begin() as conn:
        ids = (
            conn.execute(
                sa.text(
                    "INSERT INTO pgbus_web_workers (kind, host, pid, heartbeat_at) VALUES"
                    " ('worker', 'lately', 1, now() - interval '1 minute'),"
                    " ('worker', 'long-ago', 2, now() - interval '20 minutes'),"
                    " ('worker', 'long-ago-holding', 3, now() - interval '30 minutes'),"
                    " ('worker', 'alive', 4, now()) RETURNING id"
                )
            )
            .scalars()
            .all()
        )
    held = system.start(engine, demo.REFUND, {"refund_id": 9}, registry=demo.REGISTRY)
    with engine.begin() as conn:
        conn.execute(
            sa.text(
                "UPDATE pgbus_workflow_steps SET status = 'in_progress', started_at = now(),"
                " worker_id = :w WHERE workflow_id = :id"
            ),
            {"w": ids[2], "id": held["workflow_id"]},
        )
    client = make_app(database, worker_gone_after=GONE_AFTER).test_client()
    page, banner, flagged = _banner_ids(client)
    assert flagged == [ids[2], ids[0]]
    lately = banner.select_one(f'.pgbus-gone-worker[data-worker-id="{ids[0]}"]')
    assert lately.select(".pgbus-gone-worker-run") == [] and "held no run" in text_of(lately)
    assert _page_states(client) == {ids[0]: "gone", ids[1]: "gone", ids[2]: "gone", ids[3]: "alive"}
