"""Who may do what: the two roles a signed-in user or an API token has, and
the names they go by (the audit trail records them as ``dashboard:<name>``)."""

from __future__ import annotations

import re

VIEWER = "viewer"
OPERATOR = "operator"
ROLES = (VIEWER, OPERATOR)
# Names go into the audit trail as dashboard:<name> and into URLs of logs:
# letters, digits and . _ @ -, at most 64.
NAME = re.compile(r"^[A-Za-z0-9._@-]{1,64}$")


class BadName(ValueError):
    """A user or token name outside NAME."""


def check_name(name: str) -> str:
    if not NAME.match(name or ""):
        raise BadName(f"invalid user name {name!r}: use 1 to 64 letters, digits, '.', '_', '@' or '-'")
    return name
