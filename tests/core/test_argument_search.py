"""Searching inside a run's arguments and its signals' payloads
(``arg.<path>=<value>``, ``signal.<path>=<value>``, the search box's
``path:value``; docs/search.md): what each form finds and what it does
not, typed values, nested paths and arrays, the same filter at the
operations, and the plan answering from the GIN indexes of the schema
version that adds them."""

from __future__ import annotations

import json
import threading

import pytest
import sqlalchemy as sa
from click.testing import CliRunner
from support.refusals import everything, page_message
from support.web_helpers import make_app, soup, step, text_of

from pgbus_web import defaults, schema
from pgbus_web.core.settings import Settings
from pgbus_web.demo import workflows as demo
from pgbus_web.i18n import force_locale, t
from pgbus_web.launch import main_group
from pgbus_web.mcp.server import Tools
from pgbus_web.models import workflow_index
from pgbus_web.rules import run_filters, states
from pgbus_web.runtime import operation_policy, operation_preview, operation_record

THRESHOLDS = {"threshold": defaults.STALL_THRESHOLD, "waiting_threshold": defaults.WAITING_THRESHOLD}


@pytest.fixture
def found(runs):
    return {
        "number": runs.make(states.PAUSED, step("capture_payment", "failed"), arguments={"customer_id": 42}),
        "text": runs.make(states.COMPLETED, arguments={"customer_id": "42", "note": "=HYPERLINK()"}),
        "longer": runs.make(states.COMPLETED, arguments={"customer_id": 420}),
        "other": runs.make(states.FAILED, arguments={"customer_id": 43}),
        "nested": runs.make(states.COMPLETED, arguments={"customer": {"id": 42, "tier": "gold"}}),
        "tags": runs.make(states.COMPLETED, arguments={"tags": ["vip", "eu"], "flag": True}),
        "items": runs.make(states.COMPLETED, arguments={"items": [{"sku": "A-1", "qty": 2}, {"sku": "B-2"}]}),
        "signalled": runs.make(
            states.WAITING,
            signals_=[{"name": "shipment_confirmed", "payload": {"carrier": "dhl", "parcel": {"kg": 3}}}],
        ),
        "plain": runs.make(states.COMPLETED),
    }


@pytest.fixture
def client(database):
    return make_app(database).test_client()


def listed(client, query: dict) -> set[str]:
    response = client.get("/workflows", query_string=query)
    assert response.status_code == 200, response.get_data(as_text=True)[:800]
    return {row["data-workflow-id"] for row in soup(response).select("tr.pgbus-run-row")}


@pytest.mark.parametrize(
    "query, expected",
    [
        # A number matches the number and the same text; quoted, the text only.
        ({"arg.customer_id": "42"}, {"number", "text"}),
        ({"arg.customer_id": '"42"'}, {"text"}),
        ({"arg.customer_id": "420"}, {"longer"}),
        ({"arg.customer_id": "4"}, set()),
        # Nested keys, and two searches together (both must hold).
        ({"arg.customer.id": "42"}, {"nested"}),
        ({"arg.customer.id": "42", "arg.customer.tier": "gold"}, {"nested"}),
        ({"arg.customer.id": "42", "arg.customer.tier": "silver"}, set()),
        # An array holding the value: "[]" after its key; without, no match.
        ({"arg.tags[]": "vip"}, {"tags"}),
        ({"arg.tags": "vip"}, set()),
        ({"arg.items[].sku": "B-2"}, {"items"}),
        ({"arg.flag": "true"}, {"tags"}),
        # Signals' payloads.
        ({"signal.carrier": "dhl"}, {"signalled"}),
        ({"signal.parcel.kg": "3"}, {"signalled"}),
        ({"signal.carrier": "ups"}, set()),
        # With the other filters.
        ({"arg.customer_id": "42", "status": "paused"}, {"number"}),
        # The search box's form, OR-ed with its other searches.
        ({"q": "customer_id:42"}, {"number", "text"}),
        ({"q": "customer.id:42"}, {"nested"}),
    ],
)
def test_each_form_finds_exactly_its_runs(client, found, query, expected):
    assert listed(client, query) == {found[name] for name in expected}


def test_the_search_box_form_still_finds_a_run_by_its_key(client, runs, found):
    # Control: "order:7" is an argument search and an idempotency key at once.
    keyed = runs.make(states.COMPLETED, idempotency_key="order:7")
    by_argument = runs.make(states.COMPLETED, arguments={"order": 7})
    assert listed(client, {"q": "order:7"}) == {keyed, by_argument}


