"""A needs-attention group's "N runs" link lists exactly that group's runs,
the ones a bulk action on it walks, also when the group has no error class."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

from support.web_helpers import soup, step, text_of

from pgbus_web import defaults
from pgbus_web.models import workflow_attention
from pgbus_web.rules import states

CAPTURE = "capture_payment"


def listed(page) -> list[str]:
    return [row["data-workflow-id"] for row in page.select("#pgbus-runs tr.pgbus-run-row")]


def group_of(row) -> dict:
    """The group an attention row stands for, read from its bulk form."""
    fields = {field["name"]: field.get("value", "") for field in row.select("form input[type=hidden]")}
    return {
        "workflow_class": fields["workflow_class"],
        "step_name": fields["step_name"],
        "reason": fields["reason"],
        "error_class": fields["error_class"] or None,
    }


def make_groups(runs) -> dict[str, list[str]]:
    """Paused runs at the same step, with and without an error class."""
    failed = lambda error: step(CAPTURE, "failed", error_class=error, error_message="no")  # noqa: E731
    return {
        "error_none": [runs.make(states.PAUSED, failed(None)) for _ in range(2)],
        "error_timeout": [runs.make(states.PAUSED, failed("TimeoutError"))],
        "manual_none": [runs.make(states.PAUSED, step(CAPTURE, "completed"))],
        # A paused run whose latest step kept an error class it did not fail with.
        "manual_boom": [runs.make(states.PAUSED, step(CAPTURE, "scheduled", error_class="Boom"))],
    }


def test_every_groups_link_lists_exactly_its_runs(engine, client, runs):
    made = make_groups(runs)
    page = soup(client.get("/workflows"))
    rows = page.select("#pgbus-attention tr.pgbus-attention-group")
    assert len(rows) == 4
    seen = []
    for row in rows:
        group = group_of(row)
        with engine.connect() as conn:
            ids = workflow_attention.attention_ids(
                conn, group, threshold=defaults.STALL_THRESHOLD, waiting_threshold=defaults.WAITING_THRESHOLD
            )
        link = row.select_one(".pgbus-group-link")
        assert text_of(link) == f"{len(ids)} run" + ("s" if len(ids) != 1 else "")
        assert sorted(listed(soup(client.get(link["href"])))) == sorted(ids)
        seen.append(sorted(ids))
    assert sorted(seen) == sorted(sorted(ids) for ids in made.values())


def test_a_group_without_an_error_class_links_to_the_runs_without_one(client, runs):
    made = make_groups(runs)
    page = soup(client.get("/workflows"))
    row = next(
        row
        for row in page.select('#pgbus-attention tr[data-reason="paused_error"]')
        if not group_of(row)["error_class"]
    )
    href = row.select_one(".pgbus-group-link")["href"]
    assert parse_qs(urlsplit(href).query) == {
        "workflow_class": ["OrderWorkflow"],
        "step": [CAPTURE],
        "reason": ["paused_error"],
        "no_error_class": ["1"],
    }
    listing = soup(client.get(href))
    assert sorted(listed(listing)) == sorted(made["error_none"])
    chip = listing.select_one('.pgbus-chip[data-filter="no_error_class"]')
    assert "Error class" in text_of(chip) and "none" in text_of(chip)
    # The filter form keeps it, so refining the list keeps it exact.
    assert listing.select_one('form.pgbus-filters input[name="no_error_class"]')["value"] == "1"
    # Dropping it through its chip lists both error classes of the reason again.
    dropped = chip.select_one("a")["href"]
    assert "no_error_class" not in dropped
    assert sorted(listed(soup(client.get(dropped)))) == sorted(made["error_none"] + made["error_timeout"])


def test_a_group_with_an_error_class_links_to_that_class(client, runs):
    made = make_groups(runs)
    page = soup(client.get("/workflows"))
    row = next(
        row
        for row in page.select('#pgbus-attention tr[data-reason="paused_error"]')
        if group_of(row)["error_class"] == "TimeoutError"
    )
    href = row.select_one(".pgbus-group-link")["href"]
    assert parse_qs(urlsplit(href).query)["error_class"] == ["TimeoutError"]
    assert "no_error_class" not in href
    assert listed(soup(client.get(href))) == made["error_timeout"]


def test_an_error_class_and_none_together_answer_400(client, runs):
    make_groups(runs)
    response = client.get("/workflows?error_class=Boom&no_error_class=1")
    assert response.status_code == 400
    page = soup(response)
    assert "either an error class or the runs without one" in text_of(page.select_one(".pgbus-filter-error"))
    assert listed(page) == []


def test_no_error_class_takes_only_one_value(client, runs):
    make_groups(runs)
    response = client.get("/workflows?no_error_class=yes")
    assert response.status_code == 400
    assert "no_error_class cannot be “yes”" in text_of(soup(response).select_one(".pgbus-filter-error"))
