"""axe-core (tests/vendor, pinned) on every page in real Chromium, in both
colour schemes, on a desktop and on a phone: 0 violations of WCAG 2.2 A/AA
and axe's best practices. The pages carry the content that made them fail
before: runs in every state (the timeline with failed attempts, a batch,
an audit trail), locks, an operation, its preview dialog, an open action
form and language menu, the sign-in page and the error pages.

Skipped only when /usr/bin/chromium is missing (CI installs it)."""

from __future__ import annotations

from datetime import timedelta

import pytest
import sqlalchemy as sa
from support.action_support import ago, operator_app
from support.auth_support import signed_in_app, write_users
from support.browser import WAIT_MS, axe_violations, requires_chromium, serve
from support.lock_support import Locks
from support.session_support import seed_sessions
from support.web_helpers import every_state, step

from pgbus_web.core import page_reads, policy
from pgbus_web.demo.workflows import REGISTRY
from pgbus_web.rules import states
from pgbus_web.runtime import operation_policy, operation_record

pytestmark = requires_chromium

SCHEMES = ["light", "dark"]
WIDTHS = [1280, 390]


@pytest.fixture
def app(database):
    # A long refresh interval: axe reads a page that stands still.
    # An admin: the Policy page shows its forms too.
    return operator_app(
        database, actor_name=lambda request: "browser", refresh_interval=600, role_of=lambda request: "admin"
    )


@pytest.fixture
def server(app):
    yield from serve(app)


def seeded(app, runs, engine) -> dict[str, str]:
    """Runs in every state, one with retried then failed attempts and an
    audit trail, locks, and a finished operation; the paths to visit."""
    made = every_state(runs)
    policy.change(
        engine,
        "approval",
        {"threshold": 1000, "verbs": ["cancel"]},
        actor="dashboard:alice",
        reason="a second pair of eyes",
    )
    retried = runs.make(
        states.PAUSED,
        step("reserve_stock", "completed", started_at=ago(minutes=20), finished_at=ago(minutes=19)),
        step(
            "capture_payment",
            "failed",
            attempt=1,
            started_at=ago(minutes=18),
            finished_at=ago(minutes=17),
            error_class="TimeoutError",
            error_message="gateway",
        ),
        step(
            "capture_payment",
            "failed",
            attempt=2,
            started_at=ago(minutes=12),
            finished_at=ago(minutes=11),
            error_class="TimeoutError",
            error_message="gateway",
        ),
        paused_at=ago(minutes=11),
        events_=[{"event": "paused", "actor": "dashboard:alice", "step": 1, "reason": "gateway down"}],
    )
    made["completed_other"] = runs.make(
        states.COMPLETED, step("send_receipt", "completed", started_at=ago(minutes=7), finished_at=ago(minutes=6))
    )
    locks = Locks(engine)
    locks.queue()
    locks.acquire("pgbus:unique:RebuildSearchIndexJob:42", age=timedelta(minutes=20))
    created = operation_policy.create(
        engine,
        operation_record.filters_of({"filters": {"status": "paused"}}),
        "resume",
        None,
        reason="gateway back",
        actor="dashboard:alice",
        expected=None,
        registry=REGISTRY,
        thresholds=page_reads.thresholds(app.extensions["pgbus_web"].database.primary),
    )
    # A worker alive, one stopped and one gone holding the running run (the index's banner).
    with engine.begin() as conn:
        gone = (
            conn.execute(
                sa.text(
                    "INSERT INTO pgbus_web_workers (kind, host, pid, heartbeat_at, steps_done, stopped_at) VALUES"
                    " ('worker', 'w1', 10, now() + interval '1 hour', 3, NULL),"
                    " ('serve', NULL, 0, now() - interval '1 hour', -1, now() - interval '1 hour'),"
                    " ('worker', 'w2', 11, now() - interval '5 minutes', 9, NULL) RETURNING id"
                )
            )
            .scalars()
            .all()[-1]
        )
        conn.execute(
            sa.text(
                "UPDATE pgbus_workflow_steps SET worker_id = :w WHERE workflow_id = :id AND status = 'in_progress'"
            ),
            {"w": gone, "id": made["running"]},
        )
    seed_sessions(engine)
    return {
        "index": "/workflows",
        "workers": "/workers",
        "held by a gone worker": f"/workflows?worker={gone}",
        "filtered index": "/workflows?status=paused&workflow_class=OrderWorkflow",
        "bad filter": "/workflows?status=bogus",
        "argument search": "/workflows?arg.order_id=1042&signal.carrier=dhl",
        "argument search refused": "/workflows?arg.order_id=%3E1000",
        "run retried": f"/workflows/{retried}",
        "run paused": f"/workflows/{made['paused_error']}",
        "run batch": f"/workflows/{made['waiting_batch']}",
        "run signal": f"/workflows/{made['waiting_signal']}",
        "run running": f"/workflows/{made['running']}",
        "run completed": f"/workflows/{made['completed']}",
        "run failed": f"/workflows/{made['failed']}",
        "run empty": f"/workflows/{made['no_steps']}",
        "insights": "/workflows/insights/OrderWorkflow",
        "compare": f"/workflows/compare?a={retried}&b={made['completed']}",
        "compare alike": f"/workflows/compare?a={made['completed']}&b={made['completed_other']}",
        "compare refused": f"/workflows/compare?a={retried}&b={retried}",
        "locks": "/locks",
        "operations": "/workflows/operations",
        "operation": f"/workflows/operations/{created['id']}",
        "missing run": "/workflows/no-such-run",
        "policy": "/policy",
        "sessions": "/sessions",
    }