def test_an_argument_search_shows_as_a_chip_and_the_filter_form_keeps_it(client, found):
    page = soup(client.get("/workflows", query_string={"arg.customer_id": "42", "status": "paused"}))
    chip = page.select_one('.pgbus-chip[data-filter="arg.customer_id"]')
    with force_locale("en"):
        assert t("pgbus.workflows.filters.argument", path="customer_id") in text_of(chip)
    assert "status=paused" in chip.a["href"] and "arg.customer_id" not in chip.a["href"]
    kept = page.select_one('form.pgbus-filters input[name="arg.customer_id"]')
    assert kept is not None and kept["value"] == "42"
    # The export links carry the filters.
    links = [a["href"] for a in page.select(".pgbus-export a")]
    assert len(links) == 2 and all("arg.customer_id=42" in link and "status=paused" in link for link in links)


def test_the_api_the_cli_and_mcp_take_the_same_filter(app, engine, database_url, found):
    from support.api_support import Api, token_for

    api = Api(app.test_client(), token_for(engine, "reader", "viewer"))
    answer = api.get("/runs?arg.customer_id=42")
    assert {run["workflow_id"] for run in answer.json_body["runs"]} == {found["number"], found["text"]}
    result = CliRunner().invoke(
        main_group, ["runs", "list", "--database-url", database_url, "--json", "--filter", "arg.customer_id=42"]
    )
    assert result.exit_code == 0, result.output
    assert {json.loads(line)["workflow_id"] for line in result.output.splitlines()} == {found["number"], found["text"]}
    tools = Tools(engine, Settings(registry=demo.REGISTRY))
    assert {run["workflow_id"] for run in tools.find_runs(arguments={"customer_id": 42})["runs"]} == {
        found["number"],
        found["text"],
    }
    assert {run["workflow_id"] for run in tools.find_runs(signal_payload={"carrier": "dhl"})["runs"]} == {
        found["signalled"]
    }


def test_an_operation_keeps_the_argument_filter_and_acts_on_its_runs_only(client, engine, found):
    filters = run_filters.parse_query({"arg.customer_id": "42"})
    created = operation_policy.create(
        engine, filters, "cancel", None, reason="r", actor="test", expected=2, thresholds=THRESHOLDS
    )
    assert created["filters"] == {"arg.customer_id": "42"}
    assert operation_record.filters_of(created) == filters
    preview = operation_preview.preview(engine, filters, "cancel", None, thresholds=THRESHOLDS)
    assert preview.total == 2
    # Its page shows the filter as a chip.
    page = soup(client.get(f"/workflows/operations/{created['id']}"))
    chip = page.select_one('.pgbus-operation-filters .pgbus-chip[data-filter="arg.customer_id"]')
    assert chip is not None and "42" in text_of(chip)


# --- refused: a search no index can answer -----------------------------------

BAD = {
    "malformed_path": ({"arg.customer..id": "1"}, "pgbus.workflows.filters.errors.json_path"),
    "odd_key": ({"arg.customer id": "1"}, "pgbus.workflows.filters.errors.json_path"),
    "too_deep": ({"arg.a.b.c.d.e.f.g": "1"}, "pgbus.workflows.filters.errors.json_path"),
    "long_key": ({"arg." + "k" * 65: "1"}, "pgbus.workflows.filters.errors.json_path"),
    "long_value": ({"arg.customer_id": "9" * 201}, "pgbus.workflows.filters.errors.too_long"),
    "comparison": ({"arg.customer_id": ">40"}, "pgbus.workflows.filters.errors.json_operator"),
    # arg.customer_id>=40 in a query string: the name is "arg.customer_id>".
    "comparison_in_name": ({"arg.customer_id>": "40"}, "pgbus.workflows.filters.errors.json_operator"),
    "wildcard": ({"signal.carrier": "dh*"}, "pgbus.workflows.filters.errors.json_operator"),
    "too_many": ({f"arg.k{n}": "1" for n in range(7)}, "pgbus.workflows.filters.errors.json_too_many"),
}
FIXED = {"arg.customer_id": "42"}


def _sentence(key: str, query: dict) -> str:
    name = next(iter(query))
    with force_locale("en"):
        return t(
            key,
            name=name[:50],
            depth=run_filters.MAX_PATH_DEPTH,
            length=run_filters.PATH_KEY_MAX,
            limit=run_filters.MAX_JSON_VALUE,
            max=run_filters.MAX_JSON_FILTERS,
        )


