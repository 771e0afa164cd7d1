"""HTML safety of the messages in every locale: a ``<script>`` in a step
name, a signal name, an error, an actor or a reason comes out escaped,
while the ``<code>``, ``<time>`` and links the presenters build pass."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from babel.messages.pofile import read_po
from jinja2 import Environment
from markupsafe import Markup

from pgbus_web import catalog_files, i18n
from pgbus_web.core.words import presenters, verb_labels
from pgbus_web.rules import states

LOCALES = i18n.available_locales()
HOSTILE = "<script>alert(1)</script>"
ESCAPED = "&lt;script&gt;alert(1)&lt;/script&gt;"
NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def _english() -> dict:
    with open(catalog_files.po_path(i18n.translations_dir(), "en"), "rb") as fp:
        return {(m.id[0] if isinstance(m.id, tuple) else m.id): m.string for m in read_po(fp) if m.id}


ENGLISH = _english()
HTML_KEYS = sorted(key for key in ENGLISH if key.endswith("_html"))


def _placeholders(key):
    entry = ENGLISH[key]
    text = " ".join(entry) if isinstance(entry, tuple) else entry
    return sorted(set(__import__("re").findall(r"%\((\w+)\)s", text)))


def test_there_are_html_messages():
    assert "pgbus.workflows.next.waiting_signal_html" in HTML_KEYS


@pytest.mark.parametrize("locale", LOCALES)
@pytest.mark.parametrize("key", HTML_KEYS)
def test_every_html_message_escapes_plain_arguments(locale, key):
    names = [name for name in _placeholders(key) if name != "count"]
    arguments = {name: HOSTILE for name in names}
    with i18n.force_locale(locale):
        html = i18n.t_html(key, count=3, **arguments)
    assert isinstance(html, Markup)
    assert "<script>" not in html
    # Every argument the sentence shows is there, escaped.
    assert html.count(ESCAPED) >= len(names), key


@pytest.mark.parametrize("locale", LOCALES)
def test_markup_arguments_pass_through(locale):
    step = Markup('<code class="pgbus-code">capture</code>')
    moment = Markup('<time datetime="2026-03-01T12:00:00Z">now</time>')
    with i18n.force_locale(locale):
        html = i18n.t_html("pgbus.workflows.next.running_html", step=step, ago=moment)
    assert str(step) in html and str(moment) in html


def _run(run_status, **step):
    return {
        "status": run_status,
        "current_step": step.get("step_name"),
        "updated_at": NOW - timedelta(hours=1),
        "step": step,
    }


HOSTILE_RUNS = {
    "step name": _run(
        states.READY, step_name=HOSTILE, status=states.STEP_SCHEDULED, scheduled_at=NOW + timedelta(hours=1)
    ),
    "signal name": _run(
        states.WAITING,
        step_name="await",
        status=states.STEP_WAITING,
        wait_for=HOSTILE,
        waiting_since=NOW - timedelta(hours=3),
    ),
    "error class": {
        **_run(states.PAUSED, step_name="capture", status=states.STEP_FAILED, error_class=HOSTILE),
        "paused_at": NOW - timedelta(minutes=5),
    },
}


@pytest.mark.parametrize("locale", LOCALES)
@pytest.mark.parametrize("what", sorted(HOSTILE_RUNS))
def test_next_sentence_escapes(locale, what):
    run = HOSTILE_RUNS[what]
    with i18n.force_locale(locale):
        state = presenters.run_state(run, now=NOW, stall_threshold=timedelta(minutes=10))
        html = presenters.next_sentence(run, state, now=NOW, locale=locale)
    assert "<script>" not in html
    assert ESCAPED in html
    assert "<time " in html


AUTOESCAPE = Environment(autoescape=True).from_string("<li>{{ sentence }}</li>")


@pytest.mark.parametrize("locale", LOCALES)
def test_audit_sentence_escapes_actor_reason_and_step(locale):
    event = {"event": "resumed", "actor": HOSTILE, "reason": HOSTILE, "step_name": HOSTILE, "attempt": 2}
    with i18n.force_locale(locale):
        sentence = presenters.event_sentence(event)
        html = AUTOESCAPE.render(sentence=sentence)
        marked_up = i18n.t_html("pgbus.workflows.audit.with_reason", sentence=sentence, reason=HOSTILE)
    assert "<script>" not in html and html.count(ESCAPED) == 3
    assert "<script>" not in marked_up


@pytest.mark.parametrize("locale", LOCALES)
def test_bulk_confirm_escapes_step_and_error(locale):
    group = {"count": 3, "step_name": HOSTILE, "error_class": HOSTILE}
    with i18n.force_locale(locale):
        html = AUTOESCAPE.render(sentence=verb_labels.bulk_confirm("resume", group))
    assert "<script>" not in html and html.count(ESCAPED) == 2
