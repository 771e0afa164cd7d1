"""One bad input, four doors: the page's form, the API, the command line
and MCP refuse it with the same sentence (core/problems.py's), of the
same kind (an input refusal: HTTP 4xx, exit code 2, a tool error), and
write nothing; the same request with the bad part fixed is accepted, so
no door passes by refusing everything.

Each door acts on its own paused run (found by its id, the ``q`` filter),
so one door's accepted control leaves the next door's run as it was.
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlencode

import pytest
from click.testing import CliRunner
from support.refusals import everything, page_message

from pgbus_web.core.settings import Settings
from pgbus_web.demo import workflows as demo
from pgbus_web.i18n import t
from pgbus_web.launch import main_group
from pgbus_web.mcp.server import Tools
from pgbus_web.rules import run_filters
from pgbus_web.rules.limits import REASON_LIMIT
from pgbus_web.runtime import operation_policy

DOORS = ("page", "api", "cli", "mcp")
DEFINITIONS = ("--definitions", "pgbus_web.demo.workflows")
BIG_ID = 2**63


def _now() -> datetime:
    return datetime.now(UTC)


def _base(workflow_id: str) -> dict[str, Any]:
    return {"verb": "cancel", "filters": {"q": workflow_id}, "reason": "x"}


# name: (the request's bad change, its fix, the doors it applies to).
# A blank filter on a page's query string is no filter (a plain form
# sends one for every field left empty), so that case skips the page.
CASES: dict[str, tuple[Callable[[dict], dict], Callable[[dict], dict], tuple[str, ...]]] = {
    "misspelled_filter": (
        lambda r: {**r, "filters": {**r["filters"], "workflw_class": demo.ORDER}},
        lambda r: {**r, "filters": {**r["filters"], "workflow_class": demo.ORDER}},
        DOORS,
    ),
    "empty_filter": (
        lambda r: {**r, "filters": {**r["filters"], "workflow_class": ""}},
        lambda r: {**r, "filters": {**r["filters"], "workflow_class": demo.ORDER}},
        ("api", "cli", "mcp"),
    ),
    "long_reason": (
        lambda r: {**r, "reason": "r" * (REASON_LIMIT + 1)},
        lambda r: {**r, "reason": "r" * REASON_LIMIT},
        DOORS,
    ),
    "nul_reason": (lambda r: {**r, "reason": "a\x00b"}, lambda r: {**r, "reason": "ab"}, DOORS),
    "far_at": (
        lambda r: {**r, "verb": "resume_at", "at": (_now() + timedelta(days=6 * 365)).isoformat()},
        lambda r: {**r, "verb": "resume_at", "at": (_now() + timedelta(days=365)).isoformat()},
        DOORS,
    ),
    "past_at": (
        lambda r: {**r, "verb": "resume_at", "at": (_now() - timedelta(hours=1)).isoformat()},
        lambda r: {**r, "verb": "resume_at", "at": (_now() + timedelta(hours=1)).isoformat()},
        DOORS,
    ),
    "payload_not_object": (
        lambda r: {**r, "verb": "signal", "name": "poke", "payload": [1, 2]},
        lambda r: {**r, "verb": "signal", "name": "poke", "payload": {"a": 1}},
        DOORS,
    ),
    "long_signal_name": (
        lambda r: {**r, "verb": "signal", "name": "n" * 201, "payload": {}},
        lambda r: {**r, "verb": "signal", "name": "n" * 200, "payload": {}},
        DOORS,
    ),
    # Searches inside JSON that no index could answer (docs/search.md).
    "argument_path_malformed": (
        lambda r: {**r, "filters": {**r["filters"], "arg.vendors..n": "2"}},
        lambda r: {**r, "filters": {**r["filters"], "arg.vendors": "2"}},
        DOORS,
    ),
    "argument_comparison": (
        lambda r: {**r, "filters": {**r["filters"], "arg.vendors": ">1"}},
        lambda r: {**r, "filters": {**r["filters"], "arg.vendors": "2"}},
        DOORS,
    ),
    "signal_path_too_deep": (
        lambda r: {**r, "filters": {**r["filters"], "signal.a.b.c.d.e.f.g": "1"}},
        lambda r: {**r, "filters": {**r["filters"], "arg.fail_capture": "true"}},
        DOORS,
    ),
    "zero_rate": (lambda r: {**r, "rate": 0}, lambda r: {**r, "rate": 50}, DOORS),
    "ceiling_on_cancel": (lambda r: {**r, "max_in_flight": 3}, lambda r: r, DOORS),
}
# The pace's fields, as each door sends them.
PACE = ("rate", "max_in_flight")


# The API's body refuses these before the shared checks read it, in its
# own words: a NUL anywhere in the body (api/body.py) and a payload whose
# JSON type is not an object (the body's schema).
BODY_LEVEL = ("nul_reason", "payload_not_object")


# --- the doors: each answers (refused?, the sentence or "") -------------------


def by_page(browser, request: dict) -> tuple[bool, str]:
    form = {
        "verb": request["verb"],
        "query": urlencode(request["filters"]),
        "reason": request["reason"],
        "confirmed": "1",
        "tz": "UTC",
    }
    if "at" in request:
        form["at"] = request["at"]
    if "name" in request:
        form.update(name=request["name"], payload=json.dumps(request["payload"]))
    form.update({name: str(request[name]) for name in PACE if name in request})
    response = browser.post("/workflows/operations", form)
    if response.status_code < 400:
        return False, ""
    assert 400 <= response.status_code < 500, response.status_code
    return True, page_message(response)


def by_api(api, request: dict) -> tuple[bool, str]:
    body = {"verb": request["verb"], "filters": request["filters"], "reason": request["reason"], "confirmed": True}
    for name in ("at", "name", "payload", *PACE):
        if name in request:
            body[name] = request[name]
    response = api.client.post(
        "/api/v1/operations", data=json.dumps(body), content_type="application/json", headers=api.headers()
    )
    if response.status_code < 400:
        return False, ""
    assert 400 <= response.status_code < 500, response.status_code
    return True, response.get_json()["detail"]


def by_cli(database_url: str, request: dict) -> tuple[bool, str]:
    args = [
        "bulk",
        "--database-url",
        database_url,
        request["verb"],
        "--reason",
        request["reason"],
        "--yes",
        *DEFINITIONS,
    ]
    for name, value in request["filters"].items():
        args += ["--filter", f"{name}={value}"]
    if "at" in request:
        args += ["--at", request["at"]]
    if "name" in request:
        args += ["--name", request["name"], "--payload", json.dumps(request["payload"])]
    for name in PACE:
        if name in request:
            args += [f"--{name.replace('_', '-')}", str(request[name])]
    return _exit(CliRunner().invoke(main_group, args))


def _exit(result) -> tuple[bool, str]:
    if result.exit_code == 0:
        return False, ""
    assert result.exit_code == 2, result.output  # the caller's input, not a traceback (1) or a crash
    return True, result.output


def by_mcp(tools: Tools, request: dict) -> tuple[bool, str]:
    from mcp.server.mcpserver.exceptions import ToolError

    try:
        tools.start_operation(
            request["verb"],
            request["filters"],
            request["reason"],
            1,
            at=request.get("at"),
            signal_name=request.get("name"),
            payload=request.get("payload"),
            rate=request.get("rate"),
            max_in_flight=request.get("max_in_flight"),
        )
    except ToolError as problem:
        return True, str(problem)
    return False, ""


def same(sentence: str) -> str:
    # Digits aside: the far-future sentence names the latest moment, read
    # by each door at its own now.
    return re.sub(r"\d", "#", " ".join(sentence.split()))


@pytest.fixture
def doors(browser, app, engine, database_url):
    from support.api_support import Api, token_for

    api = Api(app.test_client(), token_for(engine, "deploy-bot", "operator"))
    tools = Tools(engine, Settings(registry=demo.REGISTRY))
    return {
        "page": lambda r: by_page(browser, r),
        "api": lambda r: by_api(api, r),
        "cli": lambda r: by_cli(database_url, r),
        "mcp": lambda r: by_mcp(tools, r),
    }


@pytest.mark.parametrize("case", sorted(CASES))
def test_every_door_refuses_the_same_bad_input_with_the_same_sentence(case, doors, driver, engine):
    bad, fixed, applies = CASES[case]
    run_of = {door: driver.paused_on_capture(order_id=100 + number) for number, door in enumerate(applies)}
    before = everything(engine)
    said = {}
    for door in applies:
        refused, sentence = doors[door](bad(_base(run_of[door])))
        assert refused, (case, door)
        said[door] = sentence
    assert everything(engine) == before, case
    reference = same(said["mcp"])
    assert reference, case
    for door, sentence in said.items():
        if door == "api" and case in BODY_LEVEL:
            continue  # refused, by the body's own sentence (same status class, checked above)
        assert reference in same(sentence), (case, door, sentence, said["mcp"])
    # The control: the bad part fixed, every door takes it.
    for door in applies:
        refused, sentence = doors[door](fixed(_base(run_of[door])))
        assert not refused, (case, door, sentence)
    assert everything(engine) != before


def test_an_operation_id_past_bigint_is_no_operation_at_every_door_that_takes_one(browser, app, engine, driver):
    from mcp.server.mcpserver.exceptions import ToolError
    from support.api_support import Api, token_for

    api = Api(app.test_client(), token_for(engine, "bot", "operator"))
    tools = Tools(engine, Settings(registry=demo.REGISTRY))
    before = everything(engine)
    page = browser.post(f"/workflows/operations/{BIG_ID}/cancel", {})
    answer = api.client.post(f"/api/v1/operations/{BIG_ID}/cancel", headers=api.headers())
    with pytest.raises(ToolError) as refused:
        tools.cancel_operation(BIG_ID, "x")
    assert page.status_code == answer.status_code == 404
    sentence = answer.get_json()["detail"]
    assert sentence in page_message(page) and sentence in str(refused.value)
    assert everything(engine) == before
    # The control: an id that names an operation is read at the same doors.
    workflow_id = driver.paused_on_capture(order_id=300)
    created = operation_policy.create(
        engine,
        run_filters.parse({"q": workflow_id}),
        "cancel",
        None,
        reason="r",
        actor="test",
        expected=1,
        thresholds={"threshold": timedelta(minutes=5), "waiting_threshold": timedelta(hours=1)},
    )
    assert api.client.get(f"/api/v1/operations/{created['id']}", headers=api.headers()).status_code == 200
    assert tools.show_operation(created["id"])["operation"]["id"] == created["id"]


def test_prune_refuses_a_period_too_long_with_exit_2_and_takes_a_long_one(database_url, engine):
    before = everything(engine)
    refused = CliRunner().invoke(
        main_group, ["prune", "--database-url", database_url, "--older-than", "9999999w", "--dry-run"]
    )
    assert refused.exit_code == 2, refused.output
    assert "at most 36500 days" in refused.output and "Traceback" not in refused.output
    accepted = CliRunner().invoke(
        main_group, ["prune", "--database-url", database_url, "--older-than", "36500d", "--dry-run"]
    )
    assert accepted.exit_code == 0, accepted.output
    assert everything(engine) == before


class _AnswersYesAfter(io.RawIOBase):
    """A terminal's input that answers the command line's "cancel N runs?"
    with yes, after *change* (another writer) has run: the count changes
    between the command's preview and its start."""

    def __init__(self, change: Callable[[], None]) -> None:
        super().__init__()
        self.change = change
        self.left = b"y\n"

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        if not buffer:
            return 0
        if self.change is not None:
            self.change()
            self.change = None
        size = min(len(buffer), len(self.left))
        buffer[:size], self.left = self.left[:size], self.left[size:]
        return size