def _doors(app, engine, database_url):
    from mcp.server.mcpserver.exceptions import ToolError
    from support.api_support import Api, token_for

    api = Api(app.test_client(), token_for(engine, "reader", "viewer"))
    client = app.test_client()
    tools = Tools(engine, Settings(registry=demo.REGISTRY))

    def page(query):
        response = client.get("/workflows", query_string=query)
        return response.status_code, page_message(response) if response.status_code == 400 else ""

    def export_page(query):
        response = client.get("/workflows/export.csv", query_string=query)
        return response.status_code, page_message(response) if response.status_code == 400 else ""

    def api_list(query):
        response = api.client.get("/api/v1/runs", query_string=query, headers=api.headers())
        return response.status_code, (response.get_json() or {}).get("detail", "")

    def api_export(query):
        response = api.client.get(
            "/api/v1/runs/export", query_string={"format": "ndjson", **query}, headers=api.headers()
        )
        return response.status_code, (response.get_json(silent=True) or {}).get("detail", "")

    def cli(command):
        def run(query):
            pairs = [arg for name, value in query.items() for arg in ("--filter", f"{name}={value}")]
            extra = ["--format", "csv"] if command == "export" else []
            result = CliRunner().invoke(main_group, ["runs", command, "--database-url", database_url, *extra, *pairs])
            return {0: 200, 2: 400}.get(result.exit_code, result.exit_code), result.output if result.exit_code else ""

        return run

    def mcp(query):
        arguments = {name[4:]: value for name, value in query.items() if name.startswith("arg.")}
        payload = {name[7:]: value for name, value in query.items() if name.startswith("signal.")}
        try:
            tools.find_runs(arguments=arguments or None, signal_payload=payload or None)
        except ToolError as problem:
            return 400, str(problem)
        return 200, ""

    def mcp_export(query):
        try:
            tools.export_runs("ndjson", filters=query)
        except ToolError as problem:
            return 400, str(problem)
        return 200, ""

    return {
        "page": page,
        "export_page": export_page,
        "api": api_list,
        "api_export": api_export,
        "cli": cli("list"),
        "cli_export": cli("export"),
        "mcp": mcp,
        "mcp_export": mcp_export,
    }


@pytest.mark.parametrize("case", sorted(BAD))
def test_a_search_no_index_can_answer_is_refused_at_every_door_with_one_sentence(
    case, app, engine, database_url, found
):
    query, key = BAD[case]
    sentence = " ".join(_sentence(key, query).split())
    doors = _doors(app, engine, database_url)
    before = _tables(engine)
    for door, ask in doors.items():
        status, said = ask(query)
        assert status == 400, (case, door, status, said)
        assert sentence in " ".join(said.split()), (case, door, said)
    assert _tables(engine) == before
    # The control: every door takes the fixed filter.
    for door, ask in doors.items():
        status, said = ask(FIXED)
        assert status == 200, (case, door, said)


def _tables(engine):
    # The API token records its own last use; every other row stays.
    return {table: rows for table, rows in everything(engine).items() if table != "pgbus_web_api_tokens"}


# --- the plan: the GIN indexes answer ------------------------------------------


def _plan(engine, query: dict) -> str:
    filters = run_filters.parse_query(query)
    where, binds = workflow_index.page_where(**THRESHOLDS, **filters.page_binds(workflow_index._now()))
    with engine.begin() as conn:
        # Nudged: at a few thousand rows a scan of the table costs less
        # than any index; with scans and plain index walks priced out,
        # the plan shows which index the condition can use.
        conn.execute(sa.text("SET LOCAL enable_seqscan = off"))
        conn.execute(sa.text("SET LOCAL enable_indexscan = off"))
        rows = conn.execute(
            sa.text(f"EXPLAIN SELECT w.id FROM pgbus_workflows w WHERE {where} ORDER BY w.id DESC LIMIT 51"), binds
        )
        return "\n".join(row[0] for row in rows)


def test_the_plans_use_the_gin_indexes(engine, found):
    with engine.begin() as conn:
        conn.execute(
            sa.text(
                "INSERT INTO pgbus_workflows (workflow_id, workflow_class, status, arguments)"
                " SELECT gen_random_uuid()::text, 'OrderWorkflow', "
                "'completed', jsonb_build_object('customer_id', g % 500)"
                " FROM generate_series(1, 3000) AS g"
            )
        )
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(sa.text("ANALYZE pgbus_workflows"))
        conn.execute(sa.text("ANALYZE pgbus_workflow_signals"))
    assert "pgbus_workflows_arguments" in _plan(engine, {"arg.customer_id": "42"})
    assert "pgbus_workflows_arguments" in _plan(engine, {"q": "customer_id:42"})
    assert "pgbus_workflow_signals_payload" in _plan(engine, {"signal.carrier": "dhl"})
    # Control: a filter that reads no JSON does not name them.
    other = _plan(engine, {"status": "failed"})
    assert "pgbus_workflows_arguments" not in other and "pgbus_workflow_signals_payload" not in other


