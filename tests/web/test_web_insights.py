"""Per-class insights: runs by status over the chosen range, stuck runs
now, step durations (median and 95th percentile), the range choice, an
unknown class and a bad range."""

from __future__ import annotations

from datetime import timedelta

import pytest
from support.web_helpers import every_state, soup, step, text_of, utcnow

from pgbus_web.rules import states


def stats(page, selector, attribute):
    return {
        link[attribute]: int(text_of(link.select_one(".pgbus-stat-value")))
        for link in page.select(f"{selector} a.pgbus-stat")
    }


def test_counts_by_status_and_stuck_reasons(client, runs):
    every_state(runs)
    runs.make(states.COMPLETED, created_at=utcnow() - timedelta(days=20))
    page = soup(client.get("/workflows/insights/OrderWorkflow"))
    assert text_of(page.select_one("h1")) == "OrderWorkflow insights"
    by_status = stats(page, ".pgbus-insights-status", "data-status")
    # The default range is 7 days: the 20-day-old run is outside it.
    assert by_status == {
        "ready": 4,
        "running": 1,
        "waiting": 2,
        "paused": 3,
        "completed": 1,
        "failed": 0,
        "cancelled": 1,
    }
    stuck = stats(page, ".pgbus-stuck-counts", "data-reason")
    assert stuck == {"stalled": 1, "paused_error": 1, "paused_manual": 1, "overdue": 1, "waiting_overdue": 0}
    month = soup(client.get("/workflows/insights/OrderWorkflow?since=30d"))
    assert stats(month, ".pgbus-insights-status", "data-status")["completed"] == 2


def test_counts_link_to_the_filtered_index(client, runs):
    every_state(runs)
    page = soup(client.get("/workflows/insights/OrderWorkflow?since=24h"))
    link = page.select_one('.pgbus-insights-status a[data-status="paused"]')["href"]
    assert "workflow_class=OrderWorkflow" in link and "status=paused" in link and "since=24h" in link
    assert page.select_one('.pgbus-segmented a[aria-current="true"]')["href"].endswith("since=24h")


def test_step_durations_median_and_p95(client, runs):
    now = utcnow()
    for seconds in (10, 20, 30, 40, 100):
        started = now - timedelta(hours=2)
        runs.make(
            states.COMPLETED,
            step(
                "reserve_stock",
                "completed",
                started_at=started - timedelta(seconds=2),
                finished_at=started - timedelta(seconds=1),
            ),
            step("capture_payment", "completed", started_at=started, finished_at=started + timedelta(seconds=seconds)),
        )
    page = soup(client.get("/workflows/insights/OrderWorkflow"))
    rows = {row["data-step"]: row for row in page.select("table.pgbus-durations tbody tr")}
    # In the definition's order.
    assert list(rows) == ["reserve_stock", "capture_payment"]
    capture = rows["capture_payment"]
    assert text_of(capture.select_one(".pgbus-median")) == "30s"
    assert text_of(capture.select_one(".pgbus-p95")) == "1m 28s"
    assert text_of(rows["reserve_stock"].select_one(".pgbus-median")) == "1s"


def test_no_durations_yet(client, runs):
    runs.make(states.READY, step("reserve_stock", "scheduled"))
    page = soup(client.get("/workflows/insights/OrderWorkflow"))
    assert page.select_one("table.pgbus-durations") is None
    assert "No attempt finished" in text_of(page)


def test_registered_class_without_runs_renders(client):
    response = client.get("/workflows/insights/RefundWorkflow")
    assert response.status_code == 200
    assert stats(soup(response), ".pgbus-insights-status", "data-status")["completed"] == 0


def test_unknown_class_is_a_404(client):
    response = client.get("/workflows/insights/NoSuchWorkflow")
    assert response.status_code == 404
    page = soup(response)
    assert text_of(page.select_one("h1")) == "Unknown workflow"
    assert "NoSuchWorkflow" in text_of(page.select_one(".pgbus-error-message"))


@pytest.mark.parametrize("since", ["2y", "", "1h; DROP TABLE"])
def test_bad_range_is_a_400(client, since):
    if since == "":
        assert client.get("/workflows/insights/OrderWorkflow?since=").status_code == 200
        return
    response = client.get(f"/workflows/insights/OrderWorkflow?since={since}")
    assert response.status_code == 400
    assert "1h, 24h, 7d, 30d" in text_of(soup(response).select_one(".pgbus-error-message"))


def test_htmx_fragment(client, runs):
    every_state(runs)
    page = soup(
        client.get("/workflows/insights/OrderWorkflow", headers={"HX-Request": "true", "HX-Target": "pgbus-insights"})
    )
    assert page.select_one("html") is None
    assert page.select_one("#pgbus-insights .pgbus-insights-status") is not None


def test_the_tables_moments_are_in_the_viewers_language_and_zone(client, runs):
    """The hourly rows are written as the viewer's locale writes a moment,
    in the viewer's zone (they were English and UTC on every page).
    Control: English writes the same rows otherwise."""
    from zoneinfo import ZoneInfo

    from pgbus_web import i18n
    from pgbus_web.core.words import timefmt

    every_state(runs)

    def hour_rows(locale):
        page = soup(client.get("/workflows/insights/OrderWorkflow", query_string={"locale": locale}))
        rows = page.select(".pgbus-activity-table th[scope=row]")
        return [text_of(row) for row in rows]

    client.set_cookie(i18n.TIMEZONE_COOKIE, "Asia/Tokyo")
    japanese, english = hour_rows("ja"), hour_rows("en")
    assert japanese and len(japanese) == len(english)
    assert all("月" in label and "AM" not in label and "PM" not in label for label in japanese)
    assert japanese != english
    # The newest hour, 14:00-ish in Tokyo when it is 05:00 in UTC: the zone's clock.
    newest = utcnow().replace(minute=0, second=0, microsecond=0)
    assert timefmt.short_date_time(newest, locale="ja", tz=ZoneInfo("Asia/Tokyo")) in japanese
