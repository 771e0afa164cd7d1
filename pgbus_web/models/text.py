"""Capping long text before it is stored."""

from __future__ import annotations

ELLIPSIS = "…"


def truncate(value: str, limit: int) -> str:
    """*value* cut to at most *limit* characters, marked with an ellipsis when cut."""
    if len(value) <= limit:
        return value
    return value[: max(limit - len(ELLIPSIS), 0)] + ELLIPSIS
