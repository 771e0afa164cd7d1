"""The policy (docs/policy.md): rules in PostgreSQL that every door reads,
changed by an admin only, each change kept with who and why; grants that
narrow a role to classes and verbs; the approval no door can skip; a
proven identity at the command line and MCP. Each refusal is checked for
its sentence and for changing nothing; each rule has its control."""

from __future__ import annotations

import json
import time

import pytest
from click.testing import CliRunner
from support.action_support import Browser, paused_on_capture
from support.api_support import Api, put, token_for
from support.auth_support import CHEAP, sign_in
from support.policy_support import cli, set_rule
from support.refusals import everything
from support.waiting import wait_until
from support.web_helpers import make_app, soup, text_of

from pgbus_web.auth import Auth, User, passwords, users
from pgbus_web.core import operation_acts, permissions, policy, problems
from pgbus_web.core.settings import Settings
from pgbus_web.demo.workflows import ORDER, REFUND, REGISTRY
from pgbus_web.i18n import force_locale
from pgbus_web.launch import main_group
from pgbus_web.models import operation_rows, policy_rows
from pgbus_web.rules import run_filters, states
from pgbus_web.runtime import operation_record

PAUSED = {"status": "paused"}
# name: (role, groups, password)
PEOPLE = {
    "ada": ("admin", (), "ada's password"),
    "otto": ("operator", (), "otto's password"),
    "olga": ("approver", (), "olga's password"),
    "pat": ("viewer", ("payments",), "pat's password"),
    "vera": ("viewer", (), "vera's password"),
}
# The payments on-call may resume OrderWorkflow runs, nothing else.
PAYMENTS_GRANT = {"to": "group:payments", "role": "operator", "classes": ["Order*"], "verbs": ["resume"]}


def sentence(problem) -> str:
    with force_locale("en"):
        return problems.refusal(problem).message


@pytest.fixture
def people(database, tmp_path):
    path = tmp_path / "users"
    users.write(
        path,
        {
            name: User(name, role, passwords.hash_password(password, CHEAP), groups)
            for name, (role, groups, password) in PEOPLE.items()
        },
    )
    app = make_app(database, auth=Auth(path), SECRET_KEY="test secret", registry=REGISTRY)
    signed_in = {}
    for name, (_, _, password) in PEOPLE.items():
        client = app.test_client()
        assert sign_in(client, name, password).status_code in (302, 303)
        signed_in[name] = Browser(client, user=name)
        signed_in[name].load("/workflows")
    return signed_in


# --- the rules: defaults, changes, versions, history -------------------------------------


def test_an_empty_policy_is_the_defaults_and_a_change_is_kept_with_who_and_why(engine):
    empty = policy.read(engine)
    assert (empty.stall_threshold.total_seconds(), empty.waiting_threshold.total_seconds()) == (600, 86400)
    assert (empty.approval.threshold, empty.max_rate, empty.redact, empty.grants) == (None, None, (), ())
    made = policy.change(engine, "stall_threshold", 300, actor="dashboard:ada", reason="faster flags")
    after = policy.read(engine)
    assert after.stall_threshold.total_seconds() == 300 and after.version_of("stall_threshold") == made["id"]
    [change] = policy.history(engine)
    assert (change["key"], change["old_value"], change["new_value"], change["actor"], change["reason"]) == (
        "stall_threshold",
        None,
        300,
        "dashboard:ada",
        "faster flags",
    )
    # Back to the default: no row, and the history says so.
    policy.change(engine, "stall_threshold", None, actor="dashboard:ada", reason="back")
    assert policy.read(engine).stall_threshold.total_seconds() == 600
    assert policy.history(engine)[0]["new_value"] is None


