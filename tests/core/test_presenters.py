"""The presenters: a run's badge, tone and next sentence in every status and
stuck reason, the audit sentence, the bulk confirm, the Resume label, the
safe-URL rule and the subject link, JSON values, the action buttons, and
the macros that render them. No database: rows are plain dicts."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from bs4 import BeautifulSoup
from jinja2 import Environment, FileSystemLoader
from markupsafe import Markup

import pgbus_web.web
from pgbus_web import i18n
from pgbus_web.core.words import presenters, verb_labels
from pgbus_web.core.words.presenters import RunState
from pgbus_web.rules import states
from pgbus_web.runtime.plan import ActionPlan
from pgbus_web.web.drawing import template_names

NOW = datetime(2026, 1, 5, 14, 5, 3, tzinfo=UTC)
STALL = timedelta(minutes=10)
WAITING = timedelta(hours=24)
TEMPLATES = Path(pgbus_web.web.__file__).resolve().parent / "templates"


def ago(**delta) -> datetime:
    return NOW - timedelta(**delta)


def ahead(**delta) -> datetime:
    return NOW + timedelta(**delta)


def plain(text) -> str:
    # CLDR puts a narrow no-break space before AM/PM.
    return str(text).replace("\u202f", " ")


def make_run(status, *, step=None, batch=None, **columns):
    run = {
        "workflow_id": "wf-1",
        "workflow_class": "OrderWorkflow",
        "status": status,
        "current_step": (step or {}).get("step_name"),
        "subject_type": None,
        "subject_id": None,
        "paused_at": None,
        "started_at": ago(hours=1),
        "finished_at": None,
        "created_at": ago(hours=1),
        "updated_at": ago(hours=1),
        "step": step,
        "batch": batch,
    }
    run.update(columns)
    return run


def make_step(name, status, **columns):
    step = {
        "id": 1,
        "step_name": name,
        "status": status,
        "attempt": 1,
        "scheduled_at": None,
        "started_at": None,
        "finished_at": None,
        "wait_for": None,
        "waiting_since": None,
        "timeout_at": None,
        "batch_id": None,
        "error_class": None,
        "error_message": None,
        "created_at": ago(hours=1),
    }
    step.update(columns)
    return step


def state_of(run, **kwargs) -> RunState:
    return presenters.run_state(run, now=NOW, stall_threshold=STALL, waiting_threshold=kwargs.get("waiting", WAITING))


def sentence(run, state=None, **kwargs) -> BeautifulSoup:
    state = state or state_of(run)
    html = presenters.next_sentence(run, state, now=NOW, locale="en", tz="UTC", **kwargs)
    assert isinstance(html, Markup)
    return BeautifulSoup(str(html), "html.parser")


def text_of(run, **kwargs) -> str:
    return plain(sentence(run, **kwargs).get_text())


# --- every status and every stuck reason ------------------------------------

CASES = {
    "due later (a timer)": (
        make_run("ready", step=make_step("send_tips", "scheduled", scheduled_at=ahead(days=1))),
        ("ready", "gray", "due", None),
        "Due in 1 day (Jan 6, 2:05 PM) to run send_tips",
    ),
    "due later today": (
        make_run("ready", step=make_step("capture_payment", "scheduled", scheduled_at=ahead(minutes=30))),
        ("ready", "gray", "due", None),
        "Due in 30 minutes (2:35 PM) to run capture_payment",
    ),
    "due, waiting for a worker": (
        make_run("ready", step=make_step("capture_payment", "scheduled", scheduled_at=ago(minutes=2))),
        ("ready", "gray", "queued", None),
        "Queued to run capture_payment, due 2 minutes ago",
    ),
    "overdue": (
        make_run("ready", step=make_step("capture_payment", "scheduled", scheduled_at=ago(minutes=12))),
        ("overdue", "red", "overdue", states.OVERDUE),
        "Overdue: capture_payment was due 12 minutes ago",
    ),
    "running": (
        make_run("running", step=make_step("capture_payment", "in_progress", started_at=ago(minutes=3))),
        ("running", "blue", "running", None),
        "Running capture_payment since 3 minutes ago",
    ),
    "running past the stall threshold": (
        make_run("running", step=make_step("capture_payment", "in_progress", started_at=ago(minutes=25))),
        ("stalled", "red", "running_stalled", None),
        "Stalled: capture_payment has been running since 25 minutes ago",
    ),
    "waiting for a signal": (
        make_run(
            "waiting",
            step=make_step("await_profile", "waiting", wait_for="profile_completed", waiting_since=ago(hours=3)),
        ),
        ("waiting", "yellow", "waiting_signal", None),
        "Waiting for signal profile_completed since 3 hours ago",
    ),
    "waiting for a signal with a deadline": (
        make_run(
            "waiting",
            step=make_step(
                "await_shipment",
                "waiting",
                wait_for="shipment_confirmed",
                waiting_since=ago(hours=3),
                timeout_at=ahead(days=3),
            ),
        ),
        ("waiting", "yellow", "waiting_signal_timeout", None),
        "Waiting for signal shipment_confirmed since 3 hours ago, times out in 3 days (Jan 8, 2:05 PM)",
    ),
    "waiting for a batch": (
        make_run(
            "waiting",
            step=make_step("notify_vendors", "waiting", batch_id="batch-7", waiting_since=ago(minutes=4)),
            batch={
                "batch_id": "batch-7",
                "description": "OrderWorkflow#notify_vendors",
                "total_jobs": 12,
                "completed_jobs": 6,
                "failed_jobs": 1,
                "discarded_jobs": 0,
            },
        ),
        ("waiting", "yellow", "waiting_batch", None),
        "Waiting for batch OrderWorkflow#notify_vendors (7 of 12 jobs done)",
    ),
    "waiting for a batch with a deadline": (
        make_run(
            "waiting",
            step=make_step(
                "notify_vendors", "waiting", batch_id="batch-7", waiting_since=ago(minutes=4), timeout_at=ahead(hours=2)
            ),
            batch={"description": "OrderWorkflow#notify_vendors", "total_jobs": 3, "completed_jobs": 1},
        ),
        ("waiting", "yellow", "waiting_batch_timeout", None),
        "Waiting for batch OrderWorkflow#notify_vendors (1 of 3 jobs done), times out in 2 hours (4:05 PM)",
    ),
    "waiting on a step with a deadline": (
        make_run(
            "waiting",
            step=make_step("await_profile", "waiting", waiting_since=ago(minutes=4), timeout_at=ahead(minutes=50)),
        ),
        ("waiting", "yellow", "waiting_timeout", None),
        "Waiting on await_profile since 4 minutes ago, times out in 50 minutes (2:55 PM)",
    ),
    "waiting for a batch not found": (
        make_run(
            "waiting", step=make_step("notify_vendors", "waiting", batch_id="batch-9", waiting_since=ago(minutes=4))
        ),
        ("waiting", "yellow", "waiting_batch_unknown", None),
        "Waiting for batch batch-9 since 4 minutes ago",
    ),
    "waiting on nothing named": (
        make_run("waiting", step=make_step("await_profile", "waiting", waiting_since=ago(minutes=4))),
        ("waiting", "yellow", "waiting", None),
        "Waiting on await_profile since 4 minutes ago",
    ),
    "waiting longer than the waiting threshold": (
        make_run(
            "waiting",
            step=make_step("await_profile", "waiting", wait_for="profile_completed", waiting_since=ago(days=2)),
        ),
        ("overdue", "red", "waiting_signal", states.WAITING_OVERDUE),
        "Waiting for signal profile_completed since 2 days ago",
    ),
    "paused after an error": (
        make_run(
            "paused",
            paused_at=ago(minutes=5),
            step=make_step("capture_payment", "failed", attempt=3, error_class="TimeoutError"),
        ),
        ("paused", "yellow", "paused_error", states.PAUSED_ERROR),
        "Paused on capture_payment after TimeoutError 5 minutes ago",
    ),
    "paused after a stall": (
        make_run(
            "paused",
            paused_at=ago(minutes=5),
            step=make_step("capture_payment", "failed", error_class=states.STEP_STALLED_ERROR),
        ),
        ("stalled", "red", "stalled", states.STALLED),
        "Stalled: capture_payment stopped responding and was paused 5 minutes ago",
    ),
    "paused after a wait timed out": (
        make_run(
            "paused",
            paused_at=ago(minutes=5),
            step=make_step("await_shipment", "failed", error_class=states.WAIT_TIMED_OUT_ERROR),
        ),
        ("paused", "yellow", "paused_timed_out", states.PAUSED_ERROR),
        "Paused on await_shipment: the wait timed out 5 minutes ago",
    ),
    "paused by an operator": (
        make_run("paused", paused_at=ago(minutes=5), step=make_step("await_profile", "waiting")),
        ("paused", "yellow", "paused", states.PAUSED_MANUAL),
        "Paused on await_profile 5 minutes ago",
    ),
    "completed": (
        make_run("completed", finished_at=ago(days=2), step=make_step("send_receipt", "completed")),
        ("completed", "green", "completed", None),
        "Completed 2 days ago",
    ),
    "failed": (
        make_run(
            "failed",
            finished_at=ago(hours=1),
            step=make_step("issue_refund", "failed", error_class="ValueError"),
        ),
        ("failed", "red", "failed", None),
        "Failed on issue_refund after ValueError 1 hour ago",
    ),
    "failed without an error class": (
        make_run("failed", finished_at=ago(hours=1), step=None),
        ("failed", "red", "failed_plain", None),
        "Failed 1 hour ago",
    ),
    "cancelled": (
        make_run("cancelled", finished_at=ago(hours=3), step=make_step("capture_payment", "cancelled")),
        ("cancelled", "gray", "cancelled", None),
        "Cancelled 3 hours ago",
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_run_state(name):
    run, (badge, tone, next_key, stuck), _ = CASES[name]
    state = state_of(run)
    assert (state.badge, state.tone, state.next_key, state.stuck) == (badge, tone, next_key, stuck)


@pytest.mark.parametrize("name", list(CASES))
def test_next_sentence(name):
    run, _, text = CASES[name]
    assert text_of(run) == text


def test_every_run_status_has_a_case():
    covered = {CASES[name][0]["status"] for name in CASES}
    assert covered == set(states.RUN)


def test_every_stuck_reason_has_a_case():
    covered = {CASES[name][1][3] for name in CASES} - {None}
    assert covered == set(states.STUCK_REASONS)


def test_overdue_is_strictly_past_the_threshold():
    run = make_run("ready", step=make_step("capture_payment", "scheduled", scheduled_at=ago(minutes=10)))
    assert state_of(run).badge == "ready"


def test_waiting_with_a_deadline_is_never_waiting_overdue():
    step = make_step("await_shipment", "waiting", wait_for="x", waiting_since=ago(days=2), timeout_at=ahead(days=1))
    assert state_of(make_run("waiting", step=step)).badge == "waiting"


def test_waiting_overdue_needs_a_waiting_threshold():
    step = make_step("await_profile", "waiting", wait_for="x", waiting_since=ago(days=2))
    state = presenters.run_state(make_run("waiting", step=step), now=NOW, stall_threshold=STALL)
    assert (state.badge, state.stuck) == ("waiting", None)


def test_waiting_without_waiting_since_is_not_overdue():
    # The needs-attention groups leave such a run out (nothing says how long
    # it has waited), so its badge does too, however old its updated_at.
    step = make_step("await_profile", "waiting", wait_for="x")
    state = state_of(make_run("waiting", step=step, updated_at=ago(days=30)))
    assert (state.badge, state.stuck) == ("waiting", None)


def test_unknown_status_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown run status 'lost'"):
        state_of(make_run("lost"))


def test_names_render_as_code_and_moments_as_time():
    soup = sentence(CASES["paused after an error"][0])
    assert [code.get_text() for code in soup.select("code.pgbus-code")] == ["capture_payment"]
    assert soup.find("time")["datetime"] == "2026-01-05T14:00:03Z"


def test_signal_name_renders_as_code():
    soup = sentence(CASES["waiting for a signal"][0])
    assert soup.select_one("code.pgbus-code").get_text() == "profile_completed"


def test_due_time_is_a_clock_time_tag():
    time = sentence(CASES["due later today"][0]).find("time")
    assert plain(time.get_text()) == "in 30 minutes (2:35 PM)"
    assert time["datetime"] == "2026-01-05T14:35:03Z"


def test_a_batch_is_named_as_plain_code():
    soup = sentence(CASES["waiting for a batch"][0])
    assert soup.find("a") is None
    assert soup.select_one("code").get_text() == "OrderWorkflow#notify_vendors"


@pytest.mark.parametrize(
    ("done", "total", "words"),
    [(0, 0, "0 of 0 jobs done"), (1, 1, "1 of 1 job done"), (1, 2, "1 of 2 jobs done"), (3, 5, "3 of 5 jobs done")],
)
def test_batch_progress_plural_forms(done, total, words):
    run = make_run(
        "waiting",
        step=make_step("notify_vendors", "waiting", batch_id="b"),
        batch={"description": "fan-out", "total_jobs": total, "completed_jobs": done},
    )
    assert text_of(run) == f"Waiting for batch fan-out ({words})"


def test_next_sentence_escapes_names_and_error_class():
    hostile = "<script>alert(1)</script>"
    run = make_run("paused", paused_at=ago(minutes=5), step=make_step(hostile, "failed", error_class=hostile))
    html = str(presenters.next_sentence(run, state_of(run), now=NOW))
    assert "<script>" not in html
    assert html.count("&lt;script&gt;") == 2


def test_signal_name_is_escaped():
    run = make_run("waiting", step=make_step("s", "waiting", wait_for="<img src=x onerror=alert(1)>"))
    html = str(presenters.next_sentence(run, state_of(run), now=NOW))
    assert "<img" not in html
    assert "&lt;img src=x onerror=alert(1)&gt;" in html


# --- the audit trail --------------------------------------------------------


def test_event_sentence_with_reason():
    event = {"event": "resumed", "actor": "dashboard:alice", "reason": "SMTP fixed"}
    assert presenters.event_sentence(event) == "Resumed by dashboard:alice: SMTP fixed"


def test_event_sentence_with_step_and_attempt():
    event = {"event": "step_failed", "actor": "system", "step_name": "capture", "attempt": 2}
    assert presenters.event_sentence(event) == "Step failed by system (capture #2)"


def test_event_sentence_with_step_without_attempt():
    event = {"event": "signal_received", "actor": "app", "step_name": "await_shipment", "attempt": None}
    assert presenters.event_sentence(event) == "Signal received by app (await_shipment)"


def test_event_sentence_ignores_a_blank_reason():
    assert presenters.event_sentence({"event": "paused", "actor": "cli", "reason": "  "}) == "Paused by cli"


def test_unknown_event_reads_humanized():
    assert presenters.event_sentence({"event": "vendor_pinged", "actor": "system"}) == "Vendor pinged by system"


@pytest.mark.parametrize("event", states.EVENTS)
def test_every_known_event_has_words(event):
    assert "pgbus." not in presenters.event_sentence({"event": event, "actor": "system"})


# --- bulk confirm and resume label -------------------------------------------


@pytest.mark.parametrize(
    ("count", "text"),
    [
        (0, "Resume all 0 runs paused at capture on TimeoutError?"),
        (1, "Resume the 1 run paused at capture on TimeoutError?"),
        (2, "Resume all 2 runs paused at capture on TimeoutError?"),
        (5, "Resume all 5 runs paused at capture on TimeoutError?"),
    ],
)
def test_bulk_confirm_plural_forms(count, text):
    group = {"step_name": "capture", "error_class": "TimeoutError", "count": count}
    assert verb_labels.bulk_confirm("resume", group) == text


def test_bulk_confirm_without_error_class():
    group = {"step_name": "capture_payment", "error_class": None, "count": 3}
    assert verb_labels.bulk_confirm("skip", group) == "Skip capture_payment for all 3 runs stuck there?"


@pytest.mark.parametrize("action", verb_labels.BULK_VERBS)
def test_every_bulk_action_has_words(action):
    for error in (None, "TimeoutError"):
        text = verb_labels.bulk_confirm(action, {"step_name": "s", "error_class": error, "count": 2})
        assert "pgbus." not in text and text.endswith("?")


def test_bulk_confirm_for_a_verb_without_a_bulk_form():
    with pytest.raises(ValueError, match="no bulk confirm for 'rerun'"):
        verb_labels.bulk_confirm("rerun", {"step_name": "s", "count": 1})


def test_resume_label_without_a_plan():
    assert verb_labels.resume_label(None) == "Resume"


@pytest.mark.parametrize(
    ("plan", "label"),
    [
        (ActionPlan("retry", "capture_payment"), "Retry capture_payment"),
        (ActionPlan("continue", "notify_vendors"), "Continue with notify_vendors"),
        (ActionPlan("resume", "await_shipment"), "Resume await_shipment"),
        ({"action": "retry", "step": "capture"}, "Retry capture"),
    ],
)
def test_resume_label_from_the_plan(plan, label):
    assert verb_labels.resume_label(plan) == label


def test_resume_label_finishing_names_the_current_step():
    assert verb_labels.resume_label(ActionPlan("finish", None), current_step="send_receipt") == (
        "Finish after send_receipt"
    )


def test_resume_label_for_an_unknown_plan_action():
    assert verb_labels.resume_label({"action": "teleport", "step": "x"}) == "Resume"


# --- safe URLs and the subject link -------------------------------------------


@pytest.mark.parametrize(
    "url",
    [
        "https://shop.example/orders/1042",
        "http://shop.example",
        "HTTPS://Shop.Example/orders?id=1",
        "https://user@shop.example:8443/x#frag",
        "/orders/1042",
        "/",
        # RFC 3986 allows these, as Ruby's URI.parse does:
        "/orders/1042?tab=steps&x=a%20b#top",
        "/orders/~me/(1)/!$&'*+,;=:@",
        "https://shop.example/%E2%80%AE",
        "http://[::1]:8080/x",
        "http://[v1.fe]/",
        "https://shop.example:/x",
        "https://xn--mnchen-3ya.example/",
    ],
)
def test_safe_url_accepts(url):
    assert presenters.safe_url(url) == url


def test_safe_url_strips_surrounding_whitespace():
    assert presenters.safe_url("  /orders/1042 \n") == "/orders/1042"
    assert presenters.safe_url("\x00https://shop.example/x\t") == "https://shop.example/x"


@pytest.mark.parametrize(
    "url",
    [
        None,
        "",
        "   ",
        "javascript:alert(1)",
        "JaVaScRiPt:alert(1)",
        " javascript:alert(1)",
        "data:text/html,<script>alert(1)</script>",
        "//evil.example/path",
        "/\\evil.example",
        "orders/1042",
        "./orders",
        "../orders",
        "https:///no-host",
        "http:no-host",
        "https://",
        "ftp://files.example/x",
        "mailto:ops@example.com",
        "/\t/evil.example",
        "/\n/evil.example",
        "https://good.example\\@evil.example",
        "http://exa mple.com",
        "http://[::1",
        # Not RFC 3986: refused, as the reference's URI.parse refuses them.
        "https://münchen.example/",
        "https://shop.example/ä",
        "https://shop.example/\u202eevil",
        "https://shop.example/?q=a b",
        "https://shop.example/<x>",
        "https://shop.example/100%",
        "https://shop.example/%zz",
        "https://shop.example:80a/",
        "http://[zz]/",
        "http://:80/",
        "https://shop.example/a\u200eb",
        # A same-site path is held to the same characters (stricter than the
        # reference, which links a path without parsing it): no bidi control,
        # no non-ASCII, no backslash reaches an href.
        "/orders/\u202e1042",
        "/orders/ü",
        "/orders/a\\b",
        "/orders/a b",
        "/orders/\x00x",
        "/a%zz",
        "/orders/\u061c",
        "\u00a0/orders/1042",
    ],
)
def test_safe_url_refuses(url):
    assert presenters.safe_url(url) is None


def test_subject_link_safe():
    run = make_run("completed", subject_type="Order", subject_id="1042")
    assert presenters.subject_link(run, lambda kind, id_: f"/orders/{id_}") == ("Order 1042", "/orders/1042")


def test_subject_link_unsafe_url_is_text():
    run = make_run("completed", subject_type="Order", subject_id="1042")
    assert presenters.subject_link(run, lambda kind, id_: "javascript:alert(1)") == ("Order 1042", None)


def test_subject_link_without_a_builder():
    run = make_run("completed", subject_type="Order", subject_id="1042")
    assert presenters.subject_link(run, None) == ("Order 1042", None)


def test_subject_link_without_a_subject_is_the_dash():
    assert presenters.subject_link(make_run("completed"), lambda *a: "/x") == ("—", None)


def test_subject_link_builder_that_raises_is_logged_and_plain(caplog):
    def broken(kind, id_):
        raise RuntimeError("orders service down")

    run = make_run("completed", subject_type="Order", subject_id="1042")
    with caplog.at_level(logging.ERROR, logger="pgbus_web.core.words.presenters"):
        assert presenters.subject_link(run, broken) == ("Order 1042", None)
    [record] = caplog.records
    assert record.levelno == logging.ERROR
    assert "subject_url raised RuntimeError: orders service down" in record.getMessage()


# --- JSON values and buttons --------------------------------------------------


@pytest.mark.parametrize(
    ("value", "text"),
    [
        ({"order_id": 1042, "tags": ["a", "b"]}, '{"order_id":1042,"tags":["a","b"]}'),
        ([1, {"x": None}], '[1,{"x":null}]'),
        ({"name": "Åse"}, '{"name":"Åse"}'),
        (None, ""),
        (True, "true"),
        (False, "false"),
        (4599, "4599"),
        (1.5, "1.5"),
        ("shipped", "shipped"),
    ],
)
def test_json_value(value, text):
    assert presenters.json_value(value) == text


# --- the macros ------------------------------------------------------------------


@pytest.fixture(scope="module")
def macros():
    env = Environment(loader=FileSystemLoader(str(TEMPLATES)), autoescape=True)
    template_names.add_macro_global(env)

    def render(call: str, **context) -> BeautifulSoup:
        template = env.from_string('{% import "pgbus_web/_macros.html" as m %}' + call)
        return BeautifulSoup(template.render(**context), "html.parser")

    return render


@pytest.mark.parametrize("name", ["overdue", "paused after an error", "completed", "running"])
def test_run_badge_macro(macros, name):
    run, (badge, tone, _, _), _ = CASES[name]
    span = macros("{{ m.run_badge(state) }}", state=state_of(run)).find("span")
    assert span["class"] == ["pgbus-badge", f"pgbus-tone-{tone}"]
    assert span.get_text() == i18n.t(f"pgbus.workflows.statuses.{badge}")


@pytest.mark.parametrize("status", states.STEP)
def test_step_badge_macro(macros, status):
    span = macros("{{ m.step_badge(status) }}", status=status).find("span")
    assert span["class"] == ["pgbus-badge", f"pgbus-tone-{presenters.STEP_TONES[status]}"]
    assert "pgbus." not in span.get_text()


@pytest.mark.parametrize("status", states.SIGNAL)
def test_signal_badge_macro(macros, status):
    span = macros("{{ m.signal_badge(status) }}", status=status).find("span")
    assert span["class"] == ["pgbus-badge", f"pgbus-tone-{presenters.SIGNAL_TONES[status]}"]


def test_time_tag_macro(macros):
    # The exact moment is written out, not only in the title.
    time = macros("{{ m.time_tag(moment, now=now) }}", moment=ago(minutes=5), now=NOW).find("time")
    assert time.get_text().replace("\u202f", " ") == "5 minutes ago (2:00:03 PM)"
    assert time["datetime"] == "2026-01-05T14:00:03Z"
    assert "UTC" in time["title"]


def test_subject_macro_link(macros):
    run = make_run("completed", subject_type="Order", subject_id="1042")
    link = macros("{{ m.subject(run, url) }}", run=run, url=lambda k, i: f"/orders/{i}").find("a")
    assert (link["href"], link.get_text()) == ("/orders/1042", "Order 1042")


def test_subject_link_macro_alias_and_unsafe_url(macros):
    run = make_run("completed", subject_type="Order", subject_id="<b>1042</b>")
    soup = macros("{{ m.subject_link(run, url) }}", run=run, url=lambda k, i: "javascript:alert(1)")
    assert soup.find("a") is None and soup.find("b") is None
    assert soup.get_text() == "Order <b>1042</b>"


def test_next_sentence_macro(macros):
    run = CASES["waiting for a signal"][0]
    soup = macros("{{ m.next_sentence(run, state, now=now) }}", run=run, state=state_of(run), now=NOW)
    span = soup.select_one("span.pgbus-next-sentence")
    assert span["data-next"] == "waiting_signal"
    assert span.get_text() == "Waiting for signal profile_completed since 3 hours ago"


def test_event_sentence_macro_escapes_actor_and_reason(macros):
    event = {"event": "resumed", "actor": "<script>a()</script>", "reason": "<script>b()</script>"}
    soup = macros("{{ m.event_sentence(event) }}", event=event)
    assert soup.find("script") is None
    assert soup.get_text() == "Resumed by <script>a()</script>: <script>b()</script>"


def test_event_sentence_macro_escapes_step_name(macros):
    event = {"event": "step_failed", "actor": "system", "step_name": "<i>x</i>", "attempt": 1}
    soup = macros("{{ m.event_sentence(event) }}", event=event)
    assert soup.find("i") is None
    assert soup.get_text() == "Step failed by system (<i>x</i> #1)"


def test_timeline_macro(macros):
    step = make_step("reserve_stock", "completed", scheduled_at=ago(minutes=9), started_at=ago(minutes=8),
                     finished_at=ago(minutes=7), created_at=ago(minutes=9))  # fmt: skip
    soup = macros("{{ m.timeline(steps, [], now=now) }}", steps=[step], now=NOW)
    assert soup.select_one("figure.pgbus-timeline-figure svg.pgbus-timeline") is not None


def test_timeline_macro_without_steps_renders_nothing(macros):
    assert macros("{{ m.timeline([], [], now=now) }}", now=NOW).get_text() == ""
