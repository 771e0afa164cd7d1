"""Each list the SQL spells out, each status it names and each bound it
checks, declared once: the runs' latest_* columns in rules/columns.py,
the statuses in rules/states.py (the SQL reads them as models.STATES),
the bounds in rules/limits.py.

The package's source is read for a latest_* column list (three or more of
those names in one string) or a run, step or operation status written as
a SQL literal (``'queued'``) anywhere but their homes; the schema's
scripts are migrations, kept as written, so the installed tables and
constraints are compared with the declarations instead.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import sqlalchemy as sa

import pgbus_web
from pgbus_web.rules import columns, limits, states

PACKAGE = Path(pgbus_web.__file__).resolve().parent
HOMES = frozenset({PACKAGE / "rules" / "columns.py", PACKAGE / "rules" / "states.py"})

# A list: this many of the latest_* names in one string.
LIST_NAMES = 3
LATEST_NAME = re.compile(rf"\b({'|'.join(columns.LATEST_COLUMNS)})\b")
# The step statuses share words with the runs' (waiting, completed, failed,
# cancelled), so they are read from the rules too.
STATUSES = sorted(set(states.RUN) | set(states.OPERATION) | set(states.STEP), key=len, reverse=True)
STATUS_LITERAL = re.compile(rf"'({'|'.join(STATUSES)})'")


def strings(source: str):
    """(line, text) of every string in *source* but the docstrings (prose
    may name the columns), an f-string's literal parts each on its own."""
    tree = ast.parse(source)
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            yield node.lineno, node.value


def written_again(name: str, source: str) -> list[str]:
    """What *source* (module *name*) writes again: latest_* lists and
    status literals."""
    found = []
    for line, text in strings(source):
        names = set(LATEST_NAME.findall(text))
        if len(names) >= LIST_NAMES:
            found.append(f"{name}:{line}: the latest_* columns listed ({', '.join(sorted(names))})")
        for literal in STATUS_LITERAL.findall(text):
            found.append(f"{name}:{line}: the status '{literal}' as a SQL literal")
    return found


def test_no_column_list_or_status_literal_outside_their_homes():
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path in HOMES:
            continue
        found += written_again(str(path.relative_to(PACKAGE)), path.read_text(encoding="utf-8"))
    assert found == [], (
        "build the list from rules/columns.py and name a status as models.STATES.<NAME> "
        "(or among() of a rules/states tuple):\n" + "\n".join(found)
    )


def test_the_guard_catches_a_planted_list_and_literal():
    # The controls: what the scan above must catch, and what it must let be.
    planted = (
        'LIST = "SELECT latest_step_id, latest_step_name, latest_step_status FROM pgbus_workflows"\n'
        "def claim(i):\n"
        "    return f\"UPDATE pgbus_web_operations SET status = 'queued' WHERE id = {i}\"\n"
        "WAITING = \"WHERE w.status = 'waiting'\"\n"
    )
    found = sorted(written_again("planted.py", planted))
    assert len(found) == 3, found
    assert found[0].startswith("planted.py:1: the latest_* columns listed")
    assert "'queued'" in found[1] and found[1].startswith("planted.py:3:")
    assert "'waiting'" in found[2] and found[2].startswith("planted.py:4:")
    clean = (
        "from pgbus_web.models import STATES\n"
        "from pgbus_web.rules.columns import latest_list\n"
        'LIST = f"SELECT {latest_list()} FROM pgbus_workflows WHERE status = {STATES.OPERATION_QUEUED}"\n'
        'ONE = "COALESCE(w.latest_step_name, w.current_step), w.latest_error_class"\n'
    )
    assert written_again("clean.py", clean) == []


def test_the_declared_latest_columns_are_the_installed_tables(engine):
    with engine.connect() as conn:
        run_columns = (
            conn.execute(
                sa.text(
                    "SELECT column_name FROM information_schema.columns WHERE table_schema = current_schema() "
                    "AND table_name = 'pgbus_workflows' AND column_name LIKE 'latest\\_%' ORDER BY ordinal_position"
                )
            )
            .scalars()
            .all()
        )
        step_columns = set(
            conn.execute(
                sa.text(
                    "SELECT column_name FROM information_schema.columns WHERE table_schema = current_schema() "
                    "AND table_name = 'pgbus_workflow_steps'"
                )
            )
            .scalars()
            .all()
        )
    assert tuple(run_columns) == columns.LATEST_COLUMNS
    assert set(columns.LATEST_STEP_FIELDS) <= step_columns


def _checks(conn, table: str) -> list[str]:
    return (
        conn.execute(
            sa.text(
                "SELECT pg_get_constraintdef(oid) FROM pg_constraint "
                "WHERE conrelid = CAST(:table AS regclass) AND contype = 'c'"
            ),
            {"table": table},
        )
        .scalars()
        .all()
    )


def test_the_schemas_bounds_are_the_rules(engine):
    with engine.connect() as conn:
        operation_checks = _checks(conn, "pgbus_web_operations")
        reason_checks = [
            definition
            for table in (
                "pgbus_workflow_events",
                "pgbus_web_operations",
                "pgbus_web_policy",
                "pgbus_web_policy_history",
            )
            if conn.execute(sa.text("SELECT to_regclass(:t)"), {"t": table}).scalar() is not None
            for definition in _checks(conn, table)
            if "reason" in definition
        ]
    rate = [definition for definition in operation_checks if "rate >" in definition]
    assert len(rate) == 1
    highest = re.search(r"rate <= \(?(\d+(?:\.\d+)?)", rate[0])
    assert highest is not None, rate[0]
    assert float(highest.group(1)) == limits.RATE_MAX
    # The control: there are reasons' checks to compare, each at REASON_LIMIT.
    assert reason_checks
    for definition in reason_checks:
        assert re.search(r"char_length\(\w+\) <= (\d+)", definition).group(1) == str(limits.REASON_LIMIT), definition
