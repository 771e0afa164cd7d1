"""docs/package.md's map against the tree: a newcomer follows its paths, so
every module, folder and name it points at must exist, and what it must
name (every top-level part of the package, every module of core/, models/
and rules/) must be there. Renaming or adding such a module fails here
until the map says so too."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "pgbus_web"
MAP = ROOT / "docs" / "package.md"

# A path under pgbus_web/ written in backticks: a folder (`core/`), a file
# (`core/page_reads.py`, `schema/v6.sql`, `app.py`, `web/static/keys.js`), or a
# module and a name in it (`core/page_reads.find_run`,
# `runtime/worker.Worker.tick`). The checkout's own files (tests/,
# scripts/, pyproject.toml) are read from its root.
_FILE = r"[\w.-]+\.(?:py|sql|html|js|css|json|toml|yml|md|sh|txt)"
_PATH = re.compile(rf"`(?P<path>(?:[a-z_]\w*/)*(?:[a-z_]\w*/|{_FILE}|(?:[a-z_]\w*/)[a-z_]\w*(?:\.\w+)+))`")
# Where the map must name every module, not only the folder: the domain
# and the two layers below it, whose modules a door is told to look up.
EVERY_MODULE_OF = ("core", "models", "rules")


def named_paths(text: str) -> set[str]:
    return {match.group("path") for match in _PATH.finditer(text)}


def _top_level_names(module: Path) -> set[str]:
    tree = ast.parse(module.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(target.id for target in targets if isinstance(target, ast.Name))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
    return names


def missing(path: str, package: Path = PACKAGE, root: Path = ROOT) -> str | None:
    """Why *path*, as the map writes it, names nothing in the tree, or None."""
    # The checkout's own files (`pyproject.toml`, `tests/...`, `scripts/...`)
    # are read from its root; everything else from the package.
    outside = path.startswith(("tests/", "scripts/", "bench/", "docs/", "pgbus_web/"))
    at_root = "/" not in path and not path.endswith((".py", ".sql"))
    base = root if outside or at_root else package
    if path.endswith("/"):
        return None if (base / path).is_dir() else "no such folder"
    if re.fullmatch(rf"(?:\w+/)*{_FILE}", path):
        return None if (base / path).is_file() else "no such file"
    folder, _, dotted = path.rpartition("/")
    module_name, *attributes = dotted.split(".")
    module = base / folder / f"{module_name}.py"
    if not module.is_file():
        module = base / folder / module_name / "__init__.py"
        if not module.is_file():
            return "no such module"
    if attributes[0] not in _top_level_names(module):
        return f"{module_name} has no {attributes[0]}"
    return None


def unnamed(text: str, package: Path = PACKAGE) -> list[str]:
    """What the map must name and does not: a top-level module or package,
    a module (or a package) directly in core/, models/ or rules/."""
    named = named_paths(text)
    named_modules = {path.split(".")[0] if not path.endswith((".py", ".sql", "/")) else path for path in named}
    wanted = []
    for child in sorted(package.iterdir()):
        if child.name.startswith(("_", ".")) and child.name != "__main__.py":
            continue
        if child.is_dir() and (child / "__init__.py").is_file():
            wanted.append(f"{child.name}/")
        elif child.suffix == ".py":
            wanted.append(child.name)
    for folder in EVERY_MODULE_OF:
        for child in sorted((package / folder).iterdir()):
            if child.suffix == ".py" and child.name != "__init__.py":
                wanted.append(f"{folder}/{child.name}")
            elif child.is_dir() and (child / "__init__.py").is_file():
                wanted.append(f"{folder}/{child.name}/")
    # A module named with one of its names (`core/page_reads.find_run`) is named.
    return [path for path in wanted if path not in named and path.removesuffix(".py") not in named_modules]


def test_every_path_the_map_names_exists():
    text = MAP.read_text(encoding="utf-8")
    paths = named_paths(text)
    # Control: the map is read, with each kind of path in it.
    assert {"core/", "core/page_reads.py", "core/page_reads.find_run", "schema/v6.sql", "app.py"} <= paths
    assert len(paths) > 100
    wrong = sorted(f"{path}: {why}" for path in paths if (why := missing(path)))
    assert wrong == []


def test_the_map_names_every_part_and_every_core_models_and_rules_module():
    assert unnamed(MAP.read_text(encoding="utf-8")) == []


def test_a_wrong_name_in_the_map_fails():
    # The checks themselves, on names planted in a copy of the map's text.
    assert missing("core/raeds.py") == "no such file"
    assert missing("core/wrods/") == "no such folder"
    assert missing("core/page_reads.find_runs") == "page_reads has no find_runs"
    assert missing("core/nothing.find_run") == "no such module"
    assert missing("tests/project/test_nothing.py") == "no such file"
    assert missing("web/static/nothing.js") == "no such file"
    assert missing("pyproject.toml") is None and missing("pyproject.json") == "no such file"
    assert named_paths("`web/static/vendor/htmx.min.js`") == {"web/static/vendor/htmx.min.js"}
    text = MAP.read_text(encoding="utf-8")
    planted = text.replace("`core/page_reads.py`", "`core/raeds.py`")
    assert planted != text
    assert any(missing(path) for path in named_paths(planted))
    # A module the map stops naming is reported.
    dropped = text.replace("`rules/approval.py`", "the approval rule")
    assert dropped != text
    assert set(unnamed(dropped)) - set(unnamed(text)) == {"rules/approval.py"}


def test_a_module_the_map_does_not_name_fails(tmp_path):
    # A tree with one more module in models/ and one more top-level part
    # than the map names.
    for folder in ("core", "models", "rules"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "__init__.py").write_text("")
    (tmp_path / "models" / "steps.py").write_text("")
    (tmp_path / "models" / "new_table.py").write_text("")
    (tmp_path / "newpart").mkdir()
    (tmp_path / "newpart" / "__init__.py").write_text("")
    text = "`core/`, `models/`, `rules/`, `models/steps.py`"
    assert unnamed(text, tmp_path) == ["newpart/", "models/new_table.py"]
