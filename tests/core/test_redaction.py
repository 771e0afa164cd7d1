"""Secrets no viewer sees (docs/redaction.md): with the policy's rule
``redact: ["card_number"]``, a card number in a run's arguments, a
signal's payload and a step's result reaches no viewer at any door (the
pages, the API, both exports, the command line, MCP), a viewer's search by
it is refused with a sentence and writes nothing, and an admin's Reveal
shows it and leaves an audit line. A control without the rule shows it,
so every "not there" below could fail."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from support.action_support import events_of, operator_app
from support.api_support import Api, token_for
from support.mcp_support import refusal, session
from support.refusals import everything
from support.web_helpers import CARD, _card_run

from pgbus_web.core import policy, redacting
from pgbus_web.i18n import force_locale, t
from pgbus_web.launch import main_group
from pgbus_web.rules import redaction, states

CARD_JSON = f'"{CARD}"'


@pytest.fixture
def seeded(engine, runs):
    """Two runs holding the card number everywhere a value can, under the rule."""
    policy.forget()
    first, second = _card_run(runs, 1), _card_run(runs, 2)
    policy.change(engine, policy.REDACT, ["card_number"], actor="dashboard:root", reason="card numbers are PCI data")
    yield first, second
    policy.forget()


def _unredact(engine) -> None:
    policy.change(engine, policy.REDACT, [], actor="dashboard:root", reason="the control")


def _app(database):
    """The dashboard whose X-Role header names the viewer's role (as a host's role_of would)."""
    return operator_app(database, role_of=lambda request: request.headers.get("X-Role", "viewer"))


def _pages(client, first, second, role="viewer") -> dict[str, str]:
    headers = {"X-User": "vic", "X-Role": role}
    urls = [
        "/workflows",
        f"/workflows/{first}",
        f"/workflows/compare?a={first}&b={second}",
        "/workflows/insights/OrderWorkflow",
        "/workflows/export.csv",
        "/workflows/export.ndjson",
        f"/workflows/{first}?attempts_before=999999",
    ]
    found = {}
    for url in urls:
        response = client.get(url, headers=headers)
        assert response.status_code == 200, (url, response.status_code)
        found[url] = response.get_data(as_text=True)
    # The run page's refreshed blocks, as the live refresh asks for them.
    response = client.get(
        f"/workflows/{first}",
        headers={**headers, "HX-Request": "true", "HX-Target": "pgbus-run-header,pgbus-run-steps,pgbus-run-signals"},
    )
    found["fragments"] = response.get_data(as_text=True)
    return found


def _api(api, first, second) -> dict[str, str]:
    urls = [
        "/runs",
        f"/runs/{first}",
        f"/runs/compare?a={first}&b={second}",
        "/runs/export?format=csv",
        "/runs/export?format=ndjson",
        "/counts",
        "/attention",
        "/operations",
    ]
    found = {}
    for url in urls:
        response = api.get(url)
        assert response.status_code == 200, (url, response.get_data(as_text=True))
        found[url] = response.get_data(as_text=True)
    return found


def _cli(database_url, *args):
    head = 2 if args[0] == "runs" else 1
    return CliRunner().invoke(
        main_group, [*args[:head], "--database-url", database_url, *args[head:]], env={"COLUMNS": "400"}
    )


def _cli_reads(database_url, token, first, second) -> dict[str, str]:
    commands = [
        ("runs", "show", first, "--json"),
        ("runs", "show", first),
        ("runs", "list", "--json"),
        ("runs", "compare", first, second, "--json"),
        ("runs", "export", "--format", "csv"),
        ("runs", "export", "--format", "ndjson"),
    ]
    found = {}
    for command in commands:
        # A comparison is redacted for everyone: it takes no token.
        result = _cli(database_url, *command, *(("--token", token) if command[1] != "compare" else ()))
        assert result.exit_code == 0, (command, result.output)
        found[" ".join(command)] = result.output
    return found


def _mcp_reads(database_url, token, first, second) -> dict[str, str]:
    async def calls(client):
        found = {}
        for name, arguments in (
            ("show_run", {"workflow_id": first}),
            ("find_runs", {}),
            ("compare_runs", {"a": first, "b": second}),
            ("export_runs", {"format": "csv"}),
            ("export_runs", {"format": "ndjson"}),
            ("needs_attention", {}),
        ):
            result = await client.call_tool(name, arguments)
            assert not result.is_error, (name, result.content)
            found[f"{name} {arguments}"] = json.dumps(result.structured_content) + " ".join(
                getattr(part, "text", "") for part in result.content
            )
        return found

    return session(database_url, "--token", token, calls=calls)


def _nowhere(found: dict[str, str]) -> None:
    for where, text in found.items():
        assert CARD not in text, where


def test_a_viewer_finds_the_card_number_at_no_door_and_the_control_shows_it(
    database, database_url, engine, runs, seeded
):
    first, second = seeded
    app = _app(database)
    viewer_token = token_for(engine, "grafana", "viewer")
    api = Api(app.test_client(), viewer_token)

    pages = _pages(app.test_client(), first, second)
    _nowhere(pages)
    # The mark is there instead, where the values were.
    assert redaction.MARK in pages[f"/workflows/{first}"]
    assert redaction.MARK in pages["/workflows/export.csv"] and redaction.MARK in pages["/workflows/export.ndjson"]
    # A viewer is told values are hidden, and offered no Reveal.
    assert "pgbus-redacted-note" in pages[f"/workflows/{first}"]
    assert "pgbus-reveal-form" not in pages[f"/workflows/{first}"]
    answers = _api(api, first, second)
    _nowhere(answers)
    detail = json.loads(answers[f"/runs/{first}"])
    assert detail["redacted"] is True and detail["revealed"] is False
    assert detail["run"]["arguments"]["customer"] == {"name": "Ada", "card_number": redaction.MARK}
    assert detail["signals"][0]["payload"] == {"card_number": redaction.MARK, "note": "new card"}
    results = [attempt["result"] for group in detail["steps"] for attempt in group["attempts"] if attempt["result"]]
    assert results == [
        {"reserved": True, "card_number": redaction.MARK, "payment": {"card_number": redaction.MARK, "last4": "1111"}}
    ]
    _nowhere(_cli_reads(database_url, viewer_token, first, second))
    _nowhere(_mcp_reads(database_url, viewer_token, first, second))
    # Nothing of this wrote an audit line.
    assert redacting.REVEALED not in [event["event"] for event in events_of(engine, first)]

    # The control: the same reads without the rule show the number.
    _unredact(engine)
    pages = _pages(app.test_client(), first, second)
    for url in (f"/workflows/{first}", "/workflows/export.csv", "/workflows/export.ndjson"):
        assert CARD in pages[url], url
    answers = _api(api, first, second)
    for url in (f"/runs/{first}", "/runs/export?format=csv", "/runs/export?format=ndjson"):
        assert CARD in answers[url], url
    assert json.loads(answers[f"/runs/{first}"])["redacted"] is False
    cli = _cli_reads(database_url, viewer_token, first, second)
    assert CARD in cli[f"runs show {first} --json"] and CARD in cli["runs export --format csv"]
    assert CARD in _mcp_reads(database_url, viewer_token, first, second)[f"show_run {{'workflow_id': '{first}'}}"]


def test_compare_reads_two_hidden_values_as_equal(database, engine, runs):
    """Two different card numbers diffed redacted: the comparison cannot
    tell a viewer whether two runs share one; without the rule it can."""
    policy.forget()
    first = runs.make(states.COMPLETED, arguments={"order_id": 1, "card_number": CARD})
    second = runs.make(states.COMPLETED, arguments={"order_id": 2, "card_number": "5500000000000004"})
    policy.change(engine, policy.REDACT, ["card_number"], actor="dashboard:root", reason="pci")
    api = Api(_app(database).test_client(), token_for(engine, "grafana", "viewer"))
    found = api.get(f"/runs/compare?a={first}&b={second}").json_body["arguments"]
    assert [change["path"] for change in found["changes"]] == ["order_id"]
    assert "card_number" in found["equal"]
    _unredact(engine)
    found = api.get(f"/runs/compare?a={first}&b={second}").json_body["arguments"]
    assert sorted(change["path"] for change in found["changes"]) == ["card_number", "order_id"]
    policy.forget()


# --- Reveal ------------------------------------------------------------------------


def _revealed(engine, workflow_id: str) -> list[dict]:
    return [event for event in events_of(engine, workflow_id) if event["event"] == redacting.REVEALED]


def test_an_admins_reveal_shows_the_values_and_leaves_an_audit_line_at_every_door(
    database, database_url, engine, runs, seeded
):
    first, _ = seeded
    app = _app(database)
    admin = {"X-User": "root", "X-Role": "admin"}
    client = app.test_client()
    page = client.get(f"/workflows/{first}", headers=admin).get_data(as_text=True)
    # An admin reads the page redacted too, with the form that reveals.
    assert CARD not in page and "pgbus-reveal-form" in page
    from support.action_support import Browser

    browser = Browser(client, user="root")
    browser.load(f"/workflows/{first}")
    answer = browser.post(
        f"/workflows/{first}/reveal", {"reason": "chargeback 77"}, htmx=True, headers={"X-Role": "admin"}
    )
    assert answer.status_code == 200, answer.get_data(as_text=True)
    body = answer.get_data(as_text=True)
    assert CARD in body and 'id="pgbus-run-revealed"' in body
    # The answer's audit trail has the line, in the trail's words.
    with force_locale("en"):
        assert t("pgbus.workflows.events.revealed") in body
    [line] = _revealed(engine, first)
    assert (line["actor"], line["reason"], line["details"]) == (
        "dashboard:root",
        "chargeback 77",
        {"rules": ["card_number"]},
    )
    # The run page read after it is redacted again, and shows the line.
    after = client.get(f"/workflows/{first}", headers=admin).get_data(as_text=True)
    assert CARD not in after
    # A plain form (no JavaScript) gets the whole page with the panel open.
    plain = browser.post(f"/workflows/{first}/reveal", {}, headers={"X-Role": "admin"})
    assert plain.status_code == 200 and CARD in plain.get_data(as_text=True)
    assert len(_revealed(engine, first)) == 2

    # The API: POST /runs/<id>/reveal with an admin's token.
    admin_token = token_for(engine, "auditor", "admin")
    shown = Api(app.test_client(), admin_token).post(f"/runs/{first}/reveal", {"reason": "dispute"})
    assert shown.status_code == 200
    assert shown.json_body["revealed"] is True and shown.json_body["run"]["arguments"]["card_number"] == CARD
    assert _revealed(engine, first)[-1]["actor"] == "api:auditor"

    # The command line: runs show --reveal, as the token's principal.
    result = _cli(
        database_url, "runs", "show", first, "--reveal", "--reason", "audit", "--token", admin_token, "--json"
    )
    assert result.exit_code == 0, result.output
    assert CARD in result.output
    assert (_revealed(engine, first)[-1]["actor"], _revealed(engine, first)[-1]["reason"]) == ("cli:auditor", "audit")

    # MCP: show_run with reveal.
    async def calls(client):
        return await client.call_tool("show_run", {"workflow_id": first, "reveal": True, "reason": "incident"})

    result = session(database_url, "--token", admin_token, calls=calls)
    assert not result.is_error, result.content
    assert result.structured_content["run"]["arguments"]["card_number"] == CARD
    assert _revealed(engine, first)[-1]["actor"] == "mcp:auditor"
    assert len(_revealed(engine, first)) == 5


def test_a_viewer_cannot_reveal_at_any_door_and_nothing_is_written(database, database_url, engine, runs, seeded):
    first, _ = seeded
    app = _app(database)
    viewer_token = token_for(engine, "grafana", "viewer")
    before = everything(engine)
    # The page: a viewer's POST is refused before the view (403).
    from support.action_support import Browser

    browser = Browser(app.test_client(), user="vic")
    browser.load(f"/workflows/{first}")
    refused = browser.post(f"/workflows/{first}/reveal", {}, htmx=True, headers={"X-Role": "viewer"})
    assert refused.status_code == 403 and CARD not in refused.get_data(as_text=True)
    refused = Api(app.test_client(), viewer_token).post(f"/runs/{first}/reveal")
    assert refused.status_code == 403 and CARD not in refused.get_data(as_text=True)
    result = _cli(database_url, "runs", "show", first, "--reveal", "--token", viewer_token)
    assert result.exit_code == 1 and CARD not in result.output

    async def calls(client):
        return await client.call_tool("show_run", {"workflow_id": first, "reveal": True})

    text = refusal(session(database_url, "--token", viewer_token, calls=calls))
    assert CARD not in text and "grafana" in text
    assert everything(engine) == before


# --- searching by a redacted value ----------------------------------------------------------


def test_a_viewers_search_by_a_redacted_value_is_refused_with_a_sentence_at_every_door(
    database, database_url, engine, runs, seeded
):
    first, _ = seeded
    app = _app(database)
    client = app.test_client()
    viewer_token = token_for(engine, "grafana", "viewer")
    api = Api(app.test_client(), viewer_token)
    with force_locale("en"):
        sentence = t("pgbus.workflows.filters.errors.redacted", name="arg.card_number")
        box_sentence = t("pgbus.workflows.filters.errors.redacted", name="q")
    api.get("/runs")  # the token's first use is written: before the snapshot
    before = everything(engine)
    viewer = {"X-User": "vic", "X-Role": "viewer"}
    for query, said in (
        (f"arg.card_number={CARD}", sentence),
        (f"arg.customer.card_number={CARD}", None),
        (f"signal.card_number={CARD}", None),
        (f"q=card_number:{CARD}", box_sentence),
    ):
        page = client.get(f"/workflows?{query}", headers=viewer)
        assert page.status_code == 400, query
        text = page.get_data(as_text=True)
        assert "pgbus.workflows" not in text
        if said is not None:
            assert said in text, query
        assert client.get(f"/workflows/export.csv?{query}", headers=viewer).status_code == 400
        answer = api.get(f"/runs?{query}")
        assert answer.status_code == 400 and answer.json_body["detail"].startswith("The filter"), query
        assert api.get(f"/runs/export?format=ndjson&{query}").status_code == 400
    result = _cli(database_url, "runs", "list", "--filter", f"arg.card_number={CARD}", "--token", viewer_token)
    assert result.exit_code == 2 and sentence in result.output
    result = _cli(
        database_url,
        "runs",
        "export",
        "--format",
        "csv",
        "--filter",
        f"signal.card_number={CARD}",
        "--token",
        viewer_token,
    )
    assert result.exit_code == 2 and "signal.card_number" in result.output

    async def calls(client):
        return (
            refusal(await client.call_tool("find_runs", {"arguments": {"card_number": CARD}})),
            refusal(await client.call_tool("export_runs", {"format": "csv", "filters": {"signal.card_number": CARD}})),
        )

    found, exported = session(database_url, "--token", viewer_token, calls=calls)
    assert sentence in found and "signal.card_number" in exported
    assert everything(engine) == before
    # Another key of the arguments is searched as before.
    assert [run["workflow_id"] for run in api.get("/runs?arg.order_id=1").json_body["runs"]] == [first]


def test_an_operators_operation_by_a_redacted_value_is_refused_before_its_count(
    database, database_url, engine, runs, seeded
):
    """An operation's preview counts the runs its filter matches: by a
    hidden value, that count would tell the value. An operator without
    the reveal power is refused (403, the policy's sentence) at every door."""
    app = _app(database)
    operator_token = token_for(engine, "deploy-bot", "operator")
    api = Api(app.test_client(), operator_token)
    api.get("/runs")  # the token's first use is written: before the snapshot
    before = everything(engine)
    refused = api.post("/operations", {"verb": "cancel", "filters": {"arg.card_number": CARD}})
    assert refused.status_code == 403 and "deploy-bot" in refused.json_body["detail"]
    assert CARD not in refused.get_data(as_text=True)
    result = _cli(
        database_url,
        "bulk",
        "cancel",
        "--filter",
        f"signal.card_number={CARD}",
        "--reason",
        "r",
        "--dry-run",
        "--token",
        operator_token,
    )
    assert result.exit_code == 1 and "deploy-bot" in result.output, result.output

    async def calls(client):
        return refusal(
            await client.call_tool("preview_operation", {"verb": "cancel", "filters": {"arg.card_number": CARD}})
        )

    assert "deploy-bot" in session(database_url, "--token", operator_token, calls=calls)
    assert everything(engine) == before
    # Another key is previewed as before.
    assert api.post("/operations", {"verb": "cancel", "filters": {"arg.order_id": "1"}}).status_code == 200


def test_who_may_reveal_searches_by_the_value_and_the_control_lets_a_viewer(database, engine, runs, seeded):
    first, second = seeded
    client = _app(database).test_client()
    admin = {"X-User": "root", "X-Role": "admin"}
    page = client.get(f"/workflows?arg.card_number={CARD}", headers=admin)
    assert page.status_code == 200 and first in page.get_data(as_text=True)
    _unredact(engine)
    page = client.get(f"/workflows?arg.card_number={CARD}", headers={"X-User": "vic", "X-Role": "viewer"})
    assert page.status_code == 200 and first in page.get_data(as_text=True) and second in page.get_data(as_text=True)


def test_a_reveal_grant_on_one_class_lets_a_search_of_that_class_only(engine):
    """The search asks the reveal power of the filter's class: a grant on
    one class lets a search within it, not across every class."""
    from pgbus_web.core import permissions
    from pgbus_web.rules import run_filters

    policy.forget()
    policy.change(engine, policy.REDACT, ["card_number", "*.email"], actor="dashboard:root", reason="pii")
    policy.change(
        engine,
        policy.GRANTS,
        [{"to": "user:pam", "role": "admin", "classes": ["PaymentWorkflow"], "verbs": ["reveal"]}],
        actor="dashboard:root",
        reason="payments on-call",
    )
    kept = policy.current(engine)
    pam = permissions.user("pam", "viewer")
    within = run_filters.parse({"workflow_class": "PaymentWorkflow", "arg.card_number": CARD})
    assert redacting.check_search(within, pam, kept) is within
    with pytest.raises(redacting.SearchRefused):
        redacting.check_search(run_filters.parse({"arg.card_number": CARD}), pam, kept)
    # A path a wildcard rule names, an array's item, and the box's form.
    for asked in ({"arg.customer.email": "a@b.c"}, {"signal.lines[].card_number": CARD}, {"q": f"card_number:{CARD}"}):
        with pytest.raises(redacting.SearchRefused):
            redacting.check_search(run_filters.parse(asked), permissions.user("vic", "viewer"), kept)
    # What no rule names is searched.
    for asked in ({"arg.customer.name": "Ada"}, {"arg.a.b.email": "x"}, {"q": "Order 1042"}):
        found = run_filters.parse(asked)
        assert redacting.check_search(found, permissions.user("vic", "viewer"), kept) is found
    policy.forget()


# --- the server's redaction is the core's -------------------------------------------------


VALUES = [
    {"card_number": CARD, "a": {"card_number": [1, 2], "b": {"card_number": None}}},
    {
        "lines": [{"sku": "x", "email": "e"}, {"sku": "y"}],
        "email": "top",
        "customer": {"email": "c", "x": {"email": 1}},
    },
    {"payload": {"token": "t", "other": 1}, "token": "root", "nested": {"payload": {"token": "deep"}}},
    [{"card_number": 1}, "plain", 3, None],
    "a string",
    {},
    {"odd key": {"card_number": "z"}, "ünï": {"email": "u"}},
]
RULES = [
    ["card_number"],
    ["*.email"],
    ["payload.token"],
    ["lines.sku", "customer.*"],
    ["card_number", "*.email", "token"],
]


@pytest.mark.parametrize("texts", RULES)
def test_the_servers_redaction_matches_the_cores(engine, texts):
    import sqlalchemy as sa
    from sqlalchemy.dialects.postgresql import JSONB

    rules = redaction.parse_all(texts)
    statement = sa.text("SELECT pgbus_web_redact(:value, CAST(:rules AS text[]))").bindparams(
        sa.bindparam("value", type_=JSONB)
    )
    with engine.connect() as conn:
        for value in VALUES:
            assert conn.execute(statement, {"value": value, "rules": texts}).scalar_one() == redaction.redact(
                value, rules
            ), value
