"""Names holding bidirectional controls (U+202E RIGHT-TO-LEFT OVERRIDE and
its kin) are shown isolated wherever they appear: in HTML inside <bdi>
or an element with dir="auto" that holds the name alone, in plain text
(a title, a confirm dialog, a tooltip) between U+2068 and U+2069; and a
subject whose id holds one is never linked."""

from __future__ import annotations

import pytest
from bs4 import NavigableString
from support.action_support import Browser, ago, operator_app
from support.web_helpers import soup, step, text_of

from pgbus_web import bidi
from pgbus_web.rules import states

RLO, LRE, RLI, PDI, LRM, ALM = "\u202e", "\u202a", "\u2067", "\u2069", "\u200e", "\u061c"

NAMES = {
    "workflow_id": f"run-{RLO}1",
    "workflow_class": f"Order{RLO}Workflow",
    "step": f"cap{RLO}ture",
    "error_class": f"Time{LRE}outError",
    "error_message": f"gateway {RLO}timeout",
    "signal": f"ship{RLI}ped",
    "subject_type": f"Or{ALM}der",
    "subject_id": f"10{RLO}42",
    "actor": f"dashboard:{RLO}eve",
    "reason": f"{PDI}{RLO}fixed it",  # a stray PDI must not close the isolate early
    "idempotency_key": f"key{LRM}1",
}
# Where plain text shows: these attributes are read out or shown as tooltips.
TEXT_ATTRIBUTES = ("title", "aria-label", "hx-confirm", "alt", "placeholder")


def isolated_in_text(text: str) -> bool:
    """Every control in *text* sits inside an FSI/LRI/RLI … PDI isolate."""
    depth = 0
    for char in text:
        if char in (bidi.FSI, bidi.LRI, bidi.RLI):
            depth += 1
        elif char == bidi.PDI:
            depth = max(depth - 1, 0)
        elif char in bidi.CONTROLS and depth == 0:
            return False
    return True


def shown_names() -> set[str]:
    """The names as a page may hold them alone in an element: whole, as
    the index's short run id, or balanced (bidi.isolate_text's inside)."""
    names = set(NAMES.values())
    return names | {name[:8] for name in names} | {bidi.isolate_text(name)[1:-1] for name in names}


def assert_isolated(html: str) -> int:
    """Every control in the page's text is in a <bdi> or dir element that
    holds one name alone, or inside a plain-text isolate; the same for the
    attributes people read. Returns how many names were checked."""
    page = soup_of(html)
    checked = 0
    for node in page.find_all(string=True):
        if not isinstance(node, NavigableString) or bidi.CONTROLS.isdisjoint(node):
            continue
        checked += 1
        holder = node.parent
        while holder is not None and holder.name not in ("bdi", "[document]") and not holder.has_attr("dir"):
            holder = holder.parent
        if holder is not None and holder.name != "[document]":
            assert holder.get_text() in shown_names() or isolated_in_text(holder.get_text()), repr(holder)
        else:
            assert isolated_in_text(str(node)), repr(str(node))
    for element in page.find_all(True):
        for name in TEXT_ATTRIBUTES:
            value = element.get(name)
            if isinstance(value, str) and not bidi.CONTROLS.isdisjoint(value):
                checked += 1
                assert isolated_in_text(value), (element.name, name, repr(value))
    return checked


def soup_of(html: str):
    from bs4 import BeautifulSoup

    return BeautifulSoup(html, "html.parser")


@pytest.fixture
def subject_app(database):
    return operator_app(database, subject_url=lambda kind, id_: f"/admin/{kind}/{id_}")


@pytest.fixture
def operator(subject_app):
    return Browser(subject_app.test_client())


@pytest.fixture
def odd_names(runs):
    return runs.make(
        states.PAUSED,
        step(
            NAMES["step"],
            "failed",
            error_class=NAMES["error_class"],
            error_message=NAMES["error_message"],
            finished_at=ago(minutes=5),
            wait_for=NAMES["signal"],
        ),
        workflow_id=NAMES["workflow_id"],
        workflow_class=NAMES["workflow_class"],
        subject=(NAMES["subject_type"], NAMES["subject_id"]),
        idempotency_key=NAMES["idempotency_key"],
        paused_at=ago(minutes=5),
        events_=[{"event": "paused", "actor": NAMES["actor"], "reason": NAMES["reason"], "step": 0}],
        signals_=[{"name": NAMES["signal"], "payload": {}, "idempotency_key": NAMES["idempotency_key"]}],
    )


def test_the_pages_isolate_every_name(operator, odd_names):
    pages = {
        "run": f"/workflows/{odd_names}",
        "index": "/workflows",
        "filtered": f"/workflows?workflow_class={NAMES['workflow_class']}&step={NAMES['step']}",
        "insights": f"/workflows/insights/{NAMES['workflow_class']}",
    }
    for name, url in pages.items():
        response = operator.client.get(url)
        assert response.status_code == 200, name
        html = response.get_data(as_text=True)
        assert RLO in html, name  # the names are shown as they are
        assert assert_isolated(html) > 0, name