BAD = [
    ("stall_threshold", -5, "bad_seconds"),
    ("stall_threshold", 10**12, "bad_seconds"),
    ("stall_threshold", "ten minutes", "bad_seconds"),
    ("waiting_threshold", True, "bad_seconds"),
    ("approval", {"threshold": -1}, "bad_approval_threshold"),
    ("approval", {"threshold": 10, "verbs": ["explode"]}, "unknown_verb"),
    ("approval", {"limit": 10}, "bad_approval"),
    ("max_rate", 0, "bad_rate"),
    ("max_rate", 10**9, "bad_rate"),
    ("redact", ["card number"], "bad_path"),
    ("redact", ["a..b"], "bad_path"),
    ("redact", ["*"], "bad_path"),
    ("redact", ["k"] * 0 + [f"key{n}" for n in range(1000)], "bad_redact"),
    ("grants", [{"to": "group:payments", "role": "superuser"}], "unknown_role"),
    ("grants", [{"to": "group:payments", "role": "operator", "classes": ["Payment(.*"]}], "bad_pattern"),
    ("grants", [{"to": "everyone", "role": "operator"}], "bad_grant"),
    ("grants", [{"to": "user:a", "role": "operator", "verbs": ["obliterate"]}], "unknown_verb"),
    ("grants", [{"to": "user:a", "role": "operator", "verbs": ["approve"]}], "unknown_verb"),
    ("grants", [{"to": "user:a", "role": "viewer", "verbs": ["resume"]}], "bad_verbs"),
    ("grants", [{"to": f"user:u{n}", "role": "viewer"} for n in range(600)], "bad_grants"),
    ("thresholds", 5, "unknown_rule"),
]


@pytest.mark.parametrize("key, value, kind", BAD)
def test_a_bad_rule_is_refused_with_its_sentence_and_changes_nothing(engine, key, value, kind):
    before = everything(engine)
    with pytest.raises(policy.PolicyError) as refused:
        policy.change(engine, key, value, actor="dashboard:ada", reason="r")
    assert refused.value.kind == kind
    assert problems.refusal(refused.value).status == 422
    assert everything(engine) == before
    # Control: the same rule takes a good value.
    good = {
        "stall_threshold": 300,
        "waiting_threshold": 3600,
        "approval": {"threshold": 5, "verbs": None},
        "max_rate": 50,
        "redact": ["card_number"],
        "grants": [PAYMENTS_GRANT],
    }
    if key in good:
        policy.change(engine, key, good[key], actor="dashboard:ada", reason="r")


def test_two_admins_changing_one_rule_the_second_is_told(engine):
    read = policy.read(engine).version_of("max_rate")
    policy.change(engine, "max_rate", 100, actor="dashboard:ada", reason="first", expected_version=read)
    before = everything(engine)
    with pytest.raises(policy.ChangedUnderYou) as refused:
        policy.change(engine, "max_rate", 10, actor="dashboard:eve", reason="second", expected_version=read)
    assert "dashboard:ada" in sentence(refused.value) and problems.refusal(refused.value).status == 409
    assert everything(engine) == before


def test_a_change_reaches_another_process_kept_policy_within_its_check(engine, monkeypatch):
    """Each process keeps the policy; another process's change (the
    history moves) is read at the next check, CHECK_EVERY seconds at most:
    on the caller's connection when it has one, else behind the answer
    (the kept policy answers meanwhile), and at once after a statement of
    the caller's saw the history move (seen())."""
    assert policy.current(engine).stall_threshold.total_seconds() == 600
    # Another process's change: written without this process's forget().
    monkeypatch.setattr(policy, "forget", lambda engine=None: None)
    set_rule(engine, "stall_threshold", 120)
    # Not due yet: the kept policy answers, as it will for up to CHECK_EVERY.
    assert policy.current(engine).stall_threshold.total_seconds() == 600
    # Due in a busy process (checked a moment ago), without a connection:
    # the kept policy answers at once, the check runs behind it.
    policy._kept(engine).checked = time.monotonic() - policy.CHECK_EVERY
    assert policy.current(engine).stall_threshold.total_seconds() == 600
    wait_until(
        lambda: policy.current(engine).stall_threshold.total_seconds() == 120,
        timeout=60,
        what="the check behind reading the change",
    )
    # Due, on the caller's connection: read before answering.
    set_rule(engine, "stall_threshold", 180)
    policy._kept(engine).checked = 0.0
    with engine.connect() as conn:
        assert policy.current(engine, conn).stall_threshold.total_seconds() == 180
    # A statement that saw the history move: read before answering, even when not due.
    set_rule(engine, "stall_threshold", 240)
    with engine.connect() as conn:
        policy.seen(engine, policy_rows.marker(conn))
    assert policy.current(engine).stall_threshold.total_seconds() == 240


# --- the Policy page, the API and the command line: an admin only ----------------------


