"""Pace, pause and approval at every door (docs/operations.md): two
signed-in operators and a viewer on the pages, two API tokens and a
viewer's, and the command line. The requester cannot approve (the same
sentence at each door, nothing changed), a viewer cannot (403), another
operator can, and the runs' audit sentences name the approver."""

from __future__ import annotations

from urllib.parse import urlencode

import pytest
from click.testing import CliRunner
from support.action_support import Browser, operator_app, paused_on_capture
from support.api_support import Api, patch, token_for
from support.auth_support import CHEAP, sign_in
from support.refusals import everything
from support.web_helpers import make_app, soup, text_of

from pgbus_web.auth import Auth, User, passwords, users
from pgbus_web.core import problems
from pgbus_web.demo.workflows import REGISTRY
from pgbus_web.i18n import force_locale, t
from pgbus_web.launch import main_group
from pgbus_web.models import operation_rows
from pgbus_web.rules import states
from pgbus_web.rules.approval import Approval
from pgbus_web.runtime import operation_policy, operation_record, operation_runner

URL = "/workflows/operations"
PAUSED = urlencode({"status": "paused"})
# Approving needs the approve power (the approver role or a grant); asking
# for an operation needs only the verb's.
PEOPLE = {
    "otto": ("approver", "otto's password"),
    "olga": ("approver", "olga's password"),
    "vera": ("viewer", "vera's password"),
}


def find(engine, operation_id):
    with engine.connect() as conn:
        return operation_rows.find(conn, operation_id)


def only_operation(engine):
    with engine.connect() as conn:
        [row] = operation_rows.recent(conn)
    return row


def finish(engine):
    runner = operation_runner.Runner(engine, REGISTRY)
    while runner.step() is not None:
        pass


def own_approval_sentence(operation) -> str:
    with force_locale("en"):
        return problems.refusal(operation_record.OwnApproval(operation)).message


def rate_sentence(value: str) -> str:
    with force_locale("en"):
        from pgbus_web.core import checks

        try:
            checks.parse_pace({"rate": value})
        except checks.FormError as refused:
            return refused.message
    raise AssertionError(f"{value!r} was not refused")


# --- pages: two signed-in operators and a viewer -------------------------------------


@pytest.fixture
def people(database, tmp_path):
    path = tmp_path / "users.toml"
    users.write(
        path,
        {name: User(name, role, passwords.hash_password(password, CHEAP)) for name, (role, password) in PEOPLE.items()},
    )
    app = make_app(
        database, auth=Auth(path), SECRET_KEY="test secret", approval_threshold=1, approval_verbs="resume,cancel"
    )
    signed_in = {}
    for name, (_, password) in PEOPLE.items():
        client = app.test_client()
        assert sign_in(client, name, password).status_code in (302, 303)
        signed_in[name] = Browser(client, user=name)
        signed_in[name].load("/workflows")
    return signed_in


