"""The wheel's compiled catalogs: each translations/<locale>/LC_MESSAGES/
pgbus_web.po compiled to pgbus_web.mo inside the wheel (under
pgbus_web/translations/), so an installed dashboard needs no compile step.
The .po sources stay out of the wheel, and no .mo is ever written into the
source tree (a checkout compiles its .po in memory: docs/i18n.md)."""

from __future__ import annotations

import importlib.util
import tempfile
from pathlib import Path

from hatchling.builders.hooks.plugin.interface import BuildHookInterface


def _catalog_files(root: Path):
    # By path: the package itself may not be importable while it is built.
    spec = importlib.util.spec_from_file_location("_pgbus_catalog_files", root / "pgbus_web" / "catalog_files.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class CatalogsHook(BuildHookInterface):
    PLUGIN_NAME = "pgbus-web-catalogs"

    def initialize(self, version: str, build_data: dict) -> None:
        if self.target_name != "wheel":
            return
        root = Path(self.root)
        files = _catalog_files(root)
        sources = root / "translations"
        self._out = tempfile.TemporaryDirectory(prefix="pgbus-web-mo-")
        for locale in files.locales(sources):
            compiled = Path(self._out.name) / locale / f"{files.DOMAIN}.mo"
            compiled.parent.mkdir(parents=True)
            compiled.write_bytes(files.compile_po(files.po_path(sources, locale), locale))
            target = f"pgbus_web/translations/{locale}/LC_MESSAGES/{files.DOMAIN}.mo"
            build_data["force_include"][str(compiled)] = target

    def finalize(self, version: str, build_data: dict, artifact_path: str) -> None:
        if getattr(self, "_out", None) is not None:
            self._out.cleanup()