def test_only_an_admin_changes_the_policy_at_every_door(people, engine, database_url):
    ada, otto = people["ada"], people["otto"]
    page = soup(ada.client.get("/policy"))
    assert [node["data-rule"] for node in page.select(".pgbus-policy-rule")] == list(policy.KEYS)
    assert page.select_one("#pgbus-policy-stall_threshold form") is not None
    # An operator reads it and has no form; a post is 403 and changes nothing.
    page = soup(otto.client.get("/policy"))
    assert page.select_one(".pgbus-policy-rule form") is None and page.select_one(".pgbus-policy-read-only")
    before = everything(engine)
    assert otto.post("/policy/stall_threshold", {"value": "300", "reason": "r"}).status_code == 403
    viewer_token, admin_token = token_for(engine, "grafana", "operator"), token_for(engine, "root-bot", "admin")
    app = ada.client.application
    refused = put(Api(app.test_client(), viewer_token), "/policy/stall_threshold", {"value": 300, "reason": "r"})
    assert refused.status_code == 403
    with force_locale("en"):
        expected = problems.refusal(
            permissions.NotPermitted(permissions.token("grafana", "operator", door="api"), "policy")
        ).message
    assert refused.json_body["detail"] == expected
    by_cli = cli(database_url, "policy", "set", "stall_threshold", "300", "--reason", "r", token=viewer_token)
    assert by_cli.exit_code == 1 and "may not change the policy" in by_cli.output
    assert everything(engine) == {**before, "pgbus_web_api_tokens": everything(engine)["pgbus_web_api_tokens"]}
    # A bad value at the page: 422, the sentence beside the field, what was typed kept.
    bad = ada.post("/policy/stall_threshold", {"value": "-5", "reason": "r", "version": "0"})
    assert bad.status_code == 422
    shown = soup(bad)
    assert shown.select_one("#pgbus-policy-stall_threshold-value")["aria-invalid"] == "true"
    assert text_of(shown.select_one("#pgbus-policy-stall_threshold-value-error")) == sentence(
        policy.PolicyError("bad_seconds", "", rule="stall_threshold", low=60, high=604800)
    )
    assert policy.read(engine).rows == {}
    # The same bad value at the API and the command line: the same sentence, nothing stored.
    said = sentence(policy.PolicyError("bad_seconds", "", rule="stall_threshold", low=60, high=604800))
    app = ada.client.application
    by_api = put(Api(app.test_client(), admin_token), "/policy/stall_threshold", {"value": -5, "reason": "r"})
    assert (by_api.status_code, by_api.json_body["detail"]) == (422, said)
    by_cli = cli(database_url, "policy", "set", "stall_threshold", "1e12", "--reason", "r", token=admin_token)
    assert by_cli.exit_code == 2 and said in by_cli.output
    not_json = cli(database_url, "policy", "set", "stall_threshold", "ten", "--reason", "r", token=admin_token)
    assert not_json.exit_code == 2
    assert policy.read(engine).rows == {}
    # The admin: page, API, CLI, each kept with who and why.
    assert ada.post("/policy/stall_threshold", {"value": "300", "reason": "page", "version": "0"}).status_code == 303
    admin = Api(app.test_client(), admin_token)
    assert put(admin, "/policy/max_rate", {"value": 200, "reason": "api"}).status_code == 200
    assert (
        cli(database_url, "policy", "set", "waiting_threshold", "7200", "--reason", "cli", token=admin_token).exit_code
        == 0
    )
    changes = [(c["key"], c["new_value"], c["actor"], c["reason"]) for c in reversed(policy.history(engine))]
    assert changes == [
        ("stall_threshold", 300, "dashboard:ada", "page"),
        ("max_rate", 200, "api:root-bot", "api"),
        ("waiting_threshold", 7200, "cli:root-bot", "cli"),
    ]
    # The page was drawn with version 0: a second post with it is told the rule changed.
    stale = ada.post("/policy/stall_threshold", {"value": "400", "reason": "late", "version": "0"})
    assert stale.status_code == 409 and "dashboard:ada" in text_of(
        soup(stale).select_one("#pgbus-policy-stall_threshold-value-error")
    )
    history = soup(ada.client.get("/policy")).select(".pgbus-policy-change-row")
    assert [row["data-rule"] for row in history] == ["waiting_threshold", "max_rate", "stall_threshold"]
    shown = cli(database_url, "policy", "show", "--json")
    assert {rule["key"]: rule["value"] for rule in map(json.loads, shown.output.splitlines())}["max_rate"] == 200


# --- permissions by class and verb -----------------------------------------------------------