def test_two_signed_in_operators_one_asks_the_other_approves(people, runs, engine):
    ids = [paused_on_capture(runs) for _ in range(3)]
    otto, olga, vera = people["otto"], people["olga"], people["vera"]
    preview = otto.post(URL, {"verb": "resume", "query": PAUSED, "rate": "5", "max_in_flight": "2"})
    dialog = soup(preview).select_one("dialog#pgbus-operation-dialog")
    assert "wait until another operator approves it" in text_of(dialog.select_one(".pgbus-operation-needs-approval"))
    assert "At most 5 runs per second" in text_of(dialog.select_one(".pgbus-operation-pace-preview"))
    assert dialog.select_one("input[name=rate]")["value"] == "5"
    started = otto.post(
        URL,
        {
            "verb": "resume",
            "query": PAUSED,
            "expected": "3",
            "confirmed": "1",
            "reason": "gateway back",
            "rate": "5",
            "max_in_flight": "2",
        },
    )
    assert started.status_code == 303
    created = only_operation(engine)
    assert (created["status"], created["actor"], created["rate"], created["max_in_flight"]) == (
        states.OPERATION_AWAITING_APPROVAL,
        "dashboard:otto",
        5,
        2,
    )
    page_url = f"{URL}/{created['id']}"
    # Nobody claims it while it waits.
    assert operation_runner.Runner(engine, REGISTRY).step() is None
    # The requester: no button, and a post is refused with the sentence.
    own_page = soup(otto.client.get(page_url))
    assert own_page.select_one(".pgbus-operation-awaiting") is not None
    assert own_page.select_one("form.pgbus-operation-approve") is None
    before = everything(engine)
    refused = otto.post(f"{page_url}/approve")
    assert refused.status_code == 403
    assert own_approval_sentence(created) in refused.get_data(as_text=True)
    assert everything(engine) == before
    # A viewer: 403, nothing changed.
    assert vera.post(f"{page_url}/approve").status_code == 403
    assert everything(engine) == before
    # The other operator sees the button and approves.
    assert soup(olga.client.get(page_url)).select_one("form.pgbus-operation-approve") is not None
    assert olga.post(f"{page_url}/approve").status_code == 303
    approved = find(engine, created["id"])
    assert (approved["status"], approved["approved_by"]) == (states.OPERATION_QUEUED, "dashboard:olga")
    shown = soup(olga.client.get(page_url))
    assert "dashboard:olga" in text_of(shown.select_one(".pgbus-operation-approved"))
    assert "At most 5 runs per second" in text_of(shown.select_one(".pgbus-operation-pace-set"))
    # Pause and go on from the page, each saying who.
    assert shown.select_one("form.pgbus-operation-pause") is not None
    assert otto.post(f"{page_url}/pause").status_code == 303
    paused_page = soup(otto.client.get(page_url))
    assert paused_page.select_one("form.pgbus-operation-resume") is not None
    assert "dashboard:otto" in text_of(paused_page.select_one(".pgbus-operation-paused-by"))
    assert operation_runner.Runner(engine, REGISTRY).step() is None
    assert olga.post(f"{page_url}/resume").status_code == 303
    assert find(engine, created["id"])["resumed_by"] == "dashboard:olga"
    # The pace from the page: a bad rate refused with its sentence, an empty one removes it.
    before = everything(engine)
    bad = otto.post(f"{page_url}/pace", {"rate": "0", "max_in_flight": "2"})
    assert bad.status_code == 422 and rate_sentence("0") in bad.get_data(as_text=True)
    assert everything(engine) == before
    assert otto.post(f"{page_url}/pace", {"rate": "", "max_in_flight": "3"}).status_code == 303
    assert (find(engine, created["id"])["rate"], find(engine, created["id"])["max_in_flight"]) == (None, 3)
    finish(engine)
    assert find(engine, created["id"])["moved"] == 3
    # Every run's audit sentence names the approver.
    run_page = soup(olga.client.get(f"/workflows/{ids[0]}"))
    sentences = [text_of(node) for node in run_page.select(".pgbus-event-sentence[data-event=resumed]")]
    assert sentences and all("approved by dashboard:olga" in sentence for sentence in sentences)


def test_a_viewer_sees_no_buttons_and_under_the_threshold_nothing_waits(people, runs, engine):
    paused_on_capture(runs)
    otto = people["otto"]
    assert (
        otto.post(
            URL, {"verb": "resume", "query": PAUSED, "expected": "1", "confirmed": "1", "reason": "one run"}
        ).status_code
        == 303
    )
    created = only_operation(engine)
    assert created["status"] == states.OPERATION_QUEUED
    viewer_page = soup(people["vera"].client.get(f"{URL}/{created['id']}"))
    for form in ("approve", "pause", "resume", "cancel", "pace-form"):
        assert viewer_page.select_one(f"form.pgbus-operation-{form}") is None
    assert viewer_page.select_one(".pgbus-operation-pace-set") is not None


# --- API: two tokens and a viewer's -----------------------------------------------------


@pytest.fixture
def tokens(database, engine):
    app = operator_app(database, approval_threshold=1)
    return {
        name: Api(app.test_client(), token_for(engine, name, role))
        for name, role in (("deploy-bot", "approver"), ("on-call", "approver"), ("grafana", "viewer"))
    }


