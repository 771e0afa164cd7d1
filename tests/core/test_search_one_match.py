"""A search that matches exactly one run offers to open it: a link to its
page at the head of the runs, the first thing a Tab reaches after the
search box, also in the filter form's htmx answer; a search with several
matches or none offers nothing of the kind."""

from __future__ import annotations

from support.web_helpers import run_url, soup, step

from pgbus_web.rules import states

RUN_ID = "6ced4f1b-9a3e-4c55-8d1e-0a2b3c4d5e6f"
NEIGHBOUR_ID = "6ced4f1a-0000-4000-8000-000000000000"
FOCUSABLE = "a[href], button, input:not([type=hidden]), select, textarea"


def make(runs):
    runs.make(
        states.PAUSED,
        step("capture_payment", "failed", error_class="Timeout"),
        workflow_id=RUN_ID,
        subject=("Order", "100615"),
    )
    runs.make(states.COMPLETED, workflow_id=NEIGHBOUR_ID, subject=("Order", "200"))


def test_one_match_is_offered_first_after_the_search_box(app, client, runs):
    make(runs)
    for q in (RUN_ID[:8], "Order 100615"):
        page = soup(client.get("/workflows", query_string={"q": q}))
        offer = page.select("#pgbus-runs a.pgbus-only-match")
        assert len(offer) == 1, q
        assert offer[0]["href"] == run_url(app, RUN_ID)
        assert RUN_ID[:8] in offer[0].get_text()
        # Tab order is document order: the search box, its button, then the offer.
        # A hidden element (the new-runs bar until runs wait) takes no focus.
        focusable = [
            node
            for node in page.select(FOCUSABLE)
            if not node.has_attr("hidden") and node.find_parent(attrs={"hidden": True}) is None
        ]
        search = page.select_one("#pgbus-search-q")
        after = focusable[focusable.index(search) + 1 :]
        assert after[0].name == "button" and after[0].find_parent("form", class_="pgbus-search")
        assert after[1] is offer[0], q


def test_several_matches_or_none_offer_no_run(client, runs):
    make(runs)
    for q in ("6ced", "no-such-run"):
        page = soup(client.get("/workflows", query_string={"q": q}))
        assert not page.select(".pgbus-only-match"), q
    # A filter other than the search names no run to open either.
    assert not soup(client.get("/workflows", query_string={"status": "paused"})).select(".pgbus-only-match")


def test_the_filter_forms_answer_includes_the_offer(app, client, runs):
    make(runs)
    response = client.get(
        "/workflows",
        query_string={"q": RUN_ID[:8], "status": "paused"},
        headers={"HX-Request": "true", "HX-Target": "pgbus-runs,pgbus-filter-ranges"},
    )
    assert response.status_code == 200
    offer = soup(response).select("#pgbus-runs a.pgbus-only-match")
    assert [link["href"] for link in offer] == [run_url(app, RUN_ID)]
