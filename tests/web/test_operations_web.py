"""The operations' pages (docs/operations.md): the preview (a page without
JavaScript, the dialog with htmx), starting one with a reason, a count that
changed meanwhile, every refusal with the tables exactly as before, its
progress page, cancel, the recent list, the index's entry and the audit
trail's link to the operation."""

from __future__ import annotations

from urllib.parse import urlencode

import pytest
from support.action_support import paused_on_capture, ready_later
from support.operation_support import PAUSED, THRESHOLDS, URL, ask, operations_of
from support.refusals import everything
from support.web_helpers import soup, text_of

from pgbus_web.core import policy
from pgbus_web.demo.workflows import REGISTRY
from pgbus_web.rules import run_filters
from pgbus_web.runtime import operation_policy, operation_preview, operation_record, operation_runner


def finish(engine):
    runner = operation_runner.Runner(engine, REGISTRY)
    while runner.step() is not None:
        pass


def test_the_preview_without_javascript_is_a_page_that_writes_nothing(browser, runs, engine):
    paused = [paused_on_capture(runs) for _ in range(3)]
    ready_later(runs)
    before = everything(engine)
    response = ask(browser)
    assert response.status_code == 200
    page = soup(response)
    dialog = page.select_one("dialog#pgbus-operation-dialog")
    assert page.select_one("html") is not None and dialog is not None
    assert dialog["data-total"] == "3"
    assert text_of(dialog.select_one(".pgbus-operation-count")) == "3 runs match"
    assert dialog.select_one(".pgbus-operation-fits")["data-fits"] == "3"
    assert {li["data-workflow-id"] for li in dialog.select(".pgbus-operation-sample li")} == set(paused)
    form = dialog.select_one("form.pgbus-operation-form")
    fields = {field["name"]: field.get("value", "") for field in form.select("input")}
    assert fields["expected"] == "3" and fields["confirmed"] == "1" and fields["query"] == PAUSED
    assert form.select_one("input[name=reason]").has_attr("required")
    assert everything(engine) == before


def test_with_htmx_the_preview_is_the_dialog_alone(browser, runs, engine):
    paused_on_capture(runs)
    response = browser.post(URL, {"verb": "cancel", "query": PAUSED}, htmx=True)
    assert response.status_code == 200
    assert "<html" not in response.get_data(as_text=True)
    assert soup(response).select_one("dialog#pgbus-operation-dialog[open]") is not None


def test_the_preview_says_which_runs_the_verb_skips_and_why(browser, runs, engine):
    paused_on_capture(runs)
    ready_later(runs)
    response = ask(browser, verb="pause", query=urlencode({"workflow_class": "OrderWorkflow"}))
    dialog = soup(response).select_one("dialog")
    assert dialog["data-total"] == "2"
    assert dialog.select_one(".pgbus-operation-fits")["data-fits"] == "1"
    skips = [text_of(li) for li in dialog.select(".pgbus-operation-skips li")]
    assert skips == ["1 run: status Paused: the verb does not apply"]


