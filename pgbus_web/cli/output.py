"""How the reading commands answer: aligned tables for people, cut to the
terminal's width, or JSON Lines (one JSON object a line) for scripts."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterable, Sequence
from typing import Any

import click

# Width when standard output is not a terminal and COLUMNS is unset: wide
# enough for a run's row, narrow enough for a log.
DEFAULT_WIDTH = 160
# The narrowest a column is cut to, "…" included.
MIN_COLUMN = 6
GAP = "  "


def width() -> int:
    return shutil.get_terminal_size((DEFAULT_WIDTH, 24)).columns


def cell(value: Any) -> str:
    """A value as one line of text: None empty, control characters and
    line breaks as spaces (a stored value never breaks the table)."""
    if value is None:
        return ""
    text = str(value)
    return "".join(ch if ch.isprintable() else " " for ch in text)


def _cut(text: str, size: int) -> str:
    return text if len(text) <= size else text[: max(size - 1, 0)] + "…"


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]], total_width: int | None = None) -> list[str]:
    """The rows under their headers, each column as wide as its widest
    value; when the whole is wider than *total_width*, the widest columns
    are cut first (to MIN_COLUMN at the least), with "…" where cut."""
    total_width = total_width or width()
    body = [[cell(value) for value in row] for row in rows]
    widths = [max([len(header)] + [len(row[i]) for row in body]) for i, header in enumerate(headers)]
    over = sum(widths) + len(GAP) * (len(widths) - 1) - total_width
    while over > 0:
        widest = max(range(len(widths)), key=lambda i: widths[i])
        if widths[widest] <= MIN_COLUMN:
            break
        take = min(over, widths[widest] - MIN_COLUMN, max(widths[widest] - sorted(widths)[-2], 1))
        widths[widest] -= take
        over -= take
    lines = []
    for row in [list(headers)] + body:
        line = GAP.join(_cut(text, size).ljust(size) for text, size in zip(row, widths, strict=False)).rstrip()
        lines.append(_cut(line, total_width))
    return lines


def echo_table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
    for line in table(headers, rows):
        click.echo(line)


def echo_json_lines(objects: Iterable[Any]) -> None:
    for value in objects:
        click.echo(json.dumps(value, ensure_ascii=False, separators=(",", ":")))