def test_a_grant_lets_the_payments_on_call_resume_orders_and_nothing_else(people, runs, engine, database_url):
    set_rule(
        engine,
        "grants",
        [
            PAYMENTS_GRANT,
            {"to": "token:payments-bot", "role": "operator", "classes": ["OrderWorkflow"], "verbs": ["resume"]},
        ],
    )
    order = paused_on_capture(runs)
    pat, vera = people["pat"], people["vera"]
    page = soup(pat.client.get(f"/workflows/{order}"))
    verbs = {node["data-verb"] for node in page.select("details.pgbus-action")}
    assert "resume" in verbs and "cancel" not in verbs
    # Control: the same page for a viewer without the grant offers nothing.
    assert not soup(vera.client.get(f"/workflows/{order}")).select("details.pgbus-action")
    # The needs-attention group's buttons: its retry (a resume), not its cancel.
    group = soup(pat.client.get("/workflows")).select_one("#pgbus-attention tr.pgbus-attention-group")
    assert {form["data-verb"] for form in group.select("form[data-verb]")} == {"retry"}
    assert soup(vera.client.get("/workflows")).select_one("#pgbus-attention tr.pgbus-attention-group form") is None
    # A cancel at every door: 403, one sentence, nothing changed.
    bot = token_for(engine, "payments-bot", "viewer")
    before = everything(engine)
    by_page = pat.post(f"/workflows/{order}/cancel", {"reason": "no"})
    assert by_page.status_code == 403
    pat_refusal = sentence(permissions.NotPermitted(permissions.user("pat", "viewer"), "cancel", ORDER))
    assert pat_refusal in by_page.get_data(as_text=True)
    api = Api(pat.client.application.test_client(), bot)
    by_api = api.post(f"/runs/{order}/cancel", {"reason": "no"})
    bot_refusal = sentence(
        permissions.NotPermitted(permissions.token("payments-bot", "viewer", door="api"), "cancel", ORDER)
    )
    assert (by_api.status_code, by_api.json_body["detail"]) == (403, bot_refusal)
    by_cli = cli(database_url, "runs", "cancel", order, "--reason", "no", token=bot)
    assert by_cli.exit_code == 1
    assert (
        sentence(permissions.NotPermitted(permissions.token("payments-bot", "viewer", door="cli"), "cancel", ORDER))
        in by_cli.output
    )
    assert everything(engine) == {**before, "pgbus_web_api_tokens": everything(engine)["pgbus_web_api_tokens"]}
    # What the grant allows goes through, recorded as who did it.
    assert pat.post(f"/workflows/{order}/resume", {"reason": "gateway back"}).status_code in (200, 303)
    with engine.connect() as conn:
        [status] = conn.exec_driver_sql("SELECT status FROM pgbus_workflows WHERE workflow_id = %s", (order,)).scalars()
    assert status == states.READY


def test_an_operation_reaching_a_class_the_requester_may_not_act_on_is_refused_at_preview(people, runs, engine):
    set_rule(engine, "grants", [PAYMENTS_GRANT])
    paused_on_capture(runs)
    paused_on_capture(runs, workflow_class=REFUND)
    pat = people["pat"]
    before = everything(engine)
    preview = pat.post("/workflows/operations", {"verb": "resume", "query": "status=paused"})
    assert preview.status_code == 403
    assert sentence(permissions.NotPermitted(permissions.user("pat", "viewer"), "resume", REFUND)) in preview.get_data(
        as_text=True
    )
    # Narrowed to the class the grant names, the preview is offered.
    allowed = pat.post("/workflows/operations", {"verb": "resume", "query": f"status=paused&workflow_class={ORDER}"})
    assert allowed.status_code == 200
    assert everything(engine) == before


# --- the approval no door can skip ---------------------------------------------------------


