"""The extension itself: mounting under any prefix, the settings it accepts,
its own assets, the security headers and Vary on every response, the view
hook, the health check and the pages when the database is away."""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from flask import Flask
from support.web_helpers import every_state, make_app, soup, text_of

from pgbus_web import db
from pgbus_web.extension import PgbusWeb
from pgbus_web.plumbing import security

# A port nothing listens on: every connection is refused at once.
DEAD_URL = "postgresql://pgbus:pgbus@127.0.0.1:9/pgbus"


@pytest.fixture
def dead_database():
    database = db.Database(db.create_engine(DEAD_URL, connect_args={"connect_timeout": 2}))
    yield database
    database.dispose()


def test_index_renders_on_an_empty_database(client):
    response = client.get("/workflows")
    assert response.status_code == 200
    page = soup(response)
    assert page.select_one("html")["lang"] == "en"
    assert text_of(page.select_one("h1")) == "Workflows"
    assert page.select_one("#pgbus-runs .pgbus-empty") is not None
    assert page.select_one("#pgbus-attention .pgbus-empty") is not None


def test_root_of_the_standalone_app_leads_to_the_index(client):
    response = client.get("/")
    assert response.status_code == 302
    assert response.headers["Location"].endswith("/workflows")


def test_mounted_under_a_prefix_in_a_host_app(database):
    host = Flask("host")

    @host.get("/")
    def home():
        return "host home"

    PgbusWeb(host, url_prefix="/ops/pgbus", database=database)
    client = host.test_client()
    assert client.get("/").get_data(as_text=True) == "host home"
    response = client.get("/ops/pgbus/workflows")
    assert response.status_code == 200
    page = soup(response)
    stylesheet = page.select_one('link[rel="stylesheet"]')["href"]
    assert stylesheet.startswith("/ops/pgbus/pgbus-static/")
    assert client.get(stylesheet).status_code == 200
    # The host's own pages get none of the blueprint's headers.
    assert "Content-Security-Policy" not in client.get("/").headers


def test_the_host_apps_jinja_globals_are_left_alone(database, runs):
    from flask import render_template_string

    from pgbus_web.demo.workflows import REGISTRY
    from pgbus_web.i18n import force_locale, t

    host = Flask("host")
    host_t = lambda key, **kw: f"host:{key}"  # noqa: E731
    host.jinja_env.globals.update(t=host_t, number=lambda value: "host-number", current_locale=lambda: "xx")
    before = dict(host.jinja_env.globals)

    @host.get("/page")
    def page():
        return render_template_string("{{ t('hello') }} {{ number(3) }} {{ current_locale() }}")

    PgbusWeb(host, url_prefix="/ops", database=database, registry=REGISTRY)
    runs.make("paused", paused_at=None)
    client = host.test_client()
    # The host's globals are the same objects, and its pages still use them.
    assert {name: host.jinja_env.globals[name] for name in before} == before
    assert client.get("/page").get_data(as_text=True) == "host:hello host-number xx"
    # The dashboard's pages and macros speak with their own words.
    response = client.get("/ops/workflows", headers={"Accept-Language": "de"})
    assert response.status_code == 200
    page_soup = soup(response)
    assert page_soup.select_one("html")["lang"] == "de"
    assert "host:" not in response.get_data(as_text=True)
    badge = page_soup.select_one("#pgbus-runs .pgbus-badge")
    key = f"pgbus.workflows.statuses.{badge['data-status']}"
    with force_locale("de"):
        german = t(key)
    assert badge.get_text(strip=True) == german != t(key)


def test_a_host_global_named_like_the_dashboards_macros_is_refused_at_start(database):
    host = Flask("host")
    host.jinja_env.globals["pgbus_web"] = "the host's own"
    with pytest.raises(RuntimeError, match="Jinja global named 'pgbus_web'"):
        PgbusWeb(host, url_prefix="/ops", database=database)
    assert host.jinja_env.globals["pgbus_web"] == "the host's own"


def test_init_app_style(database):
    web = PgbusWeb(url_prefix="/dash", database=database, page_size=5)
    host = Flask("host")
    web.init_app(host)
    assert host.test_client().get("/dash/workflows").status_code == 200
    with pytest.raises(RuntimeError, match="already registered"):
        web.init_app(host)


