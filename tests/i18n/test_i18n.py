"""The i18n API: lookup, plural forms, English fallback, escaping, and the
locale each request gets."""

from __future__ import annotations

from pathlib import Path

import pytest
from flask import Blueprint, Flask, render_template_string
from markupsafe import Markup

from pgbus_web import i18n

CATALOG_HEADER = """\
msgid ""
msgstr ""
"Language: {locale}\\n"
"Plural-Forms: {plural}\\n"
"Content-Type: text/plain; charset=utf-8\\n"

"""


def write_catalog(root: Path, locale: str, plural: str, body: str) -> None:
    path = root / locale / "LC_MESSAGES" / "pgbus_web.po"
    path.parent.mkdir(parents=True)
    path.write_text(CATALOG_HEADER.format(locale=locale, plural=plural) + body, encoding="utf-8")


@pytest.fixture
def test_catalogs(tmp_path, monkeypatch):
    """Two small catalogs: English complete, German missing, empty and
    fuzzy entries, and a translation with a placeholder English lacks."""
    write_catalog(
        tmp_path,
        "en",
        "nplurals=2; plural=(n != 1);",
        """\
msgid "pgbus.test.hello"
msgstr "Hello %(name)s"

msgid "pgbus.test.only_english"
msgstr "Only in English"

msgid "pgbus.test.empty"
msgstr "Empty in German"

msgid "pgbus.test.fuzzy"
msgstr "Fuzzy in German"

msgid "pgbus.test.broken"
msgstr "Broken in German: %(step)s"

msgid "pgbus.test.runs"
msgid_plural "pgbus.test.runs"
msgstr[0] "%(count)s run"
msgstr[1] "%(count)s runs"

msgid "pgbus.test.only_english_plural"
msgid_plural "pgbus.test.only_english_plural"
msgstr[0] "%(count)s thing"
msgstr[1] "%(count)s things"
""",
    )
    write_catalog(
        tmp_path,
        "de",
        "nplurals=2; plural=(n != 1);",
        """\
msgid "pgbus.test.hello"
msgstr "Hallo %(name)s"

msgid "pgbus.test.empty"
msgstr ""

#, fuzzy
msgid "pgbus.test.fuzzy"
msgstr "Unscharf"

msgid "pgbus.test.broken"
msgstr "Kaputt: %(schritt)s"

msgid "pgbus.test.runs"
msgid_plural "pgbus.test.runs"
msgstr[0] "%(count)s Lauf"
msgstr[1] "%(count)s Läufe"
""",
    )
    monkeypatch.setattr(i18n, "translations_dir", lambda: tmp_path)
    i18n.reload()
    yield tmp_path
    i18n.reload()


def test_t_uses_the_forced_locale(test_catalogs):
    with i18n.force_locale("de"):
        assert i18n.t("pgbus.test.hello", name="Ada") == "Hallo Ada"


def test_t_outside_a_request_is_english(test_catalogs):
    assert i18n.t("pgbus.test.hello", name="Ada") == "Hello Ada"


@pytest.mark.parametrize("key", ["pgbus.test.only_english", "pgbus.test.empty", "pgbus.test.fuzzy"])
def test_missing_empty_or_fuzzy_entry_falls_back_to_english(test_catalogs, key):
    english = i18n.t(key)
    with i18n.force_locale("de"):
        assert i18n.t(key) == english
    assert english != key


def test_translation_that_does_not_format_falls_back_to_english(test_catalogs):
    with i18n.force_locale("de"):
        assert i18n.t("pgbus.test.broken", step="capture") == "Broken in German: capture"


def test_plural_missing_in_locale_falls_back_to_english_forms(test_catalogs):
    with i18n.force_locale("de"):
        assert i18n.tn("pgbus.test.only_english_plural", 1) == "1 thing"
        assert i18n.tn("pgbus.test.only_english_plural", 2) == "2 things"