def test_the_run_page_wraps_each_kind_of_name(operator, odd_names):
    page = soup(operator.client.get(f"/workflows/{odd_names}"))
    holders = {text_of(node) for node in page.select("bdi, [dir]")}
    for key in (
        "workflow_id",
        "workflow_class",
        "step",
        "error_class",
        "error_message",
        "signal",
        "subject_type",
        "subject_id",
        "actor",
        "idempotency_key",
    ):
        assert NAMES[key] in holders or bidi.isolate_text(NAMES[key]) in holders, key
    # The stray PDI in the reason is dropped inside its isolate, nothing else.
    audit = page.select_one("#pgbus-run-audit .pgbus-event-sentence")
    assert f"{RLO}fixed it" in {text_of(node) for node in audit.select("bdi")}
    # The page title is plain text: isolated there too.
    assert isolated_in_text(page.select_one("title").get_text())
    assert bidi.isolate_text(NAMES["workflow_class"]) in page.select_one("title").get_text()


def test_a_subject_whose_id_holds_a_control_is_not_linked(operator, runs, odd_names):
    plain = runs.make(
        states.PAUSED,
        step("capture", "failed", finished_at=ago(minutes=1)),
        subject=("Order", "1042"),
        paused_at=ago(minutes=1),
    )
    odd_page = soup(operator.client.get(f"/workflows/{odd_names}"))
    assert odd_page.select_one("a.pgbus-subject") is None
    subject = odd_page.select_one(".pgbus-subject")
    assert [text_of(node) for node in subject.select("bdi")] == [NAMES["subject_type"], NAMES["subject_id"]]
    # Control: a plain subject is linked.
    plain_page = soup(operator.client.get(f"/workflows/{plain}"))
    assert plain_page.select_one("a.pgbus-subject")["href"] == "/admin/Order/1042"


@pytest.mark.parametrize("htmx", [True, False], ids=["htmx", "plain"])
def test_the_message_after_an_action_isolates_the_names(operator, odd_names, htmx):
    response = operator.post(f"/workflows/{odd_names}/signals", {"name": NAMES["signal"]}, htmx=htmx)
    if not htmx:
        assert response.status_code == 303
        response = operator.client.get(response.headers["Location"])
    html = response.get_data(as_text=True)
    messages = soup(response).select_one("#pgbus-messages")
    assert bidi.isolate_text(NAMES["signal"])[1:-1] in {node.get_text() for node in messages.select("bdi")}
    assert assert_isolated(html) > 0
    # A refusal names the class: isolated too.
    refused = operator.post(f"/workflows/{odd_names}/skip", {}, htmx=htmx)
    assert refused.status_code == 409
    assert NAMES["workflow_class"] in {node.get_text() for node in soup(refused).select("#pgbus-messages bdi")}


def test_the_bulk_confirmation_isolates_the_names(operator, odd_names):
    group = {
        "workflow_class": NAMES["workflow_class"],
        "step_name": NAMES["step"],
        "reason": "paused_error",
        "error_class": NAMES["error_class"],
    }
    index = soup(operator.client.get("/workflows"))
    # The group's question is its buttons' title; the operation's preview
    # shows the group's filter as chips, each name in a <bdi>.
    confirms = [button["title"] for button in index.select("form.pgbus-group-action button")]
    assert confirms
    for text in confirms:
        assert bidi.isolate_text(NAMES["step"]) in text and isolated_in_text(text)
    response = operator.post("/workflows/bulk/cancel", group)
    assert response.status_code == 200
    chips = soup(response).select_one("dialog .pgbus-operation-filters")
    assert {NAMES["step"], NAMES["error_class"]} <= {text_of(node) for node in chips.select("bdi")}
    assert assert_isolated(response.get_data(as_text=True)) > 0


def test_names_without_controls_are_left_plain(operator, runs):
    workflow_id = runs.make(
        states.PAUSED,
        step("capture", "failed", error_class="TimeoutError", finished_at=ago(minutes=1)),
        paused_at=ago(minutes=1),
    )
    html = operator.client.get(f"/workflows/{workflow_id}").get_data(as_text=True)
    assert bidi.FSI not in html and bidi.PDI not in html


@pytest.mark.parametrize("text, expected", [
    ("plain", "plain"),
    (f"a{RLO}b", f"\u2068a{RLO}b\u2069"),
    (f"a{PDI}b", "\u2068ab\u2069"),  # a PDI with nothing to close is dropped
    (f"a{RLI}b", f"\u2068a{RLI}b{PDI}\u2069"),  # an isolate left open is closed
    (f"{RLI}x{PDI}{PDI}", f"\u2068{RLI}x{PDI}\u2069"),
    (f"{RLI}x{PDI}", f"{RLI}x{PDI}"),  # isolates itself already
])  # fmt: skip
def test_isolate_text(text, expected):
    assert bidi.isolate_text(text) == expected


def test_html_turns_isolates_into_bdi_and_escapes():
    text = f"Skipped {bidi.isolate_text('<b>' + RLO + 'x')}: next {bidi.isolate_text(RLI + 'y')}."
    assert str(bidi.html(text)) == f"Skipped <bdi>&lt;b&gt;{RLO}x</bdi>: next <bdi>{RLI}y{PDI}</bdi>."
    assert str(bidi.html("a < b")) == "a &lt; b"