def test_unknown_setting_is_refused_by_name():
    with pytest.raises(TypeError, match="unknown pgbus-web setting.*page_sise"):
        PgbusWeb(database=None, page_sise=10)


def test_missing_database_url_is_a_clear_error(monkeypatch):
    monkeypatch.delenv(db.DATABASE_URL_ENV, raising=False)
    with pytest.raises(db.DatabaseUrlError, match="no database URL"):
        PgbusWeb(Flask("host"))


def test_htmx_is_served_by_the_blueprint_pinned(client):
    page = soup(client.get("/workflows"))
    script = page.select_one('script[src*="htmx"]')["src"]
    response = client.get(script)
    assert response.status_code == 200
    assert b"htmx" in response.data[:2000]
    assert "htmx.org 2.0.11" in open_vendor_versions()


def test_idiomorph_is_served_by_the_blueprint_pinned_and_axe_is_not(client):
    page = soup(client.get("/workflows"))
    script = page.select_one('script[src*="idiomorph"]')["src"]
    response = client.get(script)
    assert response.status_code == 200 and b"Idiomorph" in response.data[:2000]
    assert "idiomorph 0.8.0" in open_vendor_versions()
    assert client.get(script.replace("idiomorph-ext.min.js", "idiomorph.LICENSE")).status_code == 200
    # axe-core is a test asset only (the control: a page links no axe).
    assert page.select_one('script[src*="axe"]') is None
    assert client.get(script.replace("idiomorph-ext.min.js", "axe.min.js")).status_code == 404


def open_vendor_versions() -> str:
    from pathlib import Path

    import pgbus_web.web

    return (Path(pgbus_web.web.__file__).parent / "static" / "vendor" / "VERSIONS").read_text()


@pytest.mark.parametrize(
    "path", ["/workflows", "/workflows/no-such-run", "/workflows/insights/OrderWorkflow", "/health"]
)
def test_security_headers_and_vary_on_every_response(client, runs, path):
    runs.make("completed")
    response = client.get(path)
    for name, value in security.SECURITY_HEADERS.items():
        assert response.headers[name] == value
    assert "HX-Request" in response.headers["Vary"]


def test_static_assets_carry_the_headers_too(client):
    response = client.get("/pgbus-static/pgbus.css")
    assert response.status_code == 200
    assert response.headers["X-Content-Type-Options"] == "nosniff"
    assert "HX-Request" in response.headers["Vary"]


def test_pages_have_no_inline_script_or_style(client, runs):
    made = every_state(runs)
    for path in ["/workflows", f"/workflows/{made['paused_error']}", "/workflows/insights/OrderWorkflow"]:
        page = soup(client.get(path))
        assert page.select("style") == []
        assert page.select("[style]") == []
        for script in page.select("script"):
            assert script.get("src"), "inline script"
            assert not script.get_text(strip=True)
        assert not [tag for tag in page.find_all(True) if any(a.startswith("on") for a in tag.attrs)]


def test_csp_allows_only_the_dashboard_itself():
    policy = security.CONTENT_SECURITY_POLICY
    assert "script-src 'self'" in policy and "style-src 'self'" in policy
    assert "unsafe-inline" not in policy and "unsafe-eval" not in policy
    assert "frame-ancestors 'none'" in policy


def test_can_view_false_gets_403_page(database):
    app = make_app(database, can_view=lambda request: False)
    response = app.test_client().get("/workflows")
    assert response.status_code == 403
    assert text_of(soup(response).select_one("h1")) == "Not allowed"


def test_can_view_is_given_the_request(database):
    seen = []

    def can_view(request):
        seen.append(request.path)
        return request.headers.get("X-Staff") == "yes"

    client = make_app(database, can_view=can_view).test_client()
    assert client.get("/workflows").status_code == 403
    assert client.get("/workflows", headers={"X-Staff": "yes"}).status_code == 200
    assert seen == ["/workflows", "/workflows"]


def test_health_and_assets_answer_without_can_view(database):
    client = make_app(database, can_view=lambda request: False).test_client()
    assert client.get("/health").status_code == 200
    assert client.get("/pgbus-static/pgbus.css").status_code == 200


