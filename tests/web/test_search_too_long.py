"""A search over the box's length is refused, and the box keeps the
operator's text, escaped, with the refusal beside it, so it can be mended:
on the page and on an htmx answer that asks for the box (``HX-Target``
naming ``pgbus-search``, as a requester's ``hx-select-oob`` would)."""

from __future__ import annotations

import pytest
from support.web_helpers import make_app, soup, text_of

from pgbus_web.i18n import tn
from pgbus_web.rules import states
from pgbus_web.rules.run_filters import MAX_TEXT

# Over the limit, with markup that must stay text.
PASTED = '<b>"pasted"</b> & ' + "y" * MAX_TEXT


@pytest.fixture
def client(database):
    return make_app(database).test_client()


def refusal() -> str:
    return tn("pgbus.workflows.search.too_long", len(PASTED), limit=MAX_TEXT)


def test_the_page_keeps_the_text_in_the_box_beside_its_refusal(client, runs):
    runs.make(states.COMPLETED)
    response = client.get("/workflows", query_string={"q": PASTED})
    assert response.status_code == 400
    html = response.get_data(as_text=True)
    assert "<b>" not in html
    box = soup(response).select_one("#pgbus-search-q")
    assert box["value"] == PASTED
    assert box["aria-invalid"] == "true"
    assert "pgbus-search-error" in box["aria-describedby"].split()
    assert text_of(soup(response).select_one("#pgbus-search #pgbus-search-error")) == refusal()
    assert text_of(soup(response).select_one(".pgbus-filter-error")) == refusal()


def test_the_htmx_answer_redraws_the_box_with_the_text(client, runs):
    runs.make(states.COMPLETED)
    response = client.get(
        "/workflows",
        query_string={"q": PASTED},
        headers={"HX-Request": "true", "HX-Target": "pgbus-runs,pgbus-search"},
    )
    assert response.status_code == 400
    page = soup(response)
    assert page.select_one("form#pgbus-search") is not None
    assert page.select_one("#pgbus-search-q")["value"] == PASTED
    assert text_of(page.select_one("#pgbus-search-error")) == refusal()
    assert text_of(page.select_one("#pgbus-runs .pgbus-filter-error")) == refusal()


def test_another_refused_filter_keeps_the_search_and_says_nothing_beside_it(client, runs):
    runs.make(states.COMPLETED)
    response = client.get("/workflows", query_string={"q": "order-17", "status": "nonsense"})
    assert response.status_code == 400
    box = soup(response).select_one("#pgbus-search-q")
    assert box["value"] == "order-17"
    assert not box.has_attr("aria-invalid")
    assert soup(response).select_one("#pgbus-search-error") is None


def test_a_search_within_the_limit_is_no_refusal(client, runs):
    runs.make(states.COMPLETED)
    response = client.get("/workflows", query_string={"q": "y" * MAX_TEXT})
    assert response.status_code == 200
    box = soup(response).select_one("#pgbus-search-q")
    assert box["value"] == "y" * MAX_TEXT
    assert not box.has_attr("aria-invalid")
    assert soup(response).select_one("#pgbus-search-error") is None
