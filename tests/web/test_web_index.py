"""The runs index: every state renders with its badge and sentence, the
filters live in the URL, keyset pages, counts per class and status, the
needs-attention groups and their links, bad filters, HTMX fragments."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import pytest
from support.web_helpers import every_state, make_app, soup, step, text_of

from pgbus_web.rules import states
from pgbus_web.rules.run_filters import RANGES


def rows(page):
    return page.select("#pgbus-runs tr.pgbus-run-row")


def listed(page) -> list[str]:
    return [row["data-workflow-id"] for row in rows(page)]


def query_of(href: str) -> dict[str, str]:
    return {name: values[0] for name, values in parse_qs(urlsplit(href).query).items()}


def test_every_state_renders_with_its_badge(client, runs):
    made = every_state(runs)
    page = soup(client.get("/workflows"))
    badges = {row["data-workflow-id"]: row["data-badge"] for row in rows(page)}
    assert badges[made["overdue"]] == "overdue"
    assert badges[made["stalled"]] == "stalled"
    assert badges[made["waiting_overdue"]] == "overdue"
    assert badges[made["paused_error"]] == "paused"
    assert badges[made["completed"]] == "completed"
    assert badges[made["failed"]] == "failed"
    assert badges[made["cancelled"]] == "cancelled"
    assert badges[made["running"]] == "running"
    assert len(badges) == len(made)


def test_a_row_shows_class_subject_step_sentence_and_age(client, runs):
    made = every_state(runs)
    page = soup(client.get("/workflows"))
    row = page.select_one(f'tr[data-workflow-id="{made["waiting_batch"]}"]')
    assert text_of(row.select_one(".pgbus-badge")) == "Waiting"
    assert text_of(row.select_one("a.pgbus-class")) == "OrderWorkflow"
    assert row.select_one("a.pgbus-class")["href"] == f"/workflows/{made['waiting_batch']}"
    assert text_of(row.select_one(".pgbus-subject")).startswith("Order ")
    assert text_of(row.select_one('td[data-label="Step"] code')) == "notify_vendors"
    assert "7 of 12 jobs done" in text_of(row.select_one(".pgbus-next-sentence"))
    assert row.select_one("td:last-child time")["datetime"]


def test_newest_first(client, runs):
    first = runs.make(states.COMPLETED)
    second = runs.make(states.COMPLETED)
    assert listed(soup(client.get("/workflows"))) == [second, first]


def test_subject_link_only_for_a_safe_url(database, runs):
    runs.make(states.COMPLETED, subject=("Order", "1"))
    runs.make(states.COMPLETED, subject=("Order", "2"))
    urls = {"1": "https://shop.example/orders/1", "2": "javascript:alert(1)"}
    app = make_app(database, subject_url=lambda type_, id_: urls[id_])
    page = soup(app.test_client().get("/workflows"))
    links = [a["href"] for a in page.select("#pgbus-runs a.pgbus-subject")]
    assert links == ["https://shop.example/orders/1"]
    assert "Order 2" in [text_of(s) for s in page.select("#pgbus-runs span.pgbus-subject")]


@pytest.mark.parametrize(
    "query, expected",
    [
        ("workflow_class=RefundWorkflow", ["failed"]),
        ("status=cancelled", ["cancelled"]),
        ("reason=stalled", ["stalled"]),
        ("reason=overdue", ["overdue"]),
        ("reason=waiting_overdue", ["waiting_overdue"]),
        ("reason=paused_manual", ["paused_manual"]),
        ("subject=Refund+3", ["failed"]),
        ("subject=User", ["waiting_overdue"]),
        ("step=await_shipment", ["waiting_signal"]),
        ("error_class=TimeoutError", ["paused_error"]),
    ],
)
def test_filters(client, runs, query, expected):
    made = every_state(runs)
    names = {workflow_id: name for name, workflow_id in made.items()}
    response = client.get(f"/workflows?{query}")
    assert response.status_code == 200
    assert [names[workflow_id] for workflow_id in listed(soup(response))] == expected


def test_time_range_filters(client, runs):
    from datetime import timedelta

    from support.web_helpers import utcnow

    now = utcnow()
    old = runs.make(states.COMPLETED, created_at=now - timedelta(days=3))
    recent = runs.make(states.COMPLETED, created_at=now - timedelta(minutes=30))
    assert listed(soup(client.get("/workflows?since=1h"))) == [recent]
    assert listed(soup(client.get("/workflows?since=7d"))) == [recent, old]
    day_before = (now - timedelta(days=1)).strftime("%Y-%m-%dT%H:%M")
    assert listed(soup(client.get(f"/workflows?to={day_before}"))) == [old]
    assert listed(soup(client.get(f"/workflows?from={day_before}"))) == [recent]


def test_filters_are_kept_in_the_form_and_chips(client, runs):
    every_state(runs)
    page = soup(client.get("/workflows?workflow_class=OrderWorkflow&reason=paused_error&step=capture_payment"))
    assert page.select_one("#pgbus-filter-class option[selected]")["value"] == "OrderWorkflow"
    assert page.select_one("#pgbus-filter-reason option[selected]")["value"] == "paused_error"
    assert page.select_one("#pgbus-filter-step")["value"] == "capture_payment"
    chips = {chip["data-filter"]: chip for chip in page.select(".pgbus-chip")}
    assert set(chips) == {"workflow_class", "reason", "step"}
    dropped = query_of(chips["reason"].select_one("a")["href"])
    assert dropped == {"workflow_class": "OrderWorkflow", "step": "capture_payment"}


@pytest.mark.parametrize(
    "query, words",
    [
        ("status=sleeping", "status cannot be “sleeping”"),
        ("reason=bored", "reason cannot be “bored”"),
        ("since=2y", "since cannot be “2y”"),
        ("before=abc", "must be a run number"),
        ("before=5&after=3", "either before or after"),
        ("from=yesterday", "must be a date"),
        ("from=2026-03-02&to=2026-03-01", "must come before its end"),
        ("since=1h&from=2026-03-01", "either a recent period or a from/to range"),
        ("step=" + "x" * 201, "longer than 200 characters"),
    ],
)
def test_bad_filters_answer_400_with_the_reason(client, runs, query, words):
    runs.make(states.COMPLETED)
    response = client.get(f"/workflows?{query}")
    assert response.status_code == 400
    page = soup(response)
    assert words in text_of(page.select_one(".pgbus-filter-error"))
    assert rows(page) == []
    # The rest of the page still renders.
    assert page.select_one("#pgbus-counts .pgbus-class-count") is not None


def test_keyset_pages_older_and_newer(database, runs):
    made = [runs.make(states.COMPLETED) for _ in range(7)]
    newest_first = list(reversed(made))
    client = make_app(database, page_size=3).test_client()

    first = soup(client.get("/workflows"))
    assert listed(first) == newest_first[:3]
    assert first.select_one('a[rel="prev"]') is None
    older = first.select_one('a[rel="next"]')["href"]

    second = soup(client.get(older))
    assert listed(second) == newest_first[3:6]
    third = soup(client.get(second.select_one('a[rel="next"]')["href"]))
    assert listed(third) == newest_first[6:]
    assert third.select_one('a[rel="next"]') is None

    back = soup(client.get(third.select_one('a[rel="prev"]')["href"]))
    assert listed(back) == newest_first[3:6]
    top = soup(client.get(back.select_one('a[rel="prev"]')["href"]))
    assert listed(top) == newest_first[:3]
    assert top.select_one('a[rel="prev"]') is None


def test_pages_keep_the_filters(database, runs):
    for _ in range(3):
        runs.make(states.COMPLETED)
        runs.make(states.CANCELLED)
    client = make_app(database, page_size=2).test_client()
    page = soup(client.get("/workflows?status=completed"))
    older = query_of(page.select_one('a[rel="next"]')["href"])
    assert older["status"] == "completed" and "before" in older


def test_counts_per_class_and_status(client, runs):
    every_state(runs)
    page = soup(client.get("/workflows"))
    order = page.select_one('#pgbus-counts .pgbus-class-count[data-class="OrderWorkflow"]')
    counts = {a["data-status"]: text_of(a.select_one("strong")) for a in order.select("a.pgbus-badge")}
    assert counts == {"ready": "4", "running": "1", "waiting": "2", "paused": "3", "completed": "1", "cancelled": "1"}
    link = order.select_one('a[data-status="paused"]')["href"]
    assert query_of(link) == {"workflow_class": "OrderWorkflow", "status": "paused"}
    assert text_of(page.select_one(".pgbus-page-head p")) == "14 runs in all"


def test_attention_groups_link_to_their_runs(client, runs):
    made = every_state(runs)
    extra = runs.make(
        states.PAUSED,
        step("capture_payment", "failed", error_class="TimeoutError", error_message="newest message"),
        paused_at=None,
    )
    page = soup(client.get("/workflows"))
    groups = page.select("#pgbus-attention tr.pgbus-attention-group")
    assert {group["data-reason"] for group in groups} == set(states.STUCK_REASONS)
    biggest = groups[0]
    assert biggest["data-reason"] == "paused_error"
    assert text_of(biggest.select_one(".pgbus-group-link")) == "2 runs"
    assert "TimeoutError" in text_of(biggest)
    link = biggest.select_one(".pgbus-group-link")["href"]
    assert query_of(link) == {
        "workflow_class": "OrderWorkflow",
        "step": "capture_payment",
        "reason": "paused_error",
        "error_class": "TimeoutError",
    }
    assert sorted(listed(soup(client.get(link)))) == sorted([made["paused_error"], extra])


def test_attention_group_times_and_message(client, runs):
    every_state(runs)
    page = soup(client.get("/workflows"))
    group = page.select_one('#pgbus-attention tr[data-reason="paused_error"]')
    assert len(group.select("time[datetime]")) == 2
    assert text_of(group.select_one(".pgbus-attention-message")) == "payment gateway did not answer within 5s"


def test_htmx_request_for_the_runs_gets_only_that_block(client, runs):
    made = every_state(runs)
    response = client.get("/workflows?reason=stalled", headers={"HX-Request": "true", "HX-Target": "pgbus-runs"})
    assert response.status_code == 200
    page = soup(response)
    assert page.select_one("html") is None and page.select_one("#pgbus-attention") is None
    assert page.select_one("section")["id"] == "pgbus-runs"
    assert listed(page) == [made["stalled"]]
    assert "HX-Request" in response.headers["Vary"]


def test_filter_form_answer_has_the_runs_and_the_range_links_for_its_filters(client, runs):
    made = every_state(runs)
    form = soup(client.get("/workflows")).select_one("form.pgbus-filters")
    # What the form's request names in HX-Target (static/actions.js) and picks out of the answer.
    # The heading's count too: it says how many runs the new filters match.
    assert form["data-pgbus-targets"] == "pgbus-total,pgbus-runs,pgbus-filter-ranges"
    assert form["hx-select"] == "#pgbus-runs" and form["hx-select-oob"] == "#pgbus-filter-ranges,#pgbus-total"
    response = client.get(
        "/workflows?reason=stalled", headers={"HX-Request": "true", "HX-Target": form["data-pgbus-targets"]}
    )
    page = soup(response)
    assert page.select_one("html") is None and page.select_one("#pgbus-counts") is None
    assert listed(page) == [made["stalled"]]
    assert page.select_one("#pgbus-total").get_text(strip=True) == f"1 run of {len(made)} matches the filters"
    links = page.select("#pgbus-filter-ranges a")
    assert len(links) == len(RANGES)
    for link in links:
        query = parse_qs(urlsplit(link["href"]).query)
        assert query["reason"] == ["stalled"] and len(query["since"]) == 1
    # Control: the runs alone (the pager's request) draw no range links.
    alone = soup(client.get("/workflows?reason=stalled", headers={"HX-Request": "true", "HX-Target": "pgbus-runs"}))
    assert alone.select_one("#pgbus-filter-ranges") is None


@pytest.mark.parametrize("target", ["pgbus-counts", "pgbus-attention"])
def test_htmx_fragments_of_counts_and_attention(client, runs, target):
    every_state(runs)
    page = soup(client.get("/workflows", headers={"HX-Request": "true", "HX-Target": target}))
    assert [section["id"] for section in page.select("section")] == [target]


def test_htmx_request_with_an_unknown_target_gets_the_page(client):
    page = soup(client.get("/workflows", headers={"HX-Request": "true", "HX-Target": "elsewhere"}))
    assert page.select_one("html") is not None


def test_boosted_request_gets_the_whole_page(client):
    headers = {"HX-Request": "true", "HX-Boosted": "true", "HX-Target": "pgbus-runs"}
    assert soup(client.get("/workflows", headers=headers)).select_one("html") is not None


def test_filter_form_is_a_get_that_htmx_swaps_into_the_runs(client):
    form = soup(client.get("/workflows")).select_one("form.pgbus-filters")
    assert form["method"] == "get"
    assert form["hx-target"] == "#pgbus-runs" and form["hx-push-url"] == "true"


def test_no_message_key_leaks(client, runs):
    every_state(runs)
    body = client.get("/workflows").get_data(as_text=True)
    assert "pgbus.workflows." not in body and "pgbus.web." not in body


def test_a_fragment_reads_only_its_own_part(app, database, runs):
    import sqlalchemy as sa

    every_state(runs)
    statements = []

    def record(conn, cursor, statement, *args):
        statements.append(statement)

    sa.event.listen(database.primary, "before_cursor_execute", record)
    try:
        app.test_client().get("/workflows", headers={"HX-Request": "true", "HX-Target": "pgbus-runs"})
    finally:
        sa.event.remove(database.primary, "before_cursor_execute", record)
    text = "\n".join(statements)
    assert "pgbus_workflows w" in text  # the page of runs
    assert "GROUP BY workflow_class, status" not in text  # no counts
    assert "array_agg" not in text  # no attention groups


@pytest.mark.parametrize("locale, expected", [("en", "1,234,567"), ("de", "1.234.567")])
def test_counts_are_written_as_the_language_writes_numbers(locale, expected):
    from pgbus_web.i18n import force_locale
    from pgbus_web.web.drawing.template_helpers import number

    with force_locale(locale):
        assert number(1234567) == expected