def test_two_tokens_one_asks_the_other_approves(tokens, runs, engine):
    ids = [paused_on_capture(runs) for _ in range(2)]
    asker, approver, viewer = tokens["deploy-bot"], tokens["on-call"], tokens["grafana"]
    body = {
        "verb": "resume",
        "filters": {"status": "paused"},
        "reason": "gateway back",
        "confirmed": True,
        "expected": 2,
        "rate": 2.5,
        "max_in_flight": 1,
    }
    created = asker.post("/operations", body)
    assert created.status_code == 201
    operation = created.json_body["operation"]
    assert (operation["status"], operation["rate"], operation["max_in_flight"], operation["approved_by"]) == (
        states.OPERATION_AWAITING_APPROVAL,
        2.5,
        1,
        None,
    )
    with force_locale("en"):
        assert created.json_body["message"] == t("pgbus.operations.awaiting", operation_id=operation["id"])
    url = f"/operations/{operation['id']}"
    before = everything(engine)
    own = asker.post(f"{url}/approve")
    assert own.status_code == 403
    assert own.json_body["detail"] == own_approval_sentence(find(engine, operation["id"]))
    assert viewer.post(f"{url}/approve").status_code == 403
    assert everything(engine) == before
    approved = approver.post(f"{url}/approve")
    assert approved.status_code == 200
    assert approved.json_body["operation"]["approved_by"] == "api:on-call"
    assert approved.json_body["operation"]["approved_at"]
    again = approver.post(f"{url}/approve")
    assert again.status_code == 409
    # The pace: PATCH and its POST twin; null removes a limit; a bad value
    # is refused with the page's sentence and changes nothing.
    before = everything(engine)
    refused = patch(asker, url, {"rate": 0})
    assert refused.status_code == 422 and refused.json_body["detail"] == rate_sentence("0")
    assert patch(asker, url, {"rate": "fast"}).status_code == 422
    assert patch(asker, url, {"speed": 3}).status_code == 422
    assert everything(engine) == before
    changed = patch(asker, url, {"rate": 40, "max_in_flight": None})
    assert changed.status_code == 200
    assert (changed.json_body["operation"]["rate"], changed.json_body["operation"]["max_in_flight"]) == (40, None)
    assert asker.post(f"{url}/pace", {"max_in_flight": 5}).json_body["operation"]["max_in_flight"] == 5
    assert patch(viewer, url, {"rate": 1}).status_code == 403
    # Pause and go on, with who.
    paused = asker.post(f"{url}/pause")
    assert paused.status_code == 200 and paused.json_body["operation"]["paused_by"] == "api:deploy-bot"
    assert asker.post(f"{url}/pause").status_code == 409
    assert approver.post(f"{url}/resume").json_body["operation"]["resumed_by"] == "api:on-call"
    finish(engine)
    run = asker.get(f"/runs/{ids[0]}").json_body
    resumed = [event for event in run["events"] if event["event"] == "resumed"]
    assert resumed and resumed[0]["approval"]["approved_by"] == "api:on-call"
    # A ceiling of runs in flight on a verb that starts no work: refused, nothing written.
    paused_on_capture(runs)
    before = everything(engine)
    ceiling = asker.post("/operations", {**body, "expected": 1, "verb": "cancel", "max_in_flight": 3})
    assert (
        ceiling.status_code == 422
        and ceiling.json_body["detail"] == problems.refusal(operation_record.CeilingNotForVerb("cancel")).message
    )
    assert everything(engine) == before


def test_cancel_works_from_paused_through_the_api(tokens, runs, engine):
    paused_on_capture(runs)
    asker = tokens["deploy-bot"]
    created = asker.post(
        "/operations", {"verb": "resume", "filters": {"status": "paused"}, "reason": "r", "confirmed": True}
    ).json_body["operation"]
    url = f"/operations/{created['id']}"
    assert created["status"] == states.OPERATION_QUEUED  # one run: under the threshold
    assert asker.post(f"{url}/pause").status_code == 200
    assert asker.post(f"{url}/cancel").json_body["operation"]["status"] == states.OPERATION_CANCELLED
    ended = patch(asker, url, {"rate": 3})
    assert ended.status_code == 409
    with force_locale("en"):
        assert (
            ended.json_body["detail"]
            == problems.refusal(operation_record.PaceEnded(find(engine, created["id"]))).message
        )


# --- command line -------------------------------------------------------------------------


