"""German has one word for a workflow run, "Lauf" (docs/i18n.md, "One word
for a run"): no German message says "Ausführung" in any form or compound,
while the run's own words read "Lauf" and "Läufe"; and the check finds
the other word where it is (a control)."""

from __future__ import annotations

import io
import re
from pathlib import Path

from babel.messages.pofile import read_po

from pgbus_web import catalog_files, i18n

ROOT = Path(__file__).resolve().parents[2]
# The other word, in any case and inside a compound (Workflow-Ausführung,
# Ausführungsnummer); the verb "ausführen" (run now) is not it.
OTHER_WORD = re.compile(r"ausführung", re.IGNORECASE)


def saying_the_other_word(catalog) -> list[str]:
    """The keys whose German text says "Ausführung"."""
    keys = []
    for message in catalog:
        if not message.id:
            continue
        texts = message.string if isinstance(message.string, (list, tuple)) else [message.string]
        if any(OTHER_WORD.search(text or "") for text in texts):
            keys.append(message.id if isinstance(message.id, str) else message.id[0])
    return keys


def german():
    with catalog_files.po_path(ROOT / "translations", "de").open("rb") as po:
        return read_po(po, locale="de")


def test_no_german_message_says_ausfuehrung():
    assert saying_the_other_word(german()) == []


def test_the_runs_own_words_say_lauf():
    # Not vacuous: the catalog read above is the one the pages speak, and
    # its run words are Lauf.
    with i18n.force_locale("de"):
        assert i18n.t("pgbus.workflows.index.columns.run") == "Lauf"
        assert i18n.t("pgbus.workflows.index.runs_title") == "Läufe"
        assert i18n.tn("pgbus.workflows.attention.runs", 1) == "1 Lauf"
        assert i18n.tn("pgbus.workflows.attention.runs", 3) == "3 Läufe"
        assert i18n.t("pgbus.workflows.show.not_found_title") == "Lauf nicht gefunden"
    runs = [message for message in german() if message.id and re.search(r"L[aä]uf", str(message.string))]
    assert len(runs) > 80


def test_the_check_finds_the_other_word_and_not_the_verb():
    sample = read_po(
        io.BytesIO(
            """
msgid "pgbus.test.paused"
msgstr "Die Ausführung ist pausiert."

msgid "pgbus.test.all"
msgid_plural "pgbus.test.all"
msgstr[0] "%(count)s Lauf"
msgstr[1] "%(count)s Workflow-Ausführungen"

msgid "pgbus.test.number"
msgstr "Ausführungsnummer"

msgid "pgbus.test.run_now"
msgstr "Jetzt ausführen"

msgid "pgbus.test.run"
msgstr "Lauf"
""".encode()
        ),
        locale="de",
    )
    assert saying_the_other_word(sample) == ["pgbus.test.paused", "pgbus.test.all", "pgbus.test.number"]
