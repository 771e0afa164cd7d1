"""The catalogs themselves: complete in every locale (the translation check
of scripts/check_translations.py), plural forms right in every language,
and the check catching what it is there to catch."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
from babel.messages.pofile import read_po

from pgbus_web import catalog_files, i18n

ROOT = Path(__file__).resolve().parents[2]
LOCALES = ("en", "da", "de", "es", "fi", "fr", "it", "ja", "nb", "nl", "pt", "sv")


def _load_check():
    spec = importlib.util.spec_from_file_location("check_translations", ROOT / "scripts" / "check_translations.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("check_translations", module)
    spec.loader.exec_module(module)
    return module


check_translations = _load_check()


def test_every_locale_has_a_catalog():
    assert set(i18n.available_locales()) == set(LOCALES)
    assert i18n.available_locales()[0] == "en"


def test_catalogs_pass_the_translation_check():
    problems, _warnings = check_translations.check(ROOT / "translations", check_translations.used_keys(ROOT))
    assert problems == [], "\n".join(problems)


# --- plural forms -------------------------------------------------------------

# Which msgstr[i] each count takes, from each language's plural rule (CLDR,
# as Babel writes it into the catalog header): two forms one/other; es and
# it one/many/other; fr and pt put 0 with 1; Japanese has one form.
EXPECTED_FORM = {
    "two": {0: 1, 1: 0, 2: 1, 5: 1},
    "es_it": {0: 2, 1: 0, 2: 2, 5: 2},
    "fr_pt": {0: 0, 1: 0, 2: 2, 5: 2},
    "ja": {0: 0, 1: 0, 2: 0, 5: 0},
}
RULE = {"es": "es_it", "it": "es_it", "fr": "fr_pt", "pt": "fr_pt", "ja": "ja"}


def _plural_entries(locale):
    with open(catalog_files.po_path(i18n.translations_dir(), locale), "rb") as fp:
        po = read_po(fp, locale=locale)
    return po, {m.id[0]: tuple(m.string) for m in po if m.id and isinstance(m.id, (tuple, list))}


def _arguments(text):
    return {name: f"<{name}>" for name in check_translations.placeholders(text)}


@pytest.mark.parametrize("locale", LOCALES)
def test_plural_forms_for_0_1_2_5(locale):
    po, entries = _plural_entries(locale)
    expected = EXPECTED_FORM[RULE.get(locale, "two")]
    assert po.num_plurals == len(set(expected.values())) + (1 if RULE.get(locale) in ("es_it", "fr_pt") else 0)
    assert entries, "no plural message"
    for key, forms in entries.items():
        arguments = _arguments(" ".join(forms))
        arguments.pop("count", None)
        for count, index in expected.items():
            with i18n.force_locale(locale):
                text = i18n.tn(key, count, **arguments)
            assert text == forms[index] % {**arguments, "count": count}, (key, count)
            assert str(count) in text, (key, count)


@pytest.mark.parametrize(
    "locale, one, two",
    [
        ("en", "1 run", "2 runs"),
        ("da", "1 kørsel", "2 kørsler"),
        ("de", "1 Lauf", "2 Läufe"),
        ("es", "1 ejecución", "2 ejecuciones"),
        ("fi", "1 ajo", "2 ajoa"),
        ("fr", "1 exécution", "2 exécutions"),
        ("it", "1 esecuzione", "2 esecuzioni"),
        ("ja", "1件の実行", "2件の実行"),
        ("nb", "1 kjøring", "2 kjøringer"),
        ("nl", "1 uitvoering", "2 uitvoeringen"),
        ("pt", "1 execução", "2 execuções"),
        ("sv", "1 körning", "2 körningar"),
    ],
)
def test_run_count_reads_right(locale, one, two):
    with i18n.force_locale(locale):
        assert i18n.tn("pgbus.workflows.attention.runs", 1) == one
        assert i18n.tn("pgbus.workflows.attention.runs", 2) == two


def test_french_zero_takes_the_singular():
    with i18n.force_locale("fr"):
        assert i18n.tn("pgbus.workflows.attention.runs", 0) == "0 exécution"


# --- the check catches what it should -------------------------------------------

HEADER = 'msgid ""\nmsgstr ""\n"Language: {locale}\\n"\n"Plural-Forms: nplurals=2; plural=(n != 1);\\n"\n\n'

ENGLISH = """\
msgid "pgbus.test.hello"
msgstr "Hello %(name)s"

msgid "pgbus.test.runs"
msgid_plural "pgbus.test.runs"
msgstr[0] "%(count)s run"
msgstr[1] "%(count)s runs"
"""

GOOD_GERMAN = """\
msgid "pgbus.test.hello"
msgstr "Hallo %(name)s"

