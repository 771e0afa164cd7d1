"""The dashboard inside a host app: a host with Flask-Babel and a per-user
locale and time zone, a host without it, a host whose names look like
ours, and settings from app.config, keywords or both (docs/i18n.md,
docs/web.md)."""

from __future__ import annotations

import io
from pathlib import Path

import flask_babel
import pytest
from babel.messages.catalog import Catalog
from babel.messages.mofile import write_mo
from flask import Blueprint, Flask, render_template_string, request
from support.web_helpers import soup, text_of

from pgbus_web import i18n
from pgbus_web.extension import PgbusWeb, SettingError, state

# The dashboard's index title in each language the tests use.
TITLES = {"en": "Workflows", "ja": "ワークフロー"}
USERS = {"kenji": ("ja", "Asia/Tokyo"), "anna": ("de", "Europe/Berlin")}


def host_catalogs(root: Path) -> Path:
    """The host's own catalogs (domain "messages"): "Hello" in Japanese and
    German, and a key of ours it does not have."""
    for locale, text in (("ja", "こんにちは（ホスト）"), ("de", "Hallo (Gastgeber)")):
        catalog = Catalog(locale=locale)
        catalog.add("Hello", text)
        path = root / locale / "LC_MESSAGES" / "messages.mo"
        path.parent.mkdir(parents=True)
        out = io.BytesIO()
        write_mo(out, catalog)
        path.write_bytes(out.getvalue())
    return root


def watch(app: Flask) -> list:
    """Records (path, dashboard locale, dashboard zone) of every request."""
    seen = []

    @app.after_request
    def record(response):
        seen.append((request.path, i18n.current_locale(), i18n.current_timezone().key))
        return response

    return seen


HOST_PAGE = "{{ _('Hello') }}|{{ get_locale() }}|{{ get_timezone() }}"


@pytest.fixture
def babel_host(tmp_path, database):
    """A host with Flask-Babel whose users each chose a language and a zone."""
    host = Flask("host")
    host.config["BABEL_TRANSLATION_DIRECTORIES"] = str(host_catalogs(tmp_path / "host-translations"))

    def user():
        return USERS.get(request.headers.get("X-User", ""), (None, None))

    flask_babel.Babel(host, locale_selector=lambda: user()[0], timezone_selector=lambda: user()[1])
    host.jinja_env.globals.update(get_locale=flask_babel.get_locale, get_timezone=flask_babel.get_timezone)

    @host.get("/home")
    def home():
        return render_template_string(HOST_PAGE)

    PgbusWeb(host, url_prefix="/ops", database=database, run_operations=False)
    return host


def test_with_flask_babel_the_dashboard_follows_the_hosts_per_user_choice(babel_host):
    seen = watch(babel_host)
    client = babel_host.test_client()
    page = soup(client.get("/ops/workflows", headers={"X-User": "kenji", "Accept-Language": "en"}))
    assert page.select_one("html")["lang"] == "ja"
    assert text_of(page.select_one("h1")) == TITLES["ja"]
    assert seen[-1] == ("/ops/workflows", "ja", "Asia/Tokyo")
    # A user the host has no choice for: Accept-Language, then the default.
    client.get("/ops/workflows", headers={"X-User": "nobody", "Accept-Language": "de-AT"})
    assert seen[-1][1:] == ("de", "UTC")
    client.get("/ops/workflows", headers={"X-User": "nobody"})
    assert seen[-1][1:] == ("en", "UTC")


