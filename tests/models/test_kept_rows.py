"""The needs-attention groups' rows are kept by everything they show
(web/drawing/kept_rows.py): a page drawn again after a change draws
only the rows that changed, and every row reads as a fresh drawing's,
whoever looks and whenever."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa
from support.action_support import paused_on_capture
from support.index_views import block, role_app, without_tokens
from support.web_helpers import soup, step

from pgbus_web.core import page_reads
from pgbus_web.i18n import force_locale, tn
from pgbus_web.plumbing import csrf
from pgbus_web.rules import states
from pgbus_web.web.drawing import kept_rows

T0 = datetime(2026, 11, 30, 12, 0, 0, tzinfo=UTC)


@pytest.fixture
def clock(monkeypatch):
    class Clock:
        now = T0

    held = Clock()
    monkeypatch.setattr(page_reads, "utcnow", lambda: held.now)
    return held


@pytest.fixture
def drawn(monkeypatch):
    """The rows drawn (not shown again), counted."""
    calls = []
    real = kept_rows.kept_row

    def counted(kind, now, moments, *values, caller):
        def drawing():
            calls.append(kind)
            return caller()

        return real(kind, now, moments, *values, caller=drawing)

    # The templates' name is looked up in the module on every request.
    monkeypatch.setattr(kept_rows, "kept_row", counted)
    return calls


def rows(response) -> dict[str, str]:
    return {row["id"]: without_tokens(row) for row in block(response).select("tr.pgbus-attention-group")}


def get(client, locale="en", tz="UTC", role="operator"):
    client.set_cookie("pgbus_tz", tz)
    response = client.get(f"/workflows?locale={locale}", headers={"X-Role": role})
    assert response.status_code == 200
    return response


def two_groups(runs) -> tuple[str, str]:
    """Two paused_error groups: capture_payment's and reserve_stock's
    (another step, another error class); the first group's run id."""
    first = paused_on_capture(runs, paused_at=T0 - timedelta(minutes=7))
    runs.make(
        states.PAUSED,
        step(
            "reserve_stock",
            "failed",
            error_class="StockError",
            error_message="no stock",
            finished_at=T0 - timedelta(minutes=9),
        ),
        paused_at=T0 - timedelta(minutes=9),
    )
    return first, "reserve_stock"


def test_a_change_redraws_only_the_rows_it_changed(database, engine, runs, clock, drawn):
    first, _ = two_groups(runs)
    paused_on_capture(runs, paused_at=T0 - timedelta(minutes=6))
    client = role_app(database).test_client()
    before = rows(get(client))
    assert len(before) == 2 and len(drawn) == 2
    # A write moves the change marker: the page is read and drawn again,
    # and only the row whose group changed is drawn.
    with engine.begin() as conn:
        conn.execute(
            sa.text("UPDATE pgbus_workflows SET status = 'cancelled', finished_at = :at WHERE workflow_id = :id"),
            {"at": T0 - timedelta(seconds=30), "id": first},
        )
    drawn.clear()
    after = rows(get(client))
    assert len(drawn) == 1
    changed = [row_id for row_id in before if before[row_id] != after[row_id]]
    assert len(changed) == 1
    with force_locale("en"):
        assert tn("pgbus.workflows.attention.runs", 1) in after[changed[0]]
    # Exactly what an app that keeps nothing draws.
    assert after == rows(get(role_app(database).test_client()))


def test_rows_follow_the_clock_and_the_viewer(database, runs, clock, drawn):
    two_groups(runs)
    app = role_app(database)
    kinds = [
        ("en", "UTC", "operator"),
        ("en", "UTC", "viewer"),
        ("de", "UTC", "operator"),
        ("en", "Asia/Tokyo", "operator"),
    ]
    shown = {}
    for moment in (T0, T0 + timedelta(seconds=30), T0 + timedelta(minutes=2)):
        clock.now = moment
        for kind in kinds:
            client = app.test_client()
            response = get(client, *kind)
            fresh = get(role_app(database).test_client(), *kind)
            assert rows(response) == rows(fresh), (moment, kind)
            forms = block(response).select("tr.pgbus-attention-group form")
            assert bool(forms) == (kind[2] == "operator")
            # The forms carry this browser's own token.
            body = soup(response).select_one("body")["hx-headers"]
            for form in forms:
                assert form.select_one(f"input[name={csrf.FIELD_NAME}]")["value"] in body
            shown[(moment, kind)] = rows(response)
    # Control: the rows do differ where they should (language, zone or role,
    # and the minutes the clock moved), so the equalities above are not vacuous.
    assert len({tuple(shown[(T0, kind)].values()) for kind in kinds}) == len(kinds)
    assert shown[(T0, kinds[0])] != shown[(T0 + timedelta(minutes=2), kinds[0])]
    # Thirty seconds on, "7 minutes ago" still reads so: those rows were kept.
    assert shown[(T0, kinds[0])] == shown[(T0 + timedelta(seconds=30), kinds[0])]
