"""A fragment from anywhere in a run id finds the run (docs/search.md,
"Finding a run"): from the middle or the end, in any case, six characters
on, one word; its LIKE characters taken literally; through every door (the
page, its one-match offer, the API, the command line, the MCP server, an
operation); served by the trigram index of the schema version that adds
it, without changing the plans of the other forms; and on a database where
pg_trgm cannot be created, the schema still installs and the search keeps
to the id's prefix."""

from __future__ import annotations

import uuid

import pytest
import sqlalchemy as sa
from click.testing import CliRunner
from support.mcp_support import answer, session
from support.operation_support import THRESHOLDS, create, query
from support.web_helpers import Runs, listed, make_app, run_url, soup, step

from pgbus_web import db, schema
from pgbus_web.demo.workflows import REGISTRY
from pgbus_web.i18n import force_locale, t
from pgbus_web.launch import main_group
from pgbus_web.models import workflow_index, workflow_search
from pgbus_web.rules import states
from pgbus_web.runtime import operation_preview, operation_runner

RUN_ID = "6ced4f1b-9a3e-4c55-8d1e-0a2b3c4d5e6f"
# Shares RUN_ID's first seven characters, nothing after them.
NEIGHBOUR_ID = "6ced4f1a-0000-4000-8000-000000000000"
OTHER_ID = "11111111-2222-4333-8444-555566667777"

# Ids holding LIKE's special characters, and one each pattern would match
# were they not taken literally.
LITERAL_ID = "frag-ab%cd_ef\\gh-x1"
PATTERN_ID = "frag-abZZcdQefgh-x2"


@pytest.fixture
def client(database):
    return make_app(database).test_client()


@pytest.fixture
def made(runs):
    return {
        "target": runs.make(
            states.PAUSED,
            step("capture_payment", "failed", error_class="Timeout"),
            workflow_id=RUN_ID,
            subject=("Order", "100615"),
        ),
        "neighbour": runs.make(states.COMPLETED, workflow_id=NEIGHBOUR_ID),
        "other": runs.make(states.COMPLETED, workflow_id=OTHER_ID),
    }


@pytest.mark.parametrize(
    "q",
    [
        RUN_ID[9:17],  # 8 characters from the middle: "9a3e-4c5"
        RUN_ID[-12:],  # the end: "0a2b3c4d5e6f"
        RUN_ID[-12:].upper(),  # in any case
        RUN_ID[14:20],  # the shortest fragment taken: 6 characters
        f"  {RUN_ID[9:23]} ",  # with the spaces a paste brings
    ],
)
def test_a_fragment_from_the_middle_or_the_end_finds_the_run(client, made, q):
    assert listed(client, q) == [made["target"]]


def test_a_fragment_of_another_runs_id_finds_that_run_only(client, made):
    assert listed(client, OTHER_ID[9:17]) == [made["other"]]
    assert listed(client, OTHER_ID[-12:]) == [made["other"]]


@pytest.mark.parametrize("q", [RUN_ID[9:14], RUN_ID[-5:], "4c55 8d1e", "9a3e 4c55-8d1e"])
def test_a_shorter_fragment_or_one_of_two_words_finds_nothing(client, made, q):
    # Five characters from the middle or the end, or a text with a space
    # (no id fragment: a subject's type and id are two words).
    assert listed(client, q) == []


def test_the_prefix_and_the_other_forms_still_find_what_they_found(client, made):
    # Controls: the fragment branch takes nothing from the other forms.
    assert listed(client, "6ced") == [made["neighbour"], made["target"]]
    assert listed(client, RUN_ID[:8]) == [made["target"]]
    assert listed(client, "Order 100615") == [made["target"]]


# The last one is longer than the part looked up in the index (checked
# whole after).
@pytest.mark.parametrize("q", ["b%cd_e", "d_ef\\g", "f\\gh-x", "ab%cd_ef\\gh-x"])
def test_like_characters_in_a_fragment_are_taken_literally(client, engine, runs, q):
    literal = runs.make(states.COMPLETED, workflow_id=LITERAL_ID)
    pattern = runs.make(states.COMPLETED, workflow_id=PATTERN_ID)
    # Control: read as a pattern, the text would match the other run too.
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT :id LIKE :pattern"), {"id": PATTERN_ID, "pattern": f"%{q}%"}).scalar_one()
    assert listed(client, q) == [literal]
    # And the other run is found by a fragment of its own.
    assert listed(client, "cdQefg") == [pattern]


