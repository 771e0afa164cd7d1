"""A run's page is read once per change marker and bucket_clock bucket and drawn
once per kind of viewer (web/answering/page_cache.remember_run), as the
index is: the operator who changes the run sees the change on the next
page, and no viewer is shown a drawing made for another role, language
or zone."""

from __future__ import annotations

from support.action_support import Browser, running
from support.run_views import OPERATOR, badge, page, role_app
from support.web_helpers import soup

from pgbus_web.plumbing import csrf

VIEWER = "victor"


def header(response) -> str:
    """The run header's HTML, the CSRF tokens blanked (each browser has its own)."""
    found = soup(response).select_one("#pgbus-run-header")
    assert found is not None
    for field in found.select(f"input[name={csrf.FIELD_NAME}]"):
        field["value"] = ""
    return str(found)


def test_the_operators_change_shows_at_once(database, runs, bucket_clock, sent_statements):
    workflow_id = running(runs)
    alice = Browser(role_app(database).test_client(), OPERATOR)
    before = page(alice, workflow_id)
    sent_statements.clear()
    again = page(alice, workflow_id)
    # Kept: the second page read only the change marker (the control that
    # the page below is not fresh merely because nothing is kept).
    assert len(sent_statements) == 1, sent_statements
    assert header(again) == header(before)

    # The bucket_clock does not move: the cancel's commit moves the marker.
    response = alice.post(f"/workflows/{workflow_id}/cancel", {"reason": "duplicate order"})
    assert response.status_code == 303
    after = page(alice, workflow_id)
    assert badge(after) != badge(before)
    assert "duplicate order" in soup(after).select_one("#pgbus-run-audit").get_text()
    # What a new app, which keeps nothing, draws at the same moment.
    fresh = page(Browser(role_app(database).test_client(), OPERATOR), workflow_id)
    assert header(after) == header(fresh)
    assert str(soup(after).select_one("#pgbus-run-audit")) == str(soup(fresh).select_one("#pgbus-run-audit"))


def test_each_kind_of_viewer_gets_its_own_drawing(database, runs, bucket_clock, sent_statements):
    workflow_id = running(runs)
    app = role_app(database)
    kinds = [
        (OPERATOR, "en", "UTC"),
        (VIEWER, "en", "UTC"),
        (OPERATOR, "de", "UTC"),
        (VIEWER, "de", "Asia/Tokyo"),
        (OPERATOR, "en", "Asia/Tokyo"),
    ]
    browsers = {kind: Browser(app.test_client(), kind[0]) for kind in kinds}
    for _ in range(2):  # the second round from what was kept
        for kind, browser in browsers.items():
            shown = page(browser, workflow_id, kind[1], kind[2])
            fresh = page(Browser(role_app(database).test_client(), kind[0]), workflow_id, kind[1], kind[2])
            assert header(shown) == header(fresh), kind
            forms = soup(shown).select("#pgbus-run-actions form[data-verb]")
            assert bool(forms) == (kind[0] == OPERATOR), kind
            # Every form carries this browser's own token.
            for field in soup(shown).select(f"input[name={csrf.FIELD_NAME}]"):
                assert field["value"] == browser.token, kind
    # The control: the same kind of viewer in another browser is shown the
    # kept drawing (one statement, the marker), with its own token.
    other = Browser(app.test_client(), OPERATOR)
    other.load("/workflows")  # its own CSRF cookie and token
    sent_statements.clear()
    shown = page(other, workflow_id)
    assert len(sent_statements) == 1, sent_statements
    assert other.token and other.token != browsers[(OPERATOR, "en", "UTC")].token
    assert {field["value"] for field in soup(shown).select(f"input[name={csrf.FIELD_NAME}]")} == {other.token}