def test_locale_param_overrides_the_host_inside_the_dashboard_only(babel_host):
    seen = watch(babel_host)
    client = babel_host.test_client()
    kenji = {"X-User": "kenji"}
    assert client.get("/home", headers=kenji).get_data(as_text=True) == "こんにちは（ホスト）|ja|Asia/Tokyo"
    response = client.get("/ops/workflows?locale=en", headers=kenji)
    assert text_of(soup(response).select_one("h1")) == TITLES["en"]
    assert "Path=/ops" in response.headers["Set-Cookie"]
    # The cookie keeps the choice in the dashboard ...
    client.get("/ops/workflows", headers=kenji)
    assert seen[-1][:2] == ("/ops/workflows", "en")
    # ... and the host's page on the same thread keeps the host's locale,
    # zone and catalogs, its gettext never seeing the dashboard's keys.
    assert client.get("/home", headers=kenji).get_data(as_text=True) == "こんにちは（ホスト）|ja|Asia/Tokyo"
    with babel_host.test_request_context("/home", headers=kenji):
        assert flask_babel.gettext("pgbus.workflows.index.title") == "pgbus.workflows.index.title"
        assert str(flask_babel.get_locale()) == "ja"


def test_the_dashboards_time_zone_cookie_comes_before_the_hosts(babel_host):
    seen = watch(babel_host)
    client = babel_host.test_client()
    client.set_cookie(i18n.TIMEZONE_COOKIE, "America/Lima", path="/ops")
    client.get("/ops/workflows", headers={"X-User": "kenji"})
    assert seen[-1][2] == "America/Lima"
    # Not a zone: the host's.
    client.set_cookie(i18n.TIMEZONE_COOKIE, "Mars/Olympus", path="/ops")
    client.get("/ops/workflows", headers={"X-User": "kenji"})
    assert seen[-1][2] == "Asia/Tokyo"


def test_a_host_without_flask_babel_is_left_as_it_was(database):
    def make_host() -> Flask:
        host = Flask("host")
        host.jinja_env.globals["greeting"] = "hi"

        @host.get("/home")
        def home():
            return render_template_string("{{ greeting }}|{{ gettext is defined }}|{{ _ is defined }}")

        return host

    plain, host = make_host(), make_host()
    PgbusWeb(host, url_prefix="/ops", database=database, run_operations=False)
    seen = watch(host)
    client = host.test_client()
    assert client.get("/home").get_data(as_text=True) == "hi|False|False"
    assert client.get("/ops/workflows?locale=ja").status_code == 200
    assert seen[-1][1] == "ja"
    assert client.get("/home").get_data(as_text=True) == plain.test_client().get("/home").get_data(as_text=True)
    assert "babel" not in host.extensions
    assert set(host.jinja_env.extensions) == set(plain.jinja_env.extensions)
    assert set(host.jinja_env.filters) == set(plain.jinja_env.filters)
    # The macros' one namespaced global is all the dashboard adds.
    assert set(host.jinja_env.globals) - set(plain.jinja_env.globals) == {"pgbus_web"}
    with host.test_request_context("/home"):
        with pytest.raises(KeyError):
            flask_babel.get_locale()  # still no Flask-Babel of its own


def test_settings_selectors_serve_a_host_without_flask_babel(database):
    host = Flask("host")
    PgbusWeb(
        host,
        url_prefix="/ops",
        database=database,
        run_operations=False,
        locale_selector=lambda: USERS.get(request.headers.get("X-User", ""), (None,))[0],
        timezone_selector=lambda: "Europe/Oslo",
    )
    seen = watch(host)
    client = host.test_client()
    client.get("/ops/workflows", headers={"X-User": "kenji", "Accept-Language": "de"})
    assert seen[-1][1:] == ("ja", "Europe/Oslo")
    # The selector has no answer: Accept-Language with region fallback.
    client.get("/ops/workflows", headers={"X-User": "nobody", "Accept-Language": "pt-BR, de;q=0.5"})
    assert seen[-1][1] == "pt"
    # The dashboard's own ?locale= still comes first.
    client.get("/ops/workflows?locale=fi", headers={"X-User": "kenji"})
    assert seen[-1][1] == "fi"


