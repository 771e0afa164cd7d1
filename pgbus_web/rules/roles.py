"""Who may do what: the four roles a principal has (a signed-in user, an
API token, the MCP server or the command line given a token), what each
role may do, and the names principals go by (the audit trail records them
as ``dashboard:<name>``, ``api:<name>``, ``cli:<name>``, ``mcp:<name>``).

The powers are the verb table's names (act on a run) plus three more:
``approve`` (another principal's operation), ``reveal`` (a value the
policy redacts) and ``policy`` (change the policy). A role holds the
powers of the roles below it. The policy's grants (core/policy.py) give a
role's powers narrowed to some classes and verbs; core/permissions.py
decides."""

from __future__ import annotations

import re

from . import verb_table

VIEWER = "viewer"
OPERATOR = "operator"
APPROVER = "approver"
ADMIN = "admin"
# Lowest to highest: each holds the powers of those before it.
ROLES = (VIEWER, OPERATOR, APPROVER, ADMIN)

APPROVE = "approve"
REVEAL = "reveal"
POLICY = "policy"
# See every signed-in session and API token, end them, read the access log.
SESSIONS = "sessions"
RUN_VERBS = tuple(verb.name for verb in verb_table.TABLE)
# Every power a grant may name.
# The powers that are not a verb on runs.
BEYOND_VERBS = (APPROVE, REVEAL, POLICY, SESSIONS)
POWERS = RUN_VERBS + BEYOND_VERBS

_OWN = {
    VIEWER: (),
    OPERATOR: RUN_VERBS,
    APPROVER: (APPROVE,),
    ADMIN: (REVEAL, POLICY, SESSIONS),
}


def powers(role: str) -> frozenset[str]:
    """Every power *role* holds (nothing for a name that is not a role)."""
    if role not in ROLES:
        return frozenset()
    held: set[str] = set()
    for name in ROLES[: ROLES.index(role) + 1]:
        held.update(_OWN[name])
    return frozenset(held)


# Names go into the audit trail as dashboard:<name> and into URLs of logs:
# letters, digits and . _ @ -, at most 64.
NAME = re.compile(r"^[A-Za-z0-9._@-]{1,64}$")


class BadName(ValueError):
    """A user or token name outside NAME."""


def check_name(name: str) -> str:
    if not NAME.match(name or ""):
        raise BadName(f"invalid user name {name!r}: use 1 to 64 letters, digits, '.', '_', '@' or '-'")
    return name
