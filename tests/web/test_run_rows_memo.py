"""The runs table's rows are remembered between requests (cells.run_rows):
a row drawn from the memo must be the row drawn afresh, whatever changed
in between: the language, the zone, the clock, the run, the host's
subject links."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa
from support.web_helpers import Runs, every_state, make_app, soup, step

from pgbus_web.core import page_reads
from pgbus_web.rules import states
from pgbus_web.web.drawing import cells

HX = {"HX-Request": "true", "HX-Target": "pgbus-runs"}
# The pages' clock starts at the runs' own moment (they are written at the
# wall clock): a fixed date a week away made their times "in 7 days" in
# views 3 hours apart at some hours of the day, so the control below
# depended on when the suite ran.
T0 = datetime.now(UTC).replace(microsecond=0)


@pytest.fixture
def clock(monkeypatch):
    """The pages' clock, held at .now."""

    class Clock:
        now = T0

    held = Clock()
    monkeypatch.setattr(page_reads, "utcnow", lambda: held.now)
    return held


@pytest.fixture
def made(engine, clock):
    runs = Runs(engine)
    return every_state(runs)


def rows_of(client, locale: str, tz: str) -> str:
    client.set_cookie("pgbus_tz", tz)
    response = client.get(f"/workflows?locale={locale}", headers=HX)
    assert response.status_code == 200
    body = soup(response).select_one("table.pgbus-runs tbody")
    assert body is not None and body.select("tr.pgbus-run-row")
    return str(body)


def drawn_afresh(client, locale: str, tz: str) -> str:
    cells._drawn_rows.clear()
    return rows_of(client, locale, tz)


# (locale, zone, how far the clock moved): each differs from the one
# before in what a remembered row would have to be drawn for.
VIEWS = [
    ("en", "UTC", timedelta(0)),
    ("de", "Europe/Berlin", timedelta(0)),
    ("de", "Europe/Berlin", timedelta(hours=3)),
    ("ja", "America/New_York", timedelta(hours=3)),
    ("ja", "Asia/Tokyo", timedelta(hours=3)),
    ("ja", "America/New_York", timedelta(days=2, minutes=7)),
    ("en", "UTC", timedelta(days=2, minutes=7)),
]


def test_a_remembered_row_is_the_row_drawn_afresh_in_every_view(database, made, clock):
    client = make_app(database).test_client()
    seen = []
    for locale, tz, moved in VIEWS:
        clock.now = T0 + moved
        warm = rows_of(client, locale, tz)  # the memo holds every view before
        assert warm == drawn_afresh(client, locale, tz), (locale, tz, moved)
        seen.append(warm)
    # Control: every view draws differently, so the equality above could fail.
    assert len(set(seen)) == len(VIEWS)


def test_the_memo_is_used(database, made, clock):
    client = make_app(database).test_client()
    first = drawn_afresh(client, "en", "UTC")
    remembered = dict(cells._drawn_rows)
    assert len(remembered) == len(made)
    # Drawn from the memo: a planted row shows, so the page read it.
    key = next(iter(remembered))
    head, tail = remembered[key]
    cells._drawn_rows[key] = (head.replace('data-badge="', 'data-badge="planted-'), tail)
    # Another app: this one's index, read and drawn once, is kept whole
    # (web/answering/page_cache.py), so it would not draw the rows again.
    again = rows_of(make_app(database).test_client(), "en", "UTC")
    assert "planted-" in again and "planted-" not in first


def test_a_changed_run_is_drawn_anew(database, engine, made, clock):
    client = make_app(database).test_client()
    before = rows_of(client, "en", "UTC")
    run = made["running"]
    with engine.begin() as conn:
        conn.execute(
            sa.text("UPDATE pgbus_workflows SET status = 'paused', paused_at = :now WHERE workflow_id = :w"),
            {"w": run, "now": T0},
        )
    after = rows_of(client, "en", "UTC")
    assert after == drawn_afresh(client, "en", "UTC")
    row = soup_row(after, run)
    assert row["data-badge"] == "paused" and soup_row(before, run)["data-badge"] == "running"