def test_the_command_line_asks_waits_and_refuses_its_own_approval(database_url, runs, engine):
    [paused_on_capture(runs) for _ in range(2)]
    asker = token_for(engine, "deploy-bot", "approver")

    def cli(*args, token=asker):
        return CliRunner().invoke(
            main_group,
            [*args, "--database-url", database_url],
            env={"PGBUS_WEB_TOKEN": token or "", "LOGNAME": "someoneelse"},
            catch_exceptions=False,
        )

    asked = cli(
        "bulk",
        "resume",
        "--filter",
        "status=paused",
        "--reason",
        "gateway back",
        "--yes",
        "--rate",
        "4",
        "--approval-threshold",
        "1",
        "--definitions",
        "pgbus_web.demo.workflows",
    )
    assert asked.exit_code == 1, asked.output
    assert "At most 4 runs per second" in asked.output and "waits for another operator’s approval" in asked.output
    created = only_operation(engine)
    assert (created["status"], created["rate"], created["actor"], created["requested_by"]) == (
        states.OPERATION_AWAITING_APPROVAL,
        4,
        "cli:deploy-bot",
        "token:deploy-bot",
    )
    before = everything(engine)
    # The token's principal asked: it cannot approve, whatever login name the shell claims.
    own = cli("operations", "approve", str(created["id"]))
    assert own.exit_code == 1 and own_approval_sentence(created) in own.output
    # Without a token the command is break-glass, which never approves.
    glass = cli("operations", "approve", str(created["id"]), token=None)
    assert glass.exit_code == 1 and "break-glass" in glass.output
    assert everything(engine) == before
    bad = cli("operations", "set", str(created["id"]), "--rate", "0")
    assert bad.exit_code == 2 and rate_sentence("0") in bad.output
    assert everything(engine) == before
    operation_policy.approve(engine, created["id"], actor="dashboard:olga")
    assert cli("operations", "set", str(created["id"]), "--rate", "", "--max-in-flight", "7").exit_code == 0
    assert (find(engine, created["id"])["rate"], find(engine, created["id"])["max_in_flight"]) == (None, 7)
    paused = cli("operations", "pause", str(created["id"]), "--reason", "downstream slow")
    assert paused.exit_code == 0
    assert (find(engine, created["id"])["paused_by"], find(engine, created["id"])["pause_reason"]) == (
        "cli:deploy-bot",
        "downstream slow",
    )
    shown = cli("operations", "show", str(created["id"]))
    assert "paused" in shown.output and "Approved by dashboard:olga" in shown.output
    assert cli("operations", "pause", str(created["id"])).exit_code == 1
    assert cli("operations", "resume", str(created["id"])).exit_code == 0
    assert find(engine, created["id"])["status"] == states.OPERATION_QUEUED
    assert cli("operations", "show", "0").exit_code == 1


# --- the settings ------------------------------------------------------------------------


def test_the_approval_settings_are_checked_and_read_from_config(database):
    from pgbus_web.core.settings import SettingError

    app = make_app(database, PGBUS_WEB_APPROVAL_THRESHOLD=100, PGBUS_WEB_APPROVAL_VERBS="cancel, rerun")
    settings = app.extensions["pgbus_web"].settings
    assert (settings.approval_threshold, settings.approval_verbs) == (100, ("cancel", "rerun"))
    for wrong in (
        {"approval_verbs": "cancel,bogus"},
        {"approval_verbs": ""},
        {"approval_threshold": -1},
        {"approval_threshold": "many"},
    ):
        with pytest.raises(SettingError, match="approval_"):
            make_app(database, **wrong)
    # Unset, nothing waits.
    default = make_app(database).extensions["pgbus_web"].settings
    assert not Approval(default.approval_threshold, default.approval_verbs).needed("cancel", 10**9)


def test_the_api_preview_says_the_pace_and_that_it_will_wait(tokens, runs, engine):
    for _ in range(2):
        paused_on_capture(runs)

    def kept(tables):  # a token's last use is written on every answer
        return {table: rows for table, rows in tables.items() if table != "pgbus_web_api_tokens"}

    before = kept(everything(engine))
    shown = tokens["deploy-bot"].post(
        "/operations", {"verb": "resume", "filters": {"status": "paused"}, "rate": 0.5, "max_in_flight": 2}
    )
    assert shown.status_code == 200
    preview = shown.json_body["preview"]
    assert (preview["rate"], preview["max_in_flight"], preview["needs_approval"]) == (0.5, 2, True)
    one = tokens["deploy-bot"].post(
        "/operations", {"verb": "resume", "filters": {"status": "paused", "q": "no-such-run"}}
    )
    assert one.json_body["preview"]["needs_approval"] is False
    assert kept(everything(engine)) == before


def test_bulk_with_a_rate_does_it_here_at_that_pace(database_url, engine):
    from support.operation_support import acted_at, busiest_second, seed_paused

    seed_paused(engine, 24)
    done = CliRunner().invoke(
        main_group,
        [
            "bulk",
            "resume",
            "--filter",
            "status=paused",
            "--reason",
            "slowly",
            "--yes",
            "--rate",
            "8",
            "--definitions",
            "pgbus_web.demo.workflows",
            "--database-url",
            database_url,
        ],
        catch_exceptions=False,
    )
    assert done.exit_code == 0, done.output
    assert "At most 8 runs per second" in done.output
    created = only_operation(engine)
    assert (created["status"], created["moved"], created["rate"]) == (states.OPERATION_DONE, 24, 8)
    moments = acted_at(engine, created["id"])
    assert len(moments) == 24 and 6 <= busiest_second(moments) <= 8