def test_a_host_with_names_like_ours_collides_with_nothing(database, runs):
    host = Flask("host")
    host.config["TEMPLATES_AUTO_RELOAD"] = True
    host.jinja_env.globals.update(t=lambda key: f"host:{key}", current_locale=lambda: "xx", tn="host-tn")
    own = Blueprint("workflows", __name__)

    @own.get("/")
    def host_workflows():
        return render_template_string("{{ t('mine') }}|{{ current_locale() }}|{{ tn }}")

    host.register_blueprint(own, url_prefix="/workflows")
    PgbusWeb(host, url_prefix="/ops", database=database, run_operations=False)
    runs.make("paused")
    client = host.test_client()
    assert client.get("/workflows/").get_data(as_text=True) == "host:mine|xx|host-tn"
    page = client.get("/ops/workflows")
    assert page.status_code == 200
    assert text_of(soup(page).select_one("h1")) == TITLES["en"]
    assert client.get("/workflows/").get_data(as_text=True) == "host:mine|xx|host-tn"
    assert host.config["TEMPLATES_AUTO_RELOAD"] is True
    assert host.url_map.bind("").match("/ops/workflows")[0] == "pgbus_web.workflows"
    assert host.url_map.bind("").match("/workflows/")[0] == "workflows.host_workflows"


# --- settings: app.config, keywords, both --------------------------------


def _bound(config=None, **keywords) -> Flask:
    app = Flask("host")
    app.config.update(config or {})
    PgbusWeb(app, run_operations=False, **keywords)
    return app


def test_settings_from_app_config_only(database_url, engine):
    app = _bound(
        {
            "PGBUS_WEB_DATABASE_URL": database_url,
            "PGBUS_WEB_URL_PREFIX": "/ops",
            "PGBUS_WEB_PAGE_SIZE": 7,
            "PGBUS_WEB_DEFAULT_LOCALE": "ja",
            "PGBUS_WEB_WORKER_GONE_AFTER": 20,
        }
    )
    with app.app_context():
        settings = state().settings
        assert (settings.page_size, settings.default_locale) == (7, "ja")
        assert settings.worker_gone_after.total_seconds() == 20
    page = soup(app.test_client().get("/ops/workflows"))
    assert text_of(page.select_one("h1")) == TITLES["ja"]


def test_settings_from_keywords_only(database):
    app = _bound(url_prefix="/ops", database=database, page_size=9, default_locale="ja")
    with app.app_context():
        assert state().settings.page_size == 9
    assert text_of(soup(app.test_client().get("/ops/workflows")).select_one("h1")) == TITLES["ja"]


def test_keywords_win_over_app_config(database):
    app = _bound(
        {"PGBUS_WEB_PAGE_SIZE": 7, "PGBUS_WEB_DEFAULT_LOCALE": "ja", "PGBUS_WEB_URL_PREFIX": "/cfg"},
        url_prefix="/ops",
        database=database,
        page_size=9,
    )
    with app.app_context():
        assert (state().settings.page_size, state().settings.default_locale) == (9, "ja")
    assert app.test_client().get("/ops/workflows").status_code == 200
    assert app.test_client().get("/cfg/workflows").status_code == 404


def test_factory_pattern_binds_one_extension_to_several_apps(database):
    web = PgbusWeb(url_prefix="/ops", database=database, run_operations=False)
    first, second = Flask("first"), Flask("second")
    first.config["PGBUS_WEB_DEFAULT_LOCALE"] = "ja"
    second.config["PGBUS_WEB_PAGE_SIZE"] = 3
    web.init_app(first)
    web.init_app(second)
    with first.app_context():
        assert (state().settings.default_locale, state().settings.page_size) == ("ja", 50)
    with second.app_context():
        assert (state().settings.default_locale, state().settings.page_size) == ("en", 3)
    assert text_of(soup(first.test_client().get("/ops/workflows")).select_one("h1")) == TITLES["ja"]
    assert text_of(soup(second.test_client().get("/ops/workflows")).select_one("h1")) == TITLES["en"]


