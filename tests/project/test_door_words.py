"""Every sentence a door says comes from the core (docs/package.md): a
refusal from core/problems.py, a result, an outcome or a label from a
module of core/words/. Read from the code of the doors (web/routes,
web/answering, api, cli, mcp, launch), no door module

- calls a translation function itself (t, tn, t_html, tn_html, gettext,
  ngettext, pgettext, npgettext, lazy_gettext, _), nor imports one; nor
- builds a sentence: an f-string with a value in it, a ``%`` or a
  ``.format()`` of a string literal, or a ``+`` of a string literal and a
  value, whose literal text holds a sentence; nor
- writes one: a string literal holding a sentence given to a call (echoed,
  raised, answered, flashed).

A sentence is a word of two letters or more and, across a space, anything
else: "Operation {id} started." is one, "{status} {runs}",
"#pgbus-policy-{key}" are not. HTML tags (``<span class="...">``) and
placeholders are not words, and a tab-separated line ("NAME\\tROLE\\tLAST
USED", a header for scripts) is a machine's.

Not read as a door's words: a command's or an option's documentation
(what a decorator is given, ``help=``, a ``__doc__``), a log line (the
server's log, for whoever runs it), and DOCUMENTATION and ALLOWED
below, each with its reason. The web/drawing layer draws for the
templates and is not a door.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import pgbus_web

PACKAGE = Path(pgbus_web.__file__).resolve().parent
DOORS = ("web/routes", "web/answering", "api", "cli", "mcp", "launch")
TRANSLATIONS = frozenset(
    {"t", "tn", "t_html", "tn_html", "gettext", "ngettext", "pgettext", "npgettext", "lazy_gettext", "_"}
)
# What a log line is written with: its words are the server's log, not an answer.
LOGGERS = frozenset({"log", "logger", "logging"})
# Door modules that are documentation whole: no sentence in them is an
# answer (they still never translate).
DOCUMENTATION = {
    "api/openapi.py": "the API's OpenAPI description: its documentation, as a command's --help is",
    "api/metrics.py": "the metrics' HELP texts: Prometheus's documentation of each metric",
}
# (module, the start of the literal text as the check reads it): why it is no door's sentence.
ALLOWED = {
    (
        "mcp/server.py",
        "pgbus workflow runs: needs_attention",
    ): "the MCP server's instructions to its client: its documentation, as each tool's docstring is",
    (
        "mcp/server.py",
        "act_on_run, send_signal and start_operation act",
    ): "the MCP server's instructions to its client: its documentation, as each tool's docstring is",
    ("cli/common.py", "SELECT 1"): "the statement that checks a connection, no words",
}

TAG = re.compile(r"<[^>]*>")
PLACEHOLDER = re.compile(r"%\(\w+\)[sdr]|%[sdr]|\{[^{}]*\}")
HOLE = "\u2026"
# A word (two letters or more, then any punctuation) and, across spaces,
# anything; or anything and, across spaces, a word.
SENTENCE = re.compile(r"[^\W\d_]{2,}[^\w\s]*[ ]+\S|\S[ ]+[^\W\d_]{2,}")


def is_sentence(text: str) -> bool:
    if "\t" in text:
        return False
    return bool(SENTENCE.search(PLACEHOLDER.sub(HOLE, TAG.sub("", text))))


def _literal(node: ast.AST) -> str | None:
    """A string literal's text (an f-string's, with a hole for each value)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(part.value if isinstance(part, ast.Constant) else HOLE for part in node.values)
    return None


def built_text(node: ast.AST) -> str | None:
    """The literal text of a string *node* builds at run time (None: it builds none)."""
    if isinstance(node, ast.JoinedStr):
        return _literal(node) if any(isinstance(part, ast.FormattedValue) for part in node.values) else None
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
        return _literal(node.left)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        sides = [_literal(node.left), _literal(node.right)]
        if any(side is not None for side in sides) and any(side is None for side in sides):
            return HOLE.join(side or "" for side in sides)
        return None
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "format":
        receiver = node.func.value
        # Markup("...").format(...): the literal inside.
        if isinstance(receiver, ast.Call) and receiver.args:
            receiver = receiver.args[0]
        return _literal(receiver)
    return None


def _documentation(tree: ast.AST) -> set[int]:
    """The nodes that document rather than say: a decorator's arguments,
    ``help=``, an assigned ``__doc__``, a log call's arguments."""
    skipped: set[int] = set()

    def skip(node: ast.AST) -> None:
        skipped.update(id(inner) for inner in ast.walk(node))

    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            for decorator in node.decorator_list:
                skip(decorator)
        elif isinstance(node, ast.keyword) and node.arg == "help":
            skip(node.value)
        elif isinstance(node, ast.Assign) and any(
            isinstance(target, ast.Attribute) and target.attr == "__doc__" for target in node.targets
        ):
            skip(node.value)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id in LOGGERS
        ):
            skip(node)
    return skipped