def test_the_schema_version_that_adds_them_creates_both_indexes(engine):
    with engine.connect() as conn:
        found = dict(
            conn.execute(
                sa.text(
                    "SELECT indexname, indexdef FROM pg_indexes WHERE indexname IN"
                    " ('pgbus_workflows_arguments', 'pgbus_workflow_signals_payload')"
                )
            ).all()
        )
        version = schema.installed_version(conn)
    assert version == schema.SCHEMA_VERSION
    assert set(found) == {"pgbus_workflows_arguments", "pgbus_workflow_signals_payload"}
    assert all("gin" in text and "jsonb_path_ops" in text for text in found.values())


# --- a signal's match past the walk's budget -----------------------------------


def _signal_page(engine, query: dict) -> list[str]:
    filters = run_filters.parse_query(query)
    with engine.connect() as conn:
        rows = workflow_index.page(conn, limit=51, **THRESHOLDS, **filters.page_binds(workflow_index._now()))
    return [row["workflow_id"] for row in rows]


def test_a_signal_search_whose_walk_runs_past_its_budget_reads_the_matches_runs(engine, runs, monkeypatch):
    # Older runs with the signal, newer ones without: the shape where the
    # walk from the newest id reads every newer run before a match.
    old = [
        runs.make(states.WAITING, signals_=[{"name": "shipment_confirmed", "payload": {"carrier": "oldco"}}])
        for _ in range(3)
    ]
    runs.make(states.WAITING, signals_=[{"name": "shipment_confirmed", "payload": {"carrier": "newco"}}])
    with engine.begin() as conn:
        conn.execute(
            sa.text(
                "INSERT INTO pgbus_workflows (workflow_id, workflow_class, status)"
                " SELECT gen_random_uuid()::text, 'OrderWorkflow', 'completed' FROM generate_series(1, 2000)"
            )
        )
    statements: list[str] = []
    sent: dict[str, dict] = {}

    def seen(conn, cursor, statement, parameters, *_):
        statements.append(statement)
        sent[statement] = parameters

    sa.event.listen(engine, "before_cursor_execute", seen)
    try:
        # Control: within its budget the walk answers, and the matches'
        # ids are never read.
        monkeypatch.setattr(workflow_index, "SIGNAL_WALK_BUDGET", 30.0)
        assert sorted(_signal_page(engine, {"signal.carrier": "oldco"})) == sorted(old)
        assert not any("ANY(ARRAY(SELECT sg.workflow_id" in text for text in statements)

        # The walk held up past its budget (a lock on the signals it must
        # read, released after): cancelled, then the page reads the
        # matches' runs by their ids, and answers the same runs.
        monkeypatch.setattr(workflow_index, "SIGNAL_WALK_BUDGET", 0.1)
        statements.clear()
        holder = engine.connect()
        holding = holder.begin()
        holder.execute(sa.text("LOCK TABLE pgbus_workflow_signals IN ACCESS EXCLUSIVE MODE"))
        release = threading.Timer(1.0, holding.rollback)
        release.start()
        try:
            assert sorted(_signal_page(engine, {"signal.carrier": "oldco"})) == sorted(old)
        finally:
            release.join()
            holder.close()
        by_ids = [text for text in statements if "ANY(ARRAY(SELECT sg.workflow_id" in text]
        assert by_ids
        # That statement reads the payload's GIN index, then the runs by
        # their workflow_id (scans priced out: at this size a scan of the
        # table costs less than any index).
        with engine.begin() as conn:
            conn.exec_driver_sql("SET LOCAL enable_seqscan = off")
            plan = "\n".join(row[0] for row in conn.exec_driver_sql("EXPLAIN " + by_ids[0], sent[by_ids[0]]))
        assert "pgbus_workflow_signals_payload" in plan and "pgbus_workflows_workflow_id_key" in plan, plan
        # The connection's own timeout is back after the cancelled walk.
        with engine.connect() as conn:
            assert conn.execute(sa.text("SHOW statement_timeout")).scalar_one() != "100ms"
    finally:
        sa.event.remove(engine, "before_cursor_execute", seen)
