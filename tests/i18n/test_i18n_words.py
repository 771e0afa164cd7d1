"""Status words an operator can't confuse: in every locale, the run
statuses and the timeline's series each read differently from the start
(no two share their first four letters, nor contain each other), so
"Valmiina" (ready) vs "Valmis" (completed) or "Waited" vs "Waiting" cannot
come back unnoticed."""

from __future__ import annotations

import pytest

from pgbus_web import i18n
from pgbus_web.rules import states
from pgbus_web.web.drawing import timeline


def confusable(a: str, b: str) -> bool:
    a, b = a.casefold(), b.casefold()
    return a[:4] == b[:4] or a in b or b in a


# The outcomes of a run of a step share their first word on purpose ("Ran,
# failed", "Ran OK") and differ by the outcome (and the failed one's glyph).
SAME_FAMILY = {"ran_ok", "ran_failed", "ran_cancelled"}


def confusable_pairs(words: dict[str, str]) -> list[tuple[str, str]]:
    names = sorted(words)
    return [
        (x, y)
        for i, x in enumerate(names)
        for y in names[i + 1 :]
        if not {x, y} <= SAME_FAMILY and confusable(words[x], words[y])
    ]


def test_the_check_catches_the_old_finnish_words():
    # The control: the words that were confused are caught.
    assert confusable("Valmiina", "Valmis") and confusable("Odotti", "Odottaa") and confusable("Waited", "Waiting")
    assert confusable("Abgebrochen", "Abgeschlossen")
    assert not confusable("Ready", "Completed")


@pytest.mark.parametrize("locale", i18n.available_locales())
def test_run_statuses_and_timeline_series_cannot_be_confused(locale):
    with i18n.force_locale(locale):
        statuses = {s: i18n.t(f"pgbus.workflows.statuses.{s}") for s in states.RUN}
        series = {s: i18n.t(f"pgbus.workflows.timeline.series.{s}") for s in timeline.SERIES}
    assert confusable_pairs(statuses) == []
    assert confusable_pairs(series) == []
