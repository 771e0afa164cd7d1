"""The index's search box (GET /workflows?q=, docs/web.md): a run found by
its whole id in any case, by the short prefix the list shows, by its
idempotency key in any case, by its subject ("Order 100615", "order
100615") or by the subject's id alone (a fragment from anywhere in the
id: test_search_fragments.py); near misses find nothing; a text
that cannot be right is refused and changes nothing; the operations read
the same search; and a version 2 database gets the search indexes."""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from support.operation_support import THRESHOLDS, create, query
from support.refusals import everything
from support.web_helpers import Runs, listed, make_app, soup, step, text_of

from pgbus_web import schema
from pgbus_web.demo.workflows import REGISTRY
from pgbus_web.i18n import force_locale, t
from pgbus_web.models import operation_rows, workflow_index, workflow_rows, workflow_search
from pgbus_web.rules import states
from pgbus_web.runtime import operation_preview, operation_runner

RUN_ID = "6ced4f1b-9a3e-4c55-8d1e-0a2b3c4d5e6f"
# Shares the first seven characters with RUN_ID: an 8-character prefix
# tells them apart, a 4-character one finds both.
NEIGHBOUR_ID = "6ced4f1a-0000-4000-8000-000000000000"


@pytest.fixture
def runs(engine) -> Runs:
    return Runs(engine)


@pytest.fixture
def found(runs):
    """The run to find, a neighbour by id, and runs that nearly match."""
    made = {
        "target": runs.make(
            states.PAUSED,
            step("capture_payment", "failed", error_class="Timeout"),
            workflow_id=RUN_ID,
            subject=("Order", "100615"),
            idempotency_key="Checkout-77A",
        ),
        "neighbour": runs.make(states.COMPLETED, workflow_id=NEIGHBOUR_ID, subject=("Order", "200")),
        # The same subject id, another type: found by the id alone only.
        "invoice": runs.make(states.COMPLETED, subject=("Invoice", "100615")),
        "other": runs.make(states.COMPLETED, subject=("Order", "1006150"), idempotency_key="checkout-77"),
    }
    return made


@pytest.fixture
def client(database):
    return make_app(database).test_client()


@pytest.mark.parametrize(
    "q, expected",
    [
        # The whole id, in any case, with spaces around it as pasted.
        (RUN_ID, {"target"}),
        (RUN_ID.upper(), {"target"}),
        (f"  {RUN_ID} ", {"target"}),
        # The short id the list shows, and the shortest prefix taken as one.
        (RUN_ID[:8], {"target"}),
        (RUN_ID[:8].upper(), {"target"}),
        ("6ced", {"target", "neighbour"}),
        # The idempotency key, in any case.
        ("Checkout-77A", {"target"}),
        ("checkout-77a", {"target"}),
        # The subject, in any case, or by its id alone.
        ("Order 100615", {"target"}),
        ("order 100615", {"target"}),
        ("ORDER   100615", {"target"}),
        ("100615", {"target", "invoice"}),
    ],
)
def test_each_form_finds_the_run(client, found, q, expected):
    assert set(listed(client, q)) == {found[name] for name in expected}


@pytest.mark.parametrize(
    "q",
    [
        RUN_ID[:8] + "0",  # a prefix one character off
        RUN_ID[1:6],  # not a prefix, and too short a fragment (test_search_fragments.py)
        "6ce",  # shorter than a prefix may be: a whole id only
        RUN_ID + "0",  # longer than the id
        "Checkout-77",  # the key's prefix (another run's whole key)
        "Order 10061",  # a subject id's prefix
        "Order 1006151",
        "Invoice 100616",
        "Refund 100615",  # the subject id with another type
        "10061",
        "Order",  # a type alone matches no subject id
        "%",  # no LIKE pattern: the text is taken as it is
        "6ced_f1b",
    ],
)
def test_a_near_miss_finds_nothing_of_the_target(client, found, q):
    assert found["target"] not in listed(client, q)


def test_near_misses_find_what_they_name_and_nothing_else(client, found):
    # Controls of the near-miss test above: the same forms do find their own run.
    assert listed(client, "Checkout-77") == [found["other"]]
    assert listed(client, "Order 1006150") == [found["other"]]
    assert listed(client, "Invoice 100615") == [found["invoice"]]
    assert listed(client, "%") == []
    assert listed(client, "Order") == []


def test_the_search_combines_with_the_other_filters_and_shows_as_a_chip(client, found):
    assert set(listed(client, "100615")) == {found["target"], found["invoice"]}
    page = soup(client.get("/workflows", query_string={"q": "100615", "status": "paused"}))
    assert [row["data-workflow-id"] for row in page.select("tr.pgbus-run-row")] == [found["target"]]
    chip = page.select_one('.pgbus-chip[data-filter="q"]')
    assert "100615" in text_of(chip)
    # Its removal keeps the other filter, drops the search.
    assert "status=paused" in chip.a["href"] and "q=" not in chip.a["href"]
    # The search box shows the text; the filter form carries it along.
    assert page.select_one("#pgbus-search-q")["value"] == "100615"
    assert page.select_one('form.pgbus-filters input[name="q"]')["value"] == "100615"


