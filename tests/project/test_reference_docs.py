"""The performance and operations docs stay references a newcomer can read
through: each under 400 lines (the measurements of earlier versions go to
bench/results/, which each doc points to), and every benchmark a figure
names as its command is a script in bench/ that takes the options named."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
REFERENCES = {
    "performance.md": "bench/results/performance-history.md",
    "operations.md": "bench/results/operations-history.md",
}
MAX_LINES = 400

_COMMAND = re.compile(r"python (bench/\w+\.py)((?:\s+--[a-z-]+)*)")


def too_long(text: str) -> bool:
    return len(text.splitlines()) >= MAX_LINES


def wrong_commands(text: str, root: Path = ROOT) -> list[str]:
    """Each `python bench/x.py --option` in *text* whose script does not
    exist or does not declare the option."""
    wrong = []
    for match in _COMMAND.finditer(" ".join(text.split())):
        script = root / match.group(1)
        if not script.is_file():
            wrong.append(f"{match.group(1)}: no such script")
            continue
        source = script.read_text(encoding="utf-8")
        for option in match.group(2).split():
            if f'"{option}"' not in source:
                wrong.append(f"{match.group(1)}: no option {option}")
    return wrong


@pytest.mark.parametrize("name", sorted(REFERENCES))
def test_a_reference_stays_short_and_points_to_its_history(name):
    text = (ROOT / "docs" / name).read_text(encoding="utf-8")
    assert not too_long(text), f"docs/{name} has {len(text.splitlines())} lines: move history to {REFERENCES[name]}"
    assert REFERENCES[name] in text
    assert (ROOT / REFERENCES[name]).is_file()


@pytest.mark.parametrize("name", sorted(REFERENCES))
def test_every_benchmark_command_runs_as_written(name):
    text = (ROOT / "docs" / name).read_text(encoding="utf-8")
    assert _COMMAND.search(text)  # control: the doc names its commands
    assert wrong_commands(text) == []


def test_the_checks_catch_a_long_doc_and_a_wrong_command():
    assert too_long("line\n" * MAX_LINES)
    assert not too_long("line\n" * (MAX_LINES - 1))
    assert wrong_commands("`python bench/scale.py --database-url URL --pages`") == []
    assert wrong_commands("`python bench/scale.py --nothing`") == ["bench/scale.py: no option --nothing"]
    assert wrong_commands("`python bench/nothing.py`") == ["bench/nothing.py: no such script"]