def test_infinity_is_not_the_last_moment_python_holds(database, engine, clock):
    """+infinity loads as a datetime equal to Python's last moment: the
    memo tells them apart by type."""
    runs = Runs(engine)
    run = runs.make(states.PAUSED, step("capture_payment", "failed", error_class="E"))
    client = make_app(database).test_client()
    with engine.begin() as conn:
        conn.execute(
            sa.text("UPDATE pgbus_workflows SET created_at = '9999-12-31 23:59:59.999999+00' WHERE workflow_id = :w"),
            {"w": run},
        )
    finite = rows_of(client, "en", "UTC")
    with engine.begin() as conn:
        conn.execute(sa.text("UPDATE pgbus_workflows SET created_at = 'infinity' WHERE workflow_id = :w"), {"w": run})
    infinite = rows_of(client, "en", "UTC")
    assert infinite == drawn_afresh(client, "en", "UTC")
    assert "infinity" in soup_row(infinite, run).get_text() and "infinity" not in soup_row(finite, run).get_text()


def test_the_hosts_subject_links_are_asked_every_time(database, engine, clock):
    runs = Runs(engine)
    run = runs.make(states.RUNNING, step("capture_payment", "in_progress"), subject=("Order", "42"))
    target = {"base": "https://shop.example/a/"}
    app = make_app(database, subject_url=lambda kind, ident: f"{target['base']}{ident}")
    client = app.test_client()
    first = soup_row(rows_of(client, "en", "UTC"), run).select_one("a.pgbus-subject")["href"]
    target["base"] = "https://shop.example/b/"
    second = soup_row(rows_of(client, "en", "UTC"), run).select_one("a.pgbus-subject")["href"]
    assert (first, second) == ("https://shop.example/a/42", "https://shop.example/b/42")


def test_two_mounts_link_their_own_run_pages(database, made, clock):
    from flask import Flask

    from pgbus_web.demo.workflows import REGISTRY
    from pgbus_web.extension import PgbusWeb

    host = Flask("host")
    host.config["SECRET_KEY"] = "host secret"
    PgbusWeb(host, url_prefix="/ops", database=database, registry=REGISTRY, run_operations=False)
    own = rows_of(make_app(database).test_client(), "en", "UTC")
    response = host.test_client().get("/ops/workflows?locale=en", headers=HX)
    mounted = str(soup(response).select_one("table.pgbus-runs tbody"))
    run = made["running"]
    assert soup_row(own, run).select_one("a.pgbus-class")["href"] == f"/workflows/{run}"
    assert soup_row(mounted, run).select_one("a.pgbus-class")["href"] == f"/ops/workflows/{run}"


def soup_row(tbody_html: str, workflow_id: str):
    from bs4 import BeautifulSoup

    row = BeautifulSoup(tbody_html, "html.parser").select_one(f'tr[data-workflow-id="{workflow_id}"]')
    assert row is not None
    return row


def test_a_row_whose_values_cannot_be_a_key_is_drawn_and_not_kept(database, engine, clock):
    from pgbus_web.models import workflow_index

    runs = Runs(engine)
    run = runs.make(states.RUNNING, step("capture_payment", "in_progress"))
    app = make_app(database)
    with engine.connect() as conn:
        rows = workflow_index.page(conn, limit=5, threshold=timedelta(minutes=5), waiting_threshold=timedelta(hours=1))
    odd = dict(rows[0], definition_digest=["a", "list"])  # unhashable
    with app.test_request_context("/workflows"):
        cells._drawn_rows.clear()
        drawn = str(cells.run_rows([odd], T0))
        assert f'data-workflow-id="{run}"' in drawn and not cells._drawn_rows
        # Control: the same row with its own values is kept.
        cells.run_rows(rows[:1], T0)
        assert len(cells._drawn_rows) == 1
