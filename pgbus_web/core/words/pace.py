"""An operation's pace in words (the rate, about how long it takes at
that rate, the ceiling of runs in flight): the preview and the page, the
API's preview, the command line's preview and its operation."""

from __future__ import annotations

from datetime import timedelta

from babel.numbers import format_decimal

from ...i18n import current_locale, t
from . import timefmt


def format_rate(rate: float) -> str:
    """A rate as the operator's language writes it: 50, 0.5 (0,5)."""
    return format_decimal(round(rate, 3) if rate != int(rate) else int(rate), locale=current_locale())


def pace_lines(rate: float | None, max_in_flight: int | None, runs: int | None = None) -> list[str]:
    """The pace in words: the rate (and, given *runs*, about how long it
    takes at that rate) and the ceiling of runs in flight."""
    lines = []
    if rate:
        shown = format_rate(rate)
        if runs:
            lines.append(
                t(
                    "pgbus.operations.pace.rate_for",
                    rate=shown,
                    duration=timefmt.duration(timedelta(seconds=runs / rate)),
                )
            )
        else:
            lines.append(t("pgbus.operations.pace.rate_line", rate=shown))
    if max_in_flight:
        lines.append(t("pgbus.operations.pace.in_flight_line", count=max_in_flight))
    return lines


def unpaced() -> str:
    """An operation with neither a rate nor a ceiling of runs in flight."""
    return t("pgbus.operations.pace.none")


def described(rate: float | None, max_in_flight: int | None) -> list[str]:
    """An operation's pace as its lines, or that it has none."""
    return pace_lines(rate, max_in_flight) or [unpaced()]