def test_one_match_by_a_fragment_offers_to_open_it(app, client, made):
    page = soup(client.get("/workflows", query_string={"q": RUN_ID[-12:]}))
    offer = page.select("#pgbus-runs a.pgbus-only-match")
    assert [link["href"] for link in offer] == [run_url(app, RUN_ID)]
    # Control: a fragment in two runs' ids (not their prefix) offers neither.
    assert listed(client, "ced4f1") == [made["neighbour"], made["target"]]
    assert not soup(client.get("/workflows", query_string={"q": "ced4f1"})).select(".pgbus-only-match")


def test_the_hint_says_a_fragment_is_looked_for(client, made):
    page = soup(client.get("/workflows", query_string={"locale": "de"}))
    with force_locale("de"):
        assert page.select_one("#pgbus-search-hint").get_text(strip=True) == t(
            "pgbus.workflows.search.hint_fragments"
        ) + " " + t("pgbus.workflows.search.hint_arguments")


def test_the_api_the_command_line_and_the_mcp_server_take_a_fragment(database, database_url, engine, made):
    from support.action_support import operator_app
    from support.api_support import Api, token_for

    api = Api(operator_app(database).test_client(), token_for(engine, "reader", "viewer"))
    found = api.get(f"/runs?q={RUN_ID[-12:]}")
    assert [run["workflow_id"] for run in found.json_body["runs"]] == [RUN_ID]

    url = engine.url.render_as_string(hide_password=False)
    result = CliRunner().invoke(
        main_group,
        ["bulk", "cancel", "--filter", f"q={RUN_ID[9:17]}", "--reason", "r", "--dry-run", "--database-url", url],
    )
    assert result.exit_code == 0, result.output
    assert result.output.startswith(f"1 runs match {{'q': '{RUN_ID[9:17]}'}}"), result.output

    async def calls(client):
        return answer(await client.call_tool("find_runs", {"q": RUN_ID[-12:].upper()}))

    assert [run["workflow_id"] for run in session(database_url, calls=calls)["runs"]] == [RUN_ID]


def test_an_operation_on_a_fragment_acts_on_that_run_only(engine, made):
    shown = operation_preview.preview(
        engine, query(q=RUN_ID[9:17]), "cancel", None, registry=REGISTRY, thresholds=THRESHOLDS
    )
    assert shown.total == 1
    create(engine, verb="cancel", expected=1, q=RUN_ID[-12:])
    runner = operation_runner.Runner(engine, REGISTRY)
    while runner.step() is not None:
        pass
    with engine.connect() as conn:
        statuses = dict(conn.execute(sa.text("SELECT workflow_id, status FROM pgbus_workflows")).all())
    assert statuses == {RUN_ID: states.CANCELLED, NEIGHBOUR_ID: states.COMPLETED, OTHER_ID: states.COMPLETED}


# --- the plans ---------------------------------------------------------------


def sent_by_page(engine, search: str) -> tuple[str, dict]:
    """The runs index's own statement for *search*, and its parameters."""
    sent = []

    def grab(conn, cursor, statement, parameters, context, executemany):
        sent.append((statement, parameters))

    sa.event.listen(engine, "before_cursor_execute", grab)
    try:
        with engine.connect() as conn:
            workflow_index.page(conn, limit=51, search=search, **THRESHOLDS)
    finally:
        sa.event.remove(engine, "before_cursor_execute", grab)
    return sent[-1]


def plan_of(engine, statement: str, parameters) -> str:
    with engine.connect() as conn:
        cursor = conn.connection.driver_connection.cursor()
        # Few runs are cheaper to read whole; with that ruled out, a
        # condition no index serves would still be a Seq Scan.
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute("EXPLAIN " + statement, parameters)
        return "\n".join(row[0] for row in cursor.fetchall())


def seed(engine, count: int) -> None:
    with engine.begin() as conn:
        conn.execute(
            sa.text(
                "INSERT INTO pgbus_workflows (workflow_id, workflow_class, status, subject_type, subject_id)"
                " SELECT gen_random_uuid()::text, 'Bulk', 'completed', 'Order', g::text"
                " FROM generate_series(1, :count) g"
            ),
            {"count": count},
        )
        conn.execute(sa.text("ANALYZE pgbus_workflows"))


def test_a_fragment_is_read_from_the_trigram_index(engine, made):
    seed(engine, 20_000)
    statement, parameters = sent_by_page(engine, RUN_ID[-12:])
    plan = plan_of(engine, statement, parameters)
    assert workflow_search.FRAGMENT_INDEX in plan, plan
    assert "Seq Scan on pgbus_workflows" not in plan, plan
    # Control: the same search on a database without the index has no
    # branch that could read it, and still no sequential scan.
    where, _ = workflow_index.page_where(search=RUN_ID[-12:], fragments=False, **THRESHOLDS)
    assert "LIKE" not in where and "LIKE" in statement