def test_the_policys_approval_holds_at_every_door_and_the_requester_never_approves(people, runs, engine, database_url):
    set_rule(engine, "approval", {"threshold": 2, "verbs": ["cancel"]})
    for _ in range(3):
        paused_on_capture(runs)
    otto_token = token_for(engine, "otto-bot", "operator")
    # The page (no approval setting in this process at all).
    otto = people["otto"]
    made = otto.post(
        "/workflows/operations",
        {"verb": "cancel", "query": "status=paused", "expected": "3", "confirmed": "1", "reason": "drop them"},
    )
    assert made.status_code == 303
    # The API.
    api = Api(otto.client.application.test_client(), otto_token)
    by_api = api.post("/operations", {"verb": "cancel", "filters": PAUSED, "reason": "drop", "confirmed": True})
    assert by_api.json_body["operation"]["status"] == states.OPERATION_AWAITING_APPROVAL
    # The command line, whatever its options and environment say.
    by_cli = CliRunner().invoke(
        main_group,
        ["bulk", "cancel", "--filter", "status=paused", "--reason", "drop", "--yes", "--database-url", database_url],
        env={"PGBUS_WEB_TOKEN": otto_token, "PGBUS_WEB_APPROVAL_THRESHOLD": "1000000"},
        catch_exceptions=False,
    )
    assert by_cli.exit_code == 1 and "waits for another operator’s approval" in by_cli.output
    with engine.connect() as conn:
        made = operation_rows.recent(conn)
    assert [row["status"] for row in made] == [states.OPERATION_AWAITING_APPROVAL] * 3
    assert [row["requested_by"] for row in made] == ["token:otto-bot", "token:otto-bot", "user:otto"]
    page_op, api_op = made[2], made[1]
    # Its requester cannot approve: not at the page, the API, or the command line under another login.
    before = everything(engine)
    assert otto.post(f"/workflows/operations/{page_op['id']}/approve").status_code == 403
    assert api.post(f"/operations/{api_op['id']}/approve").status_code == 403
    own = cli(database_url, "operations", "approve", str(api_op["id"]), token=otto_token)
    assert own.exit_code == 1 and sentence(operation_record.OwnApproval(api_op)) in own.output
    # Break-glass (no token) never approves; an operator without the approve power neither.
    assert "break-glass" in cli(database_url, "operations", "approve", str(api_op["id"])).output
    other_operator = token_for(engine, "someone", "operator")
    assert cli(database_url, "operations", "approve", str(api_op["id"]), token=other_operator).exit_code == 1
    # An approver whose grant does not reach the class cannot either.
    set_rule(engine, "grants", [{"to": "token:refund-approver", "role": "approver", "classes": [REFUND]}])
    narrow = token_for(engine, "refund-approver", "viewer")
    refused = cli(database_url, "operations", "approve", str(api_op["id"]), token=narrow)
    assert refused.exit_code == 1 and ORDER in refused.output
    changed = everything(engine)
    assert {
        k: v
        for k, v in changed.items()
        if k not in ("pgbus_web_api_tokens", "pgbus_web_policy", "pgbus_web_policy_history", "pgbus_web_change_log")
    } == {
        k: v
        for k, v in before.items()
        if k not in ("pgbus_web_api_tokens", "pgbus_web_policy", "pgbus_web_policy_history", "pgbus_web_change_log")
    }
    # Another approver approves, with a reason; the operation says who asked and who approved.
    olga = people["olga"]
    assert (
        olga.post(f"/workflows/operations/{page_op['id']}/approve", {"reason": "checked the filter"}).status_code == 303
    )
    with engine.connect() as conn:
        approved = operation_rows.find(conn, page_op["id"])
    assert (approved["status"], approved["actor"], approved["approved_by"], approved["approve_reason"]) == (
        states.OPERATION_QUEUED,
        "dashboard:otto",
        "dashboard:olga",
        "checked the filter",
    )
    # A cancel of an operation records who and why, at each door.
    cancelled = api.post(f"/operations/{api_op['id']}/cancel", {"reason": "wrong filter"})
    assert (cancelled.json_body["operation"]["cancelled_by"], cancelled.json_body["operation"]["cancel_reason"]) == (
        "api:otto-bot",
        "wrong filter",
    )
    by_cli = cli(database_url, "operations", "cancel", str(made[0]["id"]), "--reason", "dup", token=otto_token)
    assert by_cli.exit_code == 0
    with engine.connect() as conn:
        row = operation_rows.find(conn, made[0]["id"])
    assert (row["cancelled_by"], row["cancel_reason"]) == ("cli:otto-bot", "dup")


def test_an_unknown_token_is_refused_and_nothing_changes(database_url, runs, engine):
    order = paused_on_capture(runs)
    before = everything(engine)
    refused = cli(database_url, "runs", "cancel", order, "--reason", "r", token="pgbw_not-a-token")
    assert refused.exit_code == 1 and "unknown or revoked" in refused.output
    assert everything(engine) == before


