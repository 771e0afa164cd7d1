"""Waiting on a condition with a deadline, never for a fixed time: a
loaded machine may take seconds for what takes milliseconds, and an idle
one goes on as soon as the condition holds."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_until(
    condition: Callable[[], T],
    *,
    timeout: float = 60.0,
    what: str = "the condition",
    every: float = 0.05,
    ignoring: tuple[type[BaseException], ...] = (),
) -> T:
    """Call *condition* until it returns something true, and return that.
    After *timeout* seconds fail, naming *what* was awaited and the last
    answer. An exception of a type in *ignoring* (a server still starting)
    counts as a false answer; any other fails at once."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            last = condition()
        except ignoring as error:
            last = error
        else:
            if last:
                return last
        if time.monotonic() >= deadline:
            raise AssertionError(f"waited {timeout:g} s for {what}; last: {last!r}")
        time.sleep(every)
