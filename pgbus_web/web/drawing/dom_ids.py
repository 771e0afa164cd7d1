"""Element ids derived from what a row shows: a run's id, a group's key.

The live refresh merges a fresh list into the page (idiomorph), which
matches elements by id: a row with its run's id keeps its node (focus, a
link's href) when runs come or go above it; rows without one are matched
by position, so a focused link would take another run's href.

A run id is any text another writer chose, so it is escaped into an id
that holds only ASCII letters, digits and ``-`` (safe in an id and in a
CSS selector): every other character, ``_`` included, is ``_`` and the
two hex digits of each of its UTF-8 bytes. Ids of different runs stay
different; a uuid stays as it is. The parts of a group's key are joined
by ``.``, which no escaped part holds.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

_KEPT = re.compile(r"[A-Za-z0-9-]")


def escape_part(value: Any) -> str:
    text = "" if value is None else str(value)
    return "".join(
        char if _KEPT.fullmatch(char) else "".join(f"_{byte:02x}" for byte in char.encode("utf-8")) for char in text
    )


def run_row_id(workflow_id: str) -> str:
    return f"pgbus-row-run-{escape_part(workflow_id)}"


def group_row_id(group: Mapping[str, Any], prefix: str = "pgbus-row-group") -> str:
    """A needs-attention group's row (or, with another prefix, a failed
    group's): its class, step, reason and error class name it."""
    parts = (group.get("workflow_class"), group.get("step_name"), group.get("reason"), group.get("error_class"))
    return prefix + "-" + ".".join(escape_part(part) for part in parts)