def test_open_dashboard_warns_once(database, caplog, monkeypatch):
    monkeypatch.setattr(security, "_warned_open", False)
    client = make_app(database).test_client()
    with caplog.at_level("WARNING", logger="pgbus_web.plumbing.security"):
        client.get("/workflows")
        client.get("/workflows")
    warnings = [r for r in caplog.records if "no can_view hook" in r.getMessage()]
    assert len(warnings) == 1


def test_health_ok(client):
    response = client.get("/health")
    assert response.status_code == 200
    assert response.get_json()["status"] == "ok"


def test_health_with_the_database_down(dead_database):
    response = make_app(dead_database).test_client().get("/health")
    assert response.status_code == 503
    assert response.get_json()["status"] == "unavailable"


@pytest.mark.parametrize(
    "path",
    ["/workflows", "/workflows/4b7f6a36-0000-0000-0000-000000000000", "/workflows/insights/OrderWorkflow"],
)
def test_pages_with_the_database_down_say_so_without_a_trace(dead_database, path):
    response = make_app(dead_database).test_client().get(path)
    assert response.status_code == 503
    page = soup(response)
    assert text_of(page.select_one("h1")) == "Database unavailable"
    body = response.get_data(as_text=True)
    assert "Traceback" not in body and "psycopg" not in body and "OperationalError" not in body


def test_a_host_app_mounts_the_dashboard_without_the_command_lines_packages(tmp_path):
    """tqdm and waitress come with the cli/standalone/demo extras: mounting
    the blueprint (and drawing a page of it) imports neither."""
    import subprocess
    import sys
    import textwrap

    script = textwrap.dedent(
        """
        import sys

        class Refuse:
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in ("tqdm", "waitress"):
                    raise ImportError(f"{name} is not installed")

        sys.meta_path.insert(0, Refuse())
        from flask import Flask
        from pgbus_web.extension import PgbusWeb

        host = Flask("host")
        PgbusWeb(host, url_prefix="/ops", database_url="postgresql://nobody@127.0.0.1:9/none",
                 run_operations=False)
        response = host.test_client().get("/ops/pgbus-static/pgbus.css")
        assert response.status_code == 200, response.status_code
        assert not {"tqdm", "waitress"} & set(sys.modules), sorted(sys.modules)
        print("mounted")
        """
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "mounted"


def test_a_command_that_needs_an_extra_says_which(monkeypatch):
    from click.testing import CliRunner

    from pgbus_web import progress
    from pgbus_web.launch import main_group as main

    real_import = __import__

    def refuse_tqdm(name, *args, **kwargs):
        if name.split(".")[0] == "tqdm":
            raise ImportError("no tqdm")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr("builtins.__import__", refuse_tqdm)
    with pytest.raises(
        progress.MissingExtra, match=r"install the cli extra \(pip install -e '\.\[cli\]' in the pgbus-web checkout\)"
    ):
        progress.bar(total=1)
    monkeypatch.undo()
    # Control: with tqdm there, a bar is made (off: no terminal here).
    with progress.bar(total=1) as bar:
        bar.update(1)
    assert CliRunner().invoke(main, ["--help"]).exit_code == 0


def test_pages_read_without_holding_a_transaction(database, engine):
    """Database.read: each statement its own transaction, so no BEGIN or
    ROLLBACK round trip and no connection idle in a transaction while a
    page draws; writes keep theirs."""
    from psycopg.pq import TransactionStatus

    with database.read() as conn:
        conn.execute(sa.text("SELECT 1"))
        assert conn.connection.dbapi_connection.info.transaction_status == TransactionStatus.IDLE
    # Control: a write is one transaction until it ends.
    with database.write() as conn:
        conn.execute(sa.text("SELECT 1"))
        assert conn.connection.dbapi_connection.info.transaction_status == TransactionStatus.INTRANS
    # The pool gives the next page a connection back in its default mode.
    with engine.connect() as conn:
        conn.execute(sa.text("SELECT 1"))
        assert conn.connection.dbapi_connection.info.transaction_status == TransactionStatus.INTRANS