@pytest.mark.parametrize("htmx", [False, True])
def test_confirming_creates_the_operation_and_leads_to_its_page(browser, runs, engine, htmx):
    paused = [paused_on_capture(runs) for _ in range(2)]
    response = browser.post(
        URL, {"verb": "resume", "query": PAUSED, "expected": "2", "confirmed": "1", "reason": "gateway back"}, htmx=htmx
    )
    [operation] = operations_of(engine)
    location = f"/workflows/operations/{operation['id']}"
    if htmx:
        assert response.status_code == 200 and response.headers["HX-Redirect"] == location
    else:
        assert response.status_code == 303 and response.headers["Location"].endswith(location)
    assert operation["reason"] == "gateway back" and operation["actor"] == "dashboard:alice"
    assert operation["filters"] == {"status": "paused"} and operation["total"] == 2
    finish(engine)
    page = soup(browser.client.get(location))
    section = page.select_one("#pgbus-operation")
    # Done, and still live: the runs it resumed are ready again, still moving.
    assert section["data-status"] == "done" and section["hx-trigger"] == "every 2s"
    assert not section.select("form.pgbus-operation-cancel")
    assert text_of(section.select_one(".pgbus-operation-moved")) == "2"
    assert text_of(section.select_one(".pgbus-operation-reason")) == "gateway back"
    assert section.select_one(".pgbus-operation-runs")["href"] == f"/workflows?operation={operation['id']}"
    touched = soup(browser.client.get(f"/workflows?operation={operation['id']}"))
    assert {row["data-workflow-id"] for row in touched.select("tr.pgbus-run-row")} == set(paused)
    # The run page's audit sentence links to the operation.
    run_page = soup(browser.client.get(f"/workflows/{paused[0]}"))
    links = [link["href"] for link in run_page.select("#pgbus-run-audit a.pgbus-event-operation")]
    assert links == [location]


def test_a_running_operation_polls_itself_and_can_be_cancelled(browser, runs, engine):
    paused_on_capture(runs)
    created = operation_policy.create(
        engine,
        operation_record.filters_of({"filters": {"status": "paused"}}),
        "resume",
        None,
        reason="r",
        actor="a",
        expected=1,
        registry=REGISTRY,
        thresholds=policy.current(engine).thresholds(),
    )
    url = f"{URL}/{created['id']}"
    section = soup(browser.load(url)).select_one("#pgbus-operation")
    assert section["hx-trigger"] == "every 2s" and section["data-status"] == "queued"
    fragment = browser.client.get(url, headers={"HX-Request": "true", "HX-Target": "pgbus-operation"})
    assert "<html" not in fragment.get_data(as_text=True) and 'id="pgbus-operation"' in fragment.get_data(as_text=True)
    response = browser.post(f"{url}/cancel", htmx=True)
    assert response.status_code == 200
    assert operations_of(engine)[0]["status"] == "cancelled"
    before = everything(engine)
    again = browser.post(f"{url}/cancel", htmx=True)
    assert again.status_code == 409 and "cancelled" in text_of(soup(again).select_one("#pgbus-messages"))
    assert everything(engine) == before
    listing = soup(browser.client.get(URL))
    assert [row["data-operation-id"] for row in listing.select("tr.pgbus-operation-row")] == [str(created["id"])]


def test_a_count_that_changed_answers_the_fresh_preview(browser, runs, engine):
    paused_on_capture(runs)
    paused_on_capture(runs)
    before = everything(engine)
    for htmx in (False, True):
        response = browser.post(
            URL, {"verb": "resume", "query": PAUSED, "expected": "1", "confirmed": "1", "reason": "x"}, htmx=htmx
        )
        assert response.status_code == 409
        dialog = soup(response).select_one("dialog")
        assert dialog["data-total"] == "2"
        assert dialog.select_one("input[name=expected]")["value"] == "2"
        assert dialog.select_one("input[name=reason]")["value"] == "x"
    assert everything(engine) == before


@pytest.mark.parametrize(
    "fields, status",
    [
        ({"verb": "explode"}, 422),
        ({"query": "status=sleeping"}, 400),
        ({"verb": "rerun"}, 422),  # fits none of the paused runs
        ({"reason": ""}, 422),
        ({"reason": "   "}, 422),
        ({"verb": "resume_at", "at": "2001-01-01T10:00"}, 422),
        ({"verb": "signal", "name": "go", "payload": "[1"}, 422),
        ({"verb": "signal", "name": "", "payload": "{}"}, 422),
        ({"expected": "many"}, 422),
    ],
)
@pytest.mark.parametrize("htmx", [False, True])
def test_bad_input_gets_a_clear_answer_and_writes_nothing(browser, runs, engine, fields, status, htmx):
    paused_on_capture(runs)
    before = everything(engine)
    form = {"verb": "resume", "query": PAUSED, "expected": "1", "confirmed": "1", "reason": "why", **fields}
    response = browser.post(URL, form, htmx=htmx)
    assert response.status_code == status
    body = soup(response)
    said = text_of(body.select_one("#pgbus-messages")) or text_of(body.select_one("main"))
    assert len(said) > 10
    assert everything(engine) == before
    # Control: the same form, corrected, is accepted.
    good = browser.post(
        URL, {"verb": "resume", "query": PAUSED, "expected": "1", "confirmed": "1", "reason": "why"}, htmx=htmx
    )
    assert good.status_code in (200, 303) and len(operations_of(engine)) == 1


