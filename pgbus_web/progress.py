"""Progress bars for the command line: tqdm on standard error, drawn only
on a terminal (a log gets none of its redraws). tqdm is imported when a bar
is made, not with the package: a host app that mounts the dashboard never
needs it (it comes with the cli, standalone, demo and test extras)."""

from __future__ import annotations

import sys
from typing import Any


class MissingExtra(RuntimeError):
    """A command needs a package its extra brings."""

    def __init__(self, package: str, extra: str) -> None:
        super().__init__(
            f"this command needs {package}: install the {extra} extra "
            f"(pip install -e '.[{extra}]' in the pgbus-web checkout)"
        )


def bar(**options: Any):
    """A tqdm bar with *options*; on standard error, and off unless that is
    a terminal, unless *options* say otherwise."""
    try:
        from tqdm import tqdm
    except ImportError:
        raise MissingExtra("tqdm", "cli") from None
    options.setdefault("file", sys.stderr)
    options.setdefault("disable", not sys.stderr.isatty())
    return tqdm(**options)