def _called_name(node: ast.Call) -> str | None:
    func = node.func
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return None


def offences(source: str, module: str) -> list[str]:
    """What *source* (door module *module*) says itself, one line each."""
    tree = ast.parse(source)
    skipped = _documentation(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            for alias in node.names:
                if alias.name in TRANSLATIONS:
                    found.append(f"{module}:{node.lineno}: imports the translation function {alias.name}")
        elif isinstance(node, ast.Call) and _called_name(node) in TRANSLATIONS:
            found.append(f"{module}:{node.lineno}: calls the translation function {_called_name(node)}")
        if id(node) in skipped or module in DOCUMENTATION:
            continue
        text = built_text(node)
        if text is not None and is_sentence(text) and not _allowed(module, text):
            found.append(f"{module}:{node.lineno}: builds the sentence {text!r}")
        if isinstance(node, ast.Call):
            for given in [*node.args, *(keyword.value for keyword in node.keywords)]:
                text = _literal(given) if isinstance(given, ast.Constant) else None
                if id(given) in skipped or text is None or not is_sentence(text) or _allowed(module, text):
                    continue
                found.append(f"{module}:{given.lineno}: writes the sentence {text!r}")
    return found


def _allowed(module: str, text: str) -> bool:
    return any(module == where and text.startswith(start) for where, start in ALLOWED)


def door_modules() -> list[Path]:
    return sorted(path for door in DOORS for path in (PACKAGE / door).rglob("*.py"))


def test_the_doors_are_there():
    # Control: a renamed folder would leave nothing to read.
    modules = {path.relative_to(PACKAGE).as_posix() for path in door_modules()}
    for door in DOORS:
        assert any(module.startswith(door + "/") for module in modules), door


@pytest.mark.parametrize("path", door_modules(), ids=lambda path: path.relative_to(PACKAGE).as_posix())
def test_a_door_says_only_the_cores_sentences(path):
    assert offences(path.read_text(encoding="utf-8"), path.relative_to(PACKAGE).as_posix()) == []


def test_every_allowance_is_still_needed():
    # An allowance nothing needs any more goes.
    for module in DOCUMENTATION:
        assert (PACKAGE / module).is_file(), module
    for module, start in ALLOWED:
        source = (PACKAGE / module).read_text(encoding="utf-8")
        texts = [built_text(node) or _literal(node) for node in ast.walk(ast.parse(source))]
        assert any(text and text.startswith(start) for text in texts), (module, start)


PLANTED = """
import click
from ..i18n import t
from ..core.words import results


def done(operation, name, rows):
    click.echo(f"Operation {operation['id']} started.")
    raise click.ClickException("no user %s here" % name)
    message = "Revoked the token {}.".format(name)
    flash("ok", "Ended the session of " + name)
    click.echo("Dry run: nothing changed.")
    return t("pgbus.operations.started", operation_id=operation["id"])
"""

CLEAN = '''
import logging

import click
from markupsafe import Markup

from ..core.words import command_line, results

log = logging.getLogger(__name__)


@click.option("--at", help=f"When (ISO 8601, at most {YEARS} years ahead).")
def done(operation, name, rows, key):
    """Say it."""
    click.echo(results.operation_created(operation))
    click.echo(f"{name}\\t{operation['role']}")
    click.echo("NAME\\tROLE\\tLAST USED")
    click.echo(results.revealed())
    click.echo(", ".join(f"{status} {runs}" for status, runs in rows))
    log.warning(f"pgbus-web: operation {operation['id']} refused")
    anchor = "/policy" + f"#pgbus-policy-{key}"
    return Markup('<span class="pgbus-odd" data-odd="{kind}">{content}</span>').format(kind=key, content=name)
'''


def test_the_check_catches_a_door_that_writes_its_own_sentences():
    # Control: each way a door could say a sentence itself is caught.
    found = offences(PLANTED, "cli/planted.py")
    assert len(found) == 7, found
    assert any("imports the translation function t" in line for line in found)
    assert any("calls the translation function t" in line for line in found)
    for sentence in ("Operation", "no user", "Revoked the token", "Ended the session of "):
        assert any(f"builds the sentence '{sentence}" in line for line in found), (sentence, found)
    assert any("writes the sentence 'Dry run: nothing changed.'" in line for line in found), found


def test_the_check_lets_machine_formats_and_documentation_be():
    assert offences(CLEAN, "cli/clean.py") == []


@pytest.mark.parametrize(
    ("text", "sentence"),
    [
        ("Operation {id} started.", True),
        ("Filters: {a}. Reason: {b}", True),
        ("{status} {runs}", False),
        ("#pgbus-policy-{key}", False),
        ("  {workflow_id}", False),
        ('<div class="pgbus-messages" id="pgbus-messages"{oob}>{message}</div>', False),
        ("%(count)s runs", True),
        ("NAME\tROLE\tLAST USED", False),
    ],
)
def test_what_reads_as_a_sentence(text, sentence):
    assert is_sentence(text) is sentence