def open_page(chromium, scheme: str, width: int, **options):
    context_ = chromium.new_context(
        color_scheme=scheme, viewport={"width": width, "height": 900}, timezone_id="Europe/Oslo", **options
    )
    page = context_.new_page()
    page.set_default_timeout(WAIT_MS)
    return context_, page


def check(page, name: str, found: dict[str, list[str]]) -> None:
    violations = axe_violations(page)
    if violations:
        found[name] = violations


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("scheme", SCHEMES)
def test_every_page_has_no_axe_violations(chromium, app, server, runs, engine, scheme, width):
    paths = seeded(app, runs, engine)
    context_, page = open_page(chromium, scheme, width)
    found: dict[str, list[str]] = {}
    try:
        for name, path in paths.items():
            page.goto(server + path)
            page.wait_for_load_state("load")
            check(page, name, found)
        # Opened things: an action's form and the language menu on a run page.
        page.goto(server + paths["run paused"])
        page.locator('details.pgbus-action[data-verb="resume"] summary').click()
        check(page, "run paused, resume form open", found)
        page.locator("details.pgbus-lang-menu summary").click()
        check(page, "language menu open", found)
        # A refused policy change: the sentence beside the field.
        page.goto(server + paths["policy"])
        page.locator("#pgbus-policy-stall_threshold details.pgbus-policy-change summary").click()
        page.fill("#pgbus-policy-stall_threshold-value", "-5")
        page.fill("#pgbus-policy-stall_threshold-reason", "faster")
        page.locator("#pgbus-policy-stall_threshold-form button[type=submit]").first.click()
        page.locator("#pgbus-policy-stall_threshold-value-error").wait_for()
        check(page, "policy change refused", found)
        # The operation's preview, as a dialog in the index.
        page.goto(server + paths["index"])
        page.locator('#pgbus-attention form[data-verb="resume"] button').first.click()
        page.locator("dialog#pgbus-operation-dialog[open]").wait_for()
        check(page, "operation preview dialog", found)
    finally:
        context_.close()
    assert found == {}, "\n".join(f"{name}: {line}" for name, lines in found.items() for line in lines)


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("scheme", SCHEMES)
def test_the_sign_in_page_has_no_axe_violations(chromium, database, tmp_path, scheme, width):
    app = signed_in_app(database, write_users(tmp_path / "users.json"))
    for base in serve(app):
        context_, page = open_page(chromium, scheme, width)
        try:
            page.goto(base + "/sign-in")
            found: dict[str, list[str]] = {}
            check(page, "sign-in", found)
            page.fill("input[name=name]", "nobody")
            page.fill("input[name=password]", "wrong")
            page.locator("form button[type=submit]").click()
            page.wait_for_load_state("load")
            check(page, "sign-in refused", found)
        finally:
            context_.close()
        assert found == {}, "\n".join(f"{name}: {line}" for name, lines in found.items() for line in lines)
