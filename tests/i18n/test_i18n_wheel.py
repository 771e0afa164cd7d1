"""The built wheel, installed (not editable) in a fresh virtual
environment with its declared dependencies, serves the dashboard in
Japanese from the compiled catalogs the build put in it; and those
catalogs say what the .po files say.

Slow (a build and an install): it never skips, so CI always proves it."""

from __future__ import annotations

import io
import subprocess
import sys
import textwrap
import venv
import zipfile
from gettext import GNUTranslations
from pathlib import Path

import pytest

from pgbus_web import catalog_files, i18n

ROOT = Path(__file__).resolve().parents[2]

# The wheel is built once, on one worker (pytest-xdist --dist loadgroup).
pytestmark = pytest.mark.xdist_group("wheel")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "--wheel-dir", str(out), str(ROOT)],
        check=True,
        timeout=600,
    )
    (built,) = out.glob("pgbus_web-*.whl")
    return built


def _entries(translations: GNUTranslations) -> dict:
    return {key: value for key, value in translations._catalog.items() if key != ""}


def test_the_wheel_carries_every_catalog_compiled_and_agreeing_with_its_po(wheel):
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        for locale in i18n.available_locales():
            member = f"pgbus_web/translations/{locale}/LC_MESSAGES/{catalog_files.DOMAIN}.mo"
            assert member in names, member
            shipped = GNUTranslations(io.BytesIO(archive.read(member)))
            source = GNUTranslations(
                io.BytesIO(catalog_files.compile_po(catalog_files.po_path(i18n.translations_dir(), locale), locale))
            )
            assert _entries(shipped) == _entries(source), locale
            assert len(_entries(shipped)) > 100
    # The sources stay out: the installed dashboard reads the .mo.
    assert not [name for name in names if name.endswith(".po")]


def test_the_installed_wheel_in_a_fresh_venv_serves_japanese(wheel, tmp_path, database_url, engine):
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    python = env_dir / "bin" / "python"
    subprocess.run([str(python), "-m", "pip", "install", "--quiet", str(wheel)], check=True, timeout=900)
    script = textwrap.dedent(
        f"""
        import pathlib, sys
        from flask import Flask
        import pgbus_web
        from pgbus_web.extension import PgbusWeb

        package = pathlib.Path(pgbus_web.__file__).resolve().parent
        assert package.is_relative_to(pathlib.Path(sys.prefix).resolve()), package
        assert not list(package.rglob("*.po")), "sources in the install"
        host = Flask("host")
        PgbusWeb(host, url_prefix="/ops", database_url={database_url!r}, run_operations=False)
        page = host.test_client().get("/ops/workflows", headers={{"Accept-Language": "ja"}})
        print(page.status_code)
        print(page.get_data(as_text=True))
        """
    )
    result = subprocess.run([str(python), "-c", script], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    status, _, html = result.stdout.partition("\n")
    assert status == "200"
    assert '<html lang="ja"' in html
    assert "<h1>ワークフロー</h1>" in html
    assert "pgbus.workflows." not in html