@pytest.mark.parametrize("count, text", [(0, "0 Läufe"), (1, "1 Lauf"), (2, "2 Läufe"), (5, "5 Läufe")])
def test_tn_picks_the_plural_form(test_catalogs, count, text):
    with i18n.force_locale("de"):
        assert i18n.tn("pgbus.test.runs", count) == text


def test_t_with_count_on_a_plural_key_picks_the_form(test_catalogs):
    assert i18n.t("pgbus.test.runs", count=1) == "1 run"


def test_t_html_escapes_plain_arguments(test_catalogs):
    assert i18n.t_html("pgbus.test.hello", name="<script>") == Markup("Hello &lt;script&gt;")


def test_t_html_keeps_markup_arguments(test_catalogs):
    assert i18n.t_html("pgbus.test.hello", name=Markup("<code>x</code>")) == Markup("Hello <code>x</code>")


def test_force_locale_rejects_an_unknown_locale(test_catalogs):
    with pytest.raises(ValueError, match="xx"):
        with i18n.force_locale("xx"):
            pass


@pytest.mark.parametrize(
    "tag, locale",
    [("de", "de"), ("de-AT", "de"), ("DE_at", "de"), ("en-GB", "en"), ("fr", None), ("", None)],
)
def test_match_locale(test_catalogs, tag, locale):
    assert i18n.match_locale(tag) == locale


# --- per request --------------------------------------------------------------


@pytest.fixture
def client(test_catalogs):
    app = Flask(__name__)
    bp = Blueprint("dash", __name__)

    @bp.route("/page")
    def page():
        return render_template_string(
            '<html lang="{{ current_locale() }}">{{ t("pgbus.test.hello", name="x") }}</html>'
        )

    @app.route("/host")
    def host():
        return i18n.current_locale()

    i18n.init_app(bp, default_locale="en")
    app.register_blueprint(bp, url_prefix="/dash")
    return app.test_client()


def test_locale_parameter_wins_and_is_remembered(client):
    response = client.get("/dash/page?locale=de", headers={"Accept-Language": "en"})
    assert response.text == '<html lang="de">Hallo x</html>'
    assert client.get_cookie(i18n.LOCALE_COOKIE).value == "de"
    assert client.get("/dash/page").text == '<html lang="de">Hallo x</html>'


def test_unknown_locale_parameter_is_ignored(client):
    response = client.get("/dash/page?locale=xx", headers={"Accept-Language": "de"})
    assert "Hallo" in response.text
    assert client.get_cookie(i18n.LOCALE_COOKIE) is None


def test_accept_language_region_falls_back_to_language(client):
    response = client.get("/dash/page", headers={"Accept-Language": "de-AT,en;q=0.5"})
    assert 'lang="de"' in response.text


def test_accept_language_skips_locales_without_catalog(client):
    response = client.get("/dash/page", headers={"Accept-Language": "fr-FR,fr;q=0.9,de;q=0.8"})
    assert 'lang="de"' in response.text


def test_default_locale_when_nothing_matches(test_catalogs):
    app = Flask(__name__)
    bp = Blueprint("dash", __name__)
    bp.route("/page")(lambda: i18n.current_locale())
    i18n.init_app(bp, default_locale=lambda: "de")
    app.register_blueprint(bp)
    assert app.test_client().get("/page", headers={"Accept-Language": "fr"}).text == "de"


def test_host_pages_keep_their_own_locale(client):
    client.get("/dash/page?locale=de")
    assert client.get("/host", headers={"Accept-Language": "de"}).text == "en"


# --- time zone ----------------------------------------------------------------


def test_timezone_from_cookie():
    app = Flask(__name__)
    with app.test_request_context(headers={"Cookie": "pgbus_tz=Europe/Oslo"}):
        assert i18n.current_timezone().key == "Europe/Oslo"


@pytest.mark.parametrize("value", ["Not/AZone", "../../etc/passwd", "", "x" * 200])
def test_bad_timezone_cookie_gives_utc(value):
    app = Flask(__name__)
    with app.test_request_context(headers={"Cookie": f"pgbus_tz={value}"}):
        assert i18n.current_timezone().key == "UTC"


