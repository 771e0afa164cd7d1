"""The index's "Act on all N matching runs" entry offers what can be done
to the runs it would act on: nothing when no run matches, and of the verbs
only those that fit at least one matched run's status (verb_table), read
with the count; past the count's cap every verb stays offered."""

from __future__ import annotations

from support.action_support import ALICE, completed, paused_on_capture
from support.web_helpers import soup

from pgbus_web.core import page_reads
from pgbus_web.rules import states, verb_table


def entry(client, **query):
    page = soup(client.get("/workflows", query_string=query, headers={"X-User": ALICE}))
    return page.select_one("form.pgbus-operation-entry")


def offered(client, **query) -> list[str]:
    return [option["value"] for option in entry(client, **query).select("#pgbus-operation-verb option")]


def test_no_matching_run_offers_no_entry(client, runs):
    paused_on_capture(runs)
    assert entry(client, status="paused") is not None
    assert entry(client, status="completed") is None
    assert entry(client, q="no-such-run") is None


def test_one_completed_run_is_offered_rerun_only(client, runs):
    workflow_id = completed(runs)
    paused_on_capture(runs)
    assert offered(client, q=workflow_id) == ["rerun"]
    assert offered(client, status="completed") == ["rerun"]


def test_the_verbs_of_every_matched_status_in_button_order(client, runs):
    paused_on_capture(runs)
    completed(runs)
    runs.make(states.RUNNING)
    assert offered(client, workflow_class="OrderWorkflow") == [
        "resume",
        "resume_at",
        "skip",
        "pause",
        "cancel",
        "signal",
        "rerun",
    ]
    assert offered(client, status="running") == ["pause", "cancel", "signal"]


def test_past_the_cap_every_verb_is_offered(client, runs, monkeypatch):
    # Over the cap the statuses seen are those of the first runs counted.
    monkeypatch.setattr(page_reads, "MATCHING_CAP", 1)
    completed(runs)
    completed(runs)
    assert len(offered(client, status="completed")) == len(verb_table.TABLE)