def test_a_count_that_changed_is_refused_with_the_same_sentence_at_every_door(
    browser, app, engine, driver, database_url
):
    from mcp.server.mcpserver.exceptions import ToolError
    from support.api_support import Api, token_for

    api = Api(app.test_client(), token_for(engine, "deploy-bot", "operator"))
    filters = {"workflow_class": demo.ORDER, "reason": "paused_error"}
    driver.paused_on_capture(order_id=400)
    driver.paused_on_capture(order_id=401)
    # The command line previews 2 runs; a third is paused before it starts.
    snapshot = {}

    def third():
        driver.paused_on_capture(order_id=402)
        snapshot["before"] = everything(engine)

    args = ["bulk", "--database-url", database_url, "cancel", "--reason", "x", *DEFINITIONS]
    for name, value in filters.items():
        args += ["--filter", f"{name}={value}"]
    cli = CliRunner().invoke(main_group, args, input=_AnswersYesAfter(third))
    assert cli.exit_code == 1, cli.output  # a refusal of the state, not of the input
    before = snapshot["before"]
    # The other doors are sent the count the command line was shown.
    page = browser.post(
        "/workflows/operations",
        {"verb": "cancel", "query": urlencode(filters), "reason": "x", "confirmed": "1", "tz": "UTC", "expected": "2"},
    )
    answer = api.client.post(
        "/api/v1/operations",
        content_type="application/json",
        headers=api.headers(),
        data=json.dumps({"verb": "cancel", "filters": filters, "reason": "x", "confirmed": True, "expected": 2}),
    )
    with pytest.raises(ToolError) as mcp:
        Tools(engine, Settings(registry=demo.REGISTRY)).start_operation("cancel", filters, "x", 2)
    assert page.status_code == answer.status_code == 409
    sentence = t("pgbus.operations.errors.count_changed", expected=2, total=3)
    assert answer.get_json()["detail"] == sentence
    assert sentence in page_message(page)
    assert f"Error: {sentence}" in cli.output
    assert str(mcp.value) == sentence
    assert everything(engine) == before
    # The control: the count each door is shown now is taken.
    taken = api.client.post(
        "/api/v1/operations",
        content_type="application/json",
        headers=api.headers(),
        data=json.dumps({"verb": "cancel", "filters": filters, "reason": "x", "confirmed": True, "expected": 3}),
    )
    assert taken.status_code == 201, taken.get_json()