def test_timezone_outside_a_request_is_utc():
    assert i18n.current_timezone().key == "UTC"


@pytest.mark.parametrize("locale, text", [("en", "1,234 runs"), ("de", "1.234 Läufe")])
def test_count_is_written_with_the_languages_digit_grouping(test_catalogs, locale, text):
    with i18n.force_locale(locale):
        assert i18n.tn("pgbus.test.runs", 1234) == text


def test_a_count_given_as_text_still_picks_the_plural_form(test_catalogs):
    assert i18n.t("pgbus.test.runs", count="1") == "1 run"
    assert i18n.t("pgbus.test.runs", count="5") == "5 runs"


# --- compiled catalogs: the wheel's .mo, never a stale one in a checkout ---


def test_a_checkout_reads_its_po_even_beside_a_stale_mo(test_catalogs):
    from pgbus_web import catalog_files

    with i18n.force_locale("de"):
        assert i18n.t("pgbus.test.hello", name="Ada") == "Hallo Ada"
    compiled = catalog_files.compile_po(catalog_files.po_path(test_catalogs, "de"), "de")
    catalog_files.mo_path(test_catalogs, "de").write_bytes(compiled)
    po = catalog_files.po_path(test_catalogs, "de")
    po.write_text(po.read_text(encoding="utf-8").replace("Hallo", "Servus"), encoding="utf-8")
    i18n.reload()
    with i18n.force_locale("de"):
        assert i18n.t("pgbus.test.hello", name="Ada") == "Servus Ada"


def test_an_install_without_po_reads_the_compiled_mo(test_catalogs):
    from pgbus_web import catalog_files

    for locale in ("en", "de"):
        po = catalog_files.po_path(test_catalogs, locale)
        catalog_files.mo_path(test_catalogs, locale).write_bytes(catalog_files.compile_po(po, locale))
        po.unlink()
    i18n.reload()
    assert i18n.available_locales() == ("en", "de")
    with i18n.force_locale("de"):
        assert i18n.t("pgbus.test.hello", name="Ada") == "Hallo Ada"
        assert i18n.tn("pgbus.test.runs", 2) == "2 Läufe"
        # Fuzzy and empty entries are not compiled: English shows.
        assert i18n.t("pgbus.test.fuzzy") == "Fuzzy in German"
        assert i18n.t("pgbus.test.empty") == "Empty in German"


def test_every_compiled_catalog_in_the_checkout_agrees_with_its_po():
    """A .mo compiled by hand (pybabel compile) is never read by the
    dashboard, but other tools would: it must say what its .po says."""
    import io
    from gettext import GNUTranslations

    from pgbus_web import catalog_files

    root = i18n.translations_dir()
    for compiled in sorted(root.glob(f"*/LC_MESSAGES/{catalog_files.DOMAIN}.mo")):
        locale = compiled.parent.parent.name
        source = GNUTranslations(io.BytesIO(catalog_files.compile_po(catalog_files.po_path(root, locale), locale)))
        shipped = GNUTranslations(io.BytesIO(compiled.read_bytes()))
        assert shipped._catalog == source._catalog, f"{compiled} is stale: pybabel compile -d translations -D pgbus_web"


def test_the_domain_gives_flask_babel_gettext_in_the_dashboards_locale(test_catalogs):
    app = Flask("host")
    with app.test_request_context("/"):
        with i18n.force_locale("de"):
            assert i18n.DOMAIN.gettext("pgbus.test.hello", name="Ada") == "Hallo Ada"
            assert i18n.DOMAIN.ngettext("pgbus.test.runs", "pgbus.test.runs", 2, count=2) == "2 Läufe"
            # English behind every locale.
            assert i18n.DOMAIN.gettext("pgbus.test.only_english") == "Only in English"
        assert i18n.DOMAIN.gettext("pgbus.test.hello", name="Ada") == "Hello Ada"
    assert "babel" not in app.extensions