msgid "pgbus.test.runs"
msgid_plural "pgbus.test.runs"
msgstr[0] "%(count)s Lauf"
msgstr[1] "%(count)s Läufe"
"""


def _catalogs(tmp_path, german):
    for locale, body in (("en", ENGLISH), ("de", german)):
        path = tmp_path / locale / "LC_MESSAGES" / "pgbus_web.po"
        path.parent.mkdir(parents=True)
        path.write_text(HEADER.format(locale=locale) + body, encoding="utf-8")
    return tmp_path


USED = {"pgbus.test.hello": "x.py:1", "pgbus.test.runs": "x.py:2"}


def test_check_passes_complete_catalogs(tmp_path):
    problems, _ = check_translations.check(_catalogs(tmp_path, GOOD_GERMAN), USED)
    assert problems == []


@pytest.mark.parametrize(
    "german, problem",
    [
        (
            GOOD_GERMAN.replace('msgid "pgbus.test.hello"\nmsgstr "Hallo %(name)s"\n', ""),
            "de: pgbus.test.hello missing",
        ),
        (GOOD_GERMAN.replace('"Hallo %(name)s"', '""'), "de: pgbus.test.hello: empty"),
        (
            GOOD_GERMAN.replace('msgid "pgbus.test.hello"', '#, fuzzy\nmsgid "pgbus.test.hello"'),
            "de: pgbus.test.hello: fuzzy",
        ),
        (GOOD_GERMAN.replace("%(name)s", "%(nom)s"), "de: pgbus.test.hello: placeholders English lacks: nom"),
        (GOOD_GERMAN.replace("Hallo %(name)s", "Hallo"), "de: pgbus.test.hello: placeholders missing: name"),
        (GOOD_GERMAN.replace("Hallo %(name)s", "Hallo %(name)s zu 100%"), "de: pgbus.test.hello: a % that is not"),
        (GOOD_GERMAN.replace('msgstr[1] "%(count)s Läufe"\n', ""), "de: pgbus.test.runs: empty"),
        (GOOD_GERMAN + '\nmsgid "pgbus.test.gone"\nmsgstr "Weg"\n', "de: pgbus.test.gone is not in English"),
    ],
)
def test_check_reports(tmp_path, german, problem):
    problems, _ = check_translations.check(_catalogs(tmp_path, german), USED)
    assert any(p.startswith(problem) for p in problems), problems


def test_check_reports_a_used_key_english_lacks(tmp_path):
    problems, _ = check_translations.check(_catalogs(tmp_path, GOOD_GERMAN), {**USED, "pgbus.test.new": "page.html:3"})
    assert problems == ["en: pgbus.test.new is used (page.html:3) but not in the catalog"]


def test_extraction_finds_keys_in_python_and_templates(tmp_path):
    (tmp_path / "pkg" / "templates").mkdir(parents=True)
    (tmp_path / "pkg" / "views.py").write_text(
        "from pgbus_web.i18n import t, tn\n"
        'title = t("pgbus.test.from_python")\n'
        'count = tn("pgbus.test.plural", 3)\n'
        'dynamic = t("pgbus.test." + name)\n'
    )
    (tmp_path / "pkg" / "templates" / "page.html").write_text(
        "<h1>{{ t('pgbus.test.from_jinja') }}</h1>{{ tn_html('pgbus.test.jinja_plural', n) }}"
    )
    config = tmp_path / "babel.cfg"
    config.write_text("[python: pkg/**.py]\n[jinja2: pkg/templates/**.html]\n")
    found = check_translations.extracted_keys(tmp_path, config)
    assert set(found) == {
        "pgbus.test.from_python",
        "pgbus.test.plural",
        "pgbus.test.from_jinja",
        "pgbus.test.jinja_plural",
    }


def test_dynamic_keys_cover_every_state_name():
    from pgbus_web.rules import states

    for status in states.RUN + (states.STALLED, states.OVERDUE):
        assert f"pgbus.workflows.statuses.{status}" in check_translations.DYNAMIC_KEYS
    for event in states.EVENTS:
        assert f"pgbus.workflows.events.{event}" in check_translations.DYNAMIC_KEYS
    for reason in states.STUCK_REASONS:
        assert f"pgbus.workflows.attention.reasons.{reason}" in check_translations.DYNAMIC_KEYS


def test_fill_adds_missing_keys_as_fuzzy_english(tmp_path):
    german = GOOD_GERMAN.replace('msgid "pgbus.test.hello"\nmsgstr "Hallo %(name)s"\n', "")
    root = _catalogs(tmp_path, german)
    assert check_translations.fill(root) == {"de": 1}
    problems, _ = check_translations.check(root, USED)
    assert problems == ["de: pgbus.test.hello: fuzzy"]
    with open(root / "de" / "LC_MESSAGES" / "pgbus_web.po", "rb") as fp:
        filled = {m.id: m.string for m in read_po(fp) if m.id == "pgbus.test.hello"}
    assert filled == {"pgbus.test.hello": "Hello %(name)s"}