@pytest.mark.parametrize(
    "config, keywords, named",
    [
        ({}, {"default_locale": lambda: "de"}, "default_locale"),
        ({"PGBUS_WEB_DEFAULT_LOCALE": "klingon"}, {}, "default_locale"),
        ({"PGBUS_WEB_PAGE_SIZE": "ten"}, {}, "page_size"),
        ({}, {"page_size": 0}, "page_size"),
        ({"PGBUS_WEB_CAN_VIEW": True}, {}, "can_view"),
        ({"PGBUS_WEB_LOCALE_SELECTOR": "de"}, {}, "locale_selector"),
        ({"PGBUS_WEB_WORKER_GONE_AFTER": "10s"}, {}, "worker_gone_after"),
        ({"PGBUS_WEB_RUN_OPERATIONS": "no"}, {}, "run_operations"),
        ({"PGBUS_WEB_URL_PREFIX": "ops"}, {}, "url_prefix"),
    ],
)
def test_a_wrong_setting_fails_at_start_naming_it(database, config, keywords, named):
    app = Flask("host")
    app.config.update(config)
    with pytest.raises(SettingError, match=f"setting {named} must be"):
        PgbusWeb(app, database=database, **keywords)
    assert "pgbus_web" not in app.extensions
    assert "pgbus_web" not in app.blueprints


@pytest.mark.parametrize("name", ["stall_threshold", "waiting_threshold"])
def test_a_threshold_setting_says_it_is_a_rule_of_the_policy_now(database, name):
    """The stuck thresholds are the policy's, the same for every process:
    a host passing one is told where it went, by keyword or config."""
    for config, keywords in (({f"PGBUS_WEB_{name.upper()}": 120}, {}), ({}, {name: 120})):
        app = Flask("host")
        app.config.update(config)
        with pytest.raises(SettingError, match=f"setting {name} is a rule of the policy now"):
            PgbusWeb(app, database=database, **keywords)
        assert "pgbus_web" not in app.extensions


def test_an_unknown_config_key_is_refused_by_name(database):
    app = Flask("host")
    app.config["PGBUS_WEB_PAGE_SIZ"] = 5
    with pytest.raises(TypeError, match="PGBUS_WEB_PAGE_SIZ;"):
        PgbusWeb(app, database=database, run_operations=False)
    assert "pgbus_web" not in app.extensions


def test_definitions_from_app_config_load_the_registry(database):
    from pgbus_web.demo.workflows import REGISTRY

    app = _bound({"PGBUS_WEB_DEFINITIONS": "pgbus_web.demo.workflows"}, database=database)
    with app.app_context():
        assert state().settings.registry is REGISTRY
    # A registry given as such wins over the module's name.
    from pgbus_web.runtime import Registry, Step, Workflow

    own = Registry([Workflow("Own", [Step("only", lambda ctx: None)])])
    app = _bound({"PGBUS_WEB_DEFINITIONS": "pgbus_web.demo.workflows"}, database=database, registry=own)
    with app.app_context():
        assert state().settings.registry is own


@pytest.mark.parametrize(
    "module, says",
    [
        ("pgbus_web.rules.states", "pgbus_web.rules.states has no REGISTRY"),
        ("no_such_module_here", "cannot import definitions module 'no_such_module_here'"),
        (7, "must be a module name"),
    ],
)
def test_wrong_definitions_in_app_config_fail_at_start_naming_them(database, module, says):
    app = Flask("host")
    app.config["PGBUS_WEB_DEFINITIONS"] = module
    with pytest.raises(SettingError, match="PGBUS_WEB_DEFINITIONS") as refused:
        PgbusWeb(app, database=database, run_operations=False)
    assert says in str(refused.value)
    assert "pgbus_web" not in app.extensions


def test_a_whole_settings_object_leaves_the_config_unread(database):
    from pgbus_web.extension import Settings

    app = _bound({"PGBUS_WEB_PAGE_SIZE": 7}, database=database, settings=Settings(page_size=11))
    with app.app_context():
        assert state().settings.page_size == 11