def test_the_max_rate_caps_an_operation_at_every_door(engine, runs):
    set_rule(engine, "max_rate", 50)
    paused_on_capture(runs)
    who = permissions.user("ada", "admin")
    settings = Settings(registry=REGISTRY)
    before = everything(engine)
    with pytest.raises(operation_acts.RateAbovePolicy) as refused:
        operation_acts.start(
            engine, settings, who, run_filters.parse(PAUSED), "cancel", None, reason="r", expected=None, rate=500
        )
    assert "50" in sentence(refused.value) and everything(engine) == before
    # Without a rate it takes the policy's.
    made = operation_acts.start(
        engine, settings, who, run_filters.parse(PAUSED), "cancel", None, reason="r", expected=None
    )
    assert made["rate"] == 50


def test_db_check_reports_a_stored_rule_the_dashboard_cannot_read(engine, database_url):
    clean = cli(database_url, "db", "check")
    assert clean.exit_code == 0 and "Every stored policy rule" in clean.output
    # Written past the checks (by hand): every process reads the default, db check names it.
    with engine.begin() as conn:
        conn.exec_driver_sql(
            "INSERT INTO pgbus_web_policy (key, value, version, changed_at, changed_by, reason)"
            " VALUES ('stall_threshold', '-3', 1, now(), 'psql', 'by hand')"
        )
    policy.forget()
    assert policy.current(engine).stall_threshold.total_seconds() == 600
    found = cli(database_url, "db", "check")
    assert found.exit_code == 1 and "stall_threshold: stall_threshold must be" in found.output


def test_a_grant_for_some_classes_releases_no_lock(people, locks, engine):
    """Locks belong to no class: a grant narrowed to OrderWorkflow does not
    reach them (403, nothing changed); an operator does."""
    set_rule(engine, "grants", [PAYMENTS_GRANT])
    locks.queue()
    key = "pgbus:unique:RebuildSearchIndexJob:42"
    locks.acquire(key)
    before = everything(engine)
    pat = people["pat"]
    assert soup(pat.client.get("/locks")).select_one("form[action*='/locks/']") is None
    assert pat.post("/locks/release", {"lock_key": key}).status_code == 403
    assert everything(engine) == before
    # Control: an operator sees the forms.
    assert soup(people["otto"].client.get("/locks")).select_one("form[action*='/locks/']") is not None


def test_may_reads_the_role_then_the_grants_that_name_the_principal():
    kept = policy.Policy(
        grants=(
            policy.Grant("group:payments", "operator", ("Payment*",), ("resume", "rerun")),
            policy.Grant("token:deploy", "approver", ("Billing?",)),
            policy.Grant("user:dana", "admin", ("*",), ("reveal",)),
        )
    )
    pat = permissions.user("pat", "viewer", groups=("payments",))
    assert permissions.may(pat, "resume", "PaymentWorkflow", kept)
    assert not permissions.may(pat, "cancel", "PaymentWorkflow", kept)  # a verb the grant does not name
    assert not permissions.may(pat, "resume", "OrderWorkflow", kept)  # a class it does not reach
    assert not permissions.may(permissions.user("pat", "viewer"), "resume", "PaymentWorkflow", kept)  # not in the group
    deploy = permissions.token("deploy", "viewer", door="api")
    assert permissions.may(deploy, "approve", "Billing1", kept) and permissions.may(deploy, "cancel", "BillingX", kept)
    assert not permissions.may(deploy, "approve", "Billing10", kept)  # ? is one character
    assert not permissions.may(
        permissions.user("deploy", "viewer"), "approve", "Billing1", kept
    )  # a user, not the token
    dana = permissions.user("dana", "viewer")
    assert permissions.may(dana, "reveal", None, kept) and not permissions.may(dana, "policy", None, kept)
    # Roles hold the powers below them; no grant takes any away.
    assert permissions.may(permissions.user("olga", "approver"), "cancel", "Anything", kept)
    assert not permissions.may(permissions.user("olga", "approver"), "reveal", "Anything", kept)
    assert permissions.may(permissions.user("ada", "admin"), "policy", None, kept)
    # Break-glass may do what the database lets it, but never approve.
    glass = permissions.break_glass("cli")
    assert permissions.may(glass, "cancel", "PaymentWorkflow", kept) and not permissions.may(
        glass, "approve", None, kept
    )
    assert glass.actor == "cli:break-glass" and glass.key == "break-glass"