def test_the_search_box_is_on_the_unfiltered_index(client, found):
    page = soup(client.get("/workflows"))
    box = page.select_one('form[role="search"] input[name="q"]')
    assert box is not None and box.get("value") == ""
    assert page.select_one('label[for="pgbus-search-q"]') is not None


@pytest.mark.parametrize(
    "q, key, args",
    [
        # The search box's own words, with the length it was given.
        ("x" * 201, "pgbus.workflows.search.too_long", {"count": 201, "limit": 200}),
        ("Order\x00100615", "pgbus.workflows.filters.errors.nul_character", {"name": "q"}),
    ],
)
def test_a_search_that_cannot_be_right_is_refused_and_changes_nothing(client, engine, found, q, key, args):
    before = everything(engine)
    response = client.get("/workflows", query_string={"q": q, "locale": "de"})
    assert response.status_code == 400
    page = soup(response)
    with force_locale("de"):
        assert text_of(page.select_one(".pgbus-filter-error")) == t(key, **args)
    assert page.select("tr.pgbus-run-row") == []
    assert everything(engine) == before
    # Control: the longest text accepted is a search like any other.
    assert client.get("/workflows", query_string={"q": "x" * 200}).status_code == 200


def test_an_operation_stores_the_search_and_acts_on_its_runs_only(engine, found):
    shown = operation_preview.preview(
        engine, query(q="100615"), "cancel", None, registry=REGISTRY, thresholds=THRESHOLDS
    )
    assert shown.total == 2 and shown.query == {"q": "100615"}
    operation = create(engine, verb="cancel", expected=1, q="order 100615")
    with engine.connect() as conn:
        stored = operation_rows.find(conn, operation["id"])
    assert (stored["filters"], stored["total"]) == ({"q": "order 100615"}, 1)
    runner = operation_runner.Runner(engine, REGISTRY)
    while runner.step() is not None:
        pass
    with engine.connect() as conn:
        statuses = dict(conn.execute(sa.text("SELECT workflow_id, status FROM pgbus_workflows")).all())
    assert statuses[found["target"]] == states.CANCELLED
    assert statuses[found["invoice"]] == statuses[found["other"]] == states.COMPLETED


def test_a_version_2_database_gets_the_search_indexes(scratch):  # noqa: F811
    _, engine = scratch
    schema.install(engine, target=2)
    with engine.begin() as conn:
        workflow_rows.insert_run(
            conn,
            {
                "workflow_id": RUN_ID,
                "workflow_class": "Hand",
                "status": "completed",
                "subject_type": "Order",
                "subject_id": "100615",
            },
        )

    def indexes():
        with engine.connect() as conn:
            return set(
                conn.execute(
                    sa.text("SELECT indexname FROM pg_indexes WHERE indexname LIKE 'pgbus_workflows_search%'")
                ).scalars()
            )

    assert indexes() == set()  # control: version 2 has none
    assert schema.install(engine).upgraded_from == 2
    assert indexes() == {
        "pgbus_workflows_search_id",
        "pgbus_workflows_search_idempotency",
        "pgbus_workflows_search_subject",
    }
    with engine.connect() as conn:
        where, binds = workflow_index.page_where(search="ORDER 100615", **THRESHOLDS)
        assert conn.execute(
            sa.text(f"SELECT w.workflow_id FROM pgbus_workflows w WHERE {where}"), binds
        ).scalars().all() == [RUN_ID]


def test_the_prefix_bounds_are_exact_at_the_edges():
    assert workflow_search.search_where("abcz")[1]["search_id_high"] == "abc{"
    # A last character with no successor is dropped and the one before it moved on.
    assert workflow_search.search_where("ab" + chr(0x10FFFF) * 2)[1]["search_id_high"] == "ac"
    # The surrogates are skipped: they are no characters of text.
    assert workflow_search.search_where("abc" + chr(0xD7FF))[1]["search_id_high"] == "abc" + chr(0xE000)
    assert workflow_search.ascii_lower("ÄBC-Ω") == "Äbc-Ω"


def test_the_command_line_reads_the_search(engine, found):
    from click.testing import CliRunner

    from pgbus_web.launch import main_group

    url = engine.url.render_as_string(hide_password=False)
    before = everything(engine)
    result = CliRunner().invoke(
        main_group,
        ["bulk", "cancel", "--filter", f"q={RUN_ID[:8].upper()}", "--reason", "r", "--dry-run", "--database-url", url],
    )
    assert result.exit_code == 0, result.output
    assert result.output.startswith("1 runs match {'q': '6CED4F1B'}"), result.output
    assert f"  {RUN_ID}  OrderWorkflow  paused" in result.output
    assert everything(engine) == before