def test_a_viewer_cannot_post(database, runs, engine):
    from support.action_support import Browser, operator_app

    paused_on_capture(runs)
    app = operator_app(database, can_act=lambda request: False)
    browser = Browser(app.test_client())
    before = everything(engine)
    response = browser.post(
        URL, {"verb": "resume", "query": PAUSED, "expected": "1", "confirmed": "1", "reason": "why"}
    )
    assert response.status_code == 403
    assert everything(engine) == before


def test_an_unknown_operation_is_404(browser):
    assert browser.client.get(f"{URL}/999").status_code == 404
    assert browser.client.get(f"{URL}/{2**70}").status_code == 404
    assert browser.post(f"{URL}/999/cancel").status_code == 404


def test_the_index_offers_the_entry_only_with_a_filter(browser, runs):
    paused_on_capture(runs)
    assert soup(browser.load("/workflows")).select_one("form.pgbus-operation-entry") is None
    entry = soup(browser.load("/workflows?status=paused")).select_one("form.pgbus-operation-entry")
    assert entry is not None and entry.select_one("input[name=query]")["value"] == PAUSED
    assert "resume" in [option["value"] for option in entry.select("option")]


def test_the_entry_says_how_many_runs_the_preview_would_count(browser, runs, engine, database, monkeypatch):
    from support.action_support import Browser, operator_app

    from pgbus_web.core import page_reads

    for _ in range(3):
        paused_on_capture(runs)
    ready_later(runs)
    label = text_of(soup(browser.load("/workflows?status=paused")).select_one(".pgbus-operation-entry label"))
    shown = operation_preview.preview(
        engine, run_filters.parse({"status": "paused"}), "resume", registry=REGISTRY, thresholds=THRESHOLDS
    )
    assert shown.total == 3 and label == "Act on all 3 matching runs"
    # The live refresh of the runs block (htmx) says it too, and one run is one run.
    fragment = browser.client.get("/workflows?status=ready", headers={"HX-Request": "true", "HX-Target": "pgbus-runs"})
    assert text_of(soup(fragment).select_one(".pgbus-operation-entry label")) == "Act on 1 matching run"
    # Past the cap the count stops: it says "more than" (a fresh app: the
    # first shows its kept read again while the change marker stands).
    monkeypatch.setattr(page_reads, "MATCHING_CAP", 2)
    fresh = Browser(operator_app(database).test_client())
    label = text_of(soup(fresh.load("/workflows?status=paused")).select_one(".pgbus-operation-entry label"))
    assert label == "Act on more than 2 matching runs"


def test_the_navigation_leads_to_the_operations_list(browser, runs):
    for url in ("/workflows", "/workflows/operations"):
        page = soup(browser.load(url))
        links = page.select(".pgbus-nav a[href$='/workflows/operations']")
        assert [text_of(a) for a in links] == ["Operations"]
        assert (links[0].get("aria-current") == "page") == (url == "/workflows/operations")
    # Control: the Workflows entry is not the current one on the operations list.
    workflows_link = soup(browser.load("/workflows/operations")).select_one(".pgbus-nav a[href$='/workflows']")
    assert workflows_link is not None and workflows_link.get("aria-current") is None