@pytest.mark.parametrize("q", ["Order 100615", "10061", "6ced"])
def test_a_text_that_is_no_fragment_keeps_its_statement_and_plan(engine, made, q):
    seed(engine, 20_000)
    statement, parameters = sent_by_page(engine, q)
    assert "LIKE" not in statement
    plan = plan_of(engine, statement, parameters)
    assert workflow_search.FRAGMENT_INDEX not in plan and "Seq Scan on pgbus_workflows" not in plan, plan
    assert "pgbus_workflows_search_" in plan, plan


def test_a_subject_id_long_enough_to_be_a_fragment_is_read_from_both_indexes(engine, made):
    # "100615" could be inside a run id too: both are looked up, each in
    # its index, and the subject is still found.
    seed(engine, 20_000)
    statement, parameters = sent_by_page(engine, "100615")
    plan = plan_of(engine, statement, parameters)
    assert "pgbus_workflows_search_subject" in plan and workflow_search.FRAGMENT_INDEX in plan, plan
    assert "Seq Scan on pgbus_workflows" not in plan, plan


# --- a database without pg_trgm ----------------------------------------------


def fragment_version() -> int:
    """The schema version that adds the trigram index (found by what its
    script makes, not by number)."""
    return 1 + next(
        index for index, name in enumerate(schema.MIGRATIONS) if workflow_search.FRAGMENT_INDEX in schema._sql(name)
    )


def test_without_pg_trgm_the_schema_installs_and_the_search_keeps_to_the_prefix(scratch):  # noqa: F811
    url, engine = scratch
    version = fragment_version()
    schema.install(engine, target=version - 1)
    role = f"pgbus_no_trgm_{uuid.uuid4().hex[:8]}"
    with engine.begin() as conn:
        # A role that owns the runs table but may not create an extension
        # in this database (no CREATE privilege on it), as on a server
        # that refuses pg_trgm to the application's role.
        conn.execute(sa.text(f"CREATE ROLE {role}"))
        conn.execute(sa.text(f"ALTER TABLE pgbus_workflows OWNER TO {role}"))
        conn.execute(sa.text(f"GRANT SELECT, INSERT ON {schema.VERSION_TABLE} TO {role}"))
    restricted = db.create_engine(url, connect_args={"options": f"-c role={role}"})
    try:
        assert schema.install(restricted, target=version).installed
    finally:
        restricted.dispose()
        with engine.begin() as conn:
            conn.execute(sa.text("ALTER TABLE pgbus_workflows OWNER TO CURRENT_USER"))
            conn.execute(sa.text(f"REVOKE ALL ON {schema.VERSION_TABLE} FROM {role}"))
            conn.execute(sa.text(f"DROP ROLE {role}"))
    schema.install(engine)
    with engine.connect() as conn:
        assert schema.installed_version(conn) == schema.SCHEMA_VERSION
        assert not workflow_search.fragment_index_present(conn)
        assert conn.execute(sa.text("SELECT count(*) FROM pg_extension WHERE extname = 'pg_trgm'")).scalar_one() == 0
    runs = Runs(engine)
    runs.make(states.PAUSED, workflow_id=RUN_ID)
    client = make_app(db.Database(engine)).test_client()
    assert listed(client, RUN_ID[-12:]) == []  # no fragment without the index
    assert listed(client, RUN_ID[:8]) == [RUN_ID]  # the prefix stays
    statement, _ = sent_by_page(engine, RUN_ID[-12:])
    assert "LIKE" not in statement  # never a read of every run
    page = soup(client.get("/workflows", query_string={"locale": "de"}))
    with force_locale("de"):
        assert page.select_one("#pgbus-search-hint").get_text(strip=True) == t("pgbus.workflows.search.hint") + " " + t(
            "pgbus.workflows.search.hint_arguments"
        )

    # The index made later by a role allowed to (the script again, as its
    # comment says) serves the fragment from the next search on: asked of
    # a fresh app, since making an index moves no change marker and the
    # first shows the same search's kept read for a few seconds more.
    with engine.begin() as conn:
        schema._run_script(conn, schema._sql(schema.MIGRATIONS[version - 1]))
    client = make_app(db.Database(engine)).test_client()
    assert listed(client, RUN_ID[-12:]) == [RUN_ID]
