"""Who acts, proven, and what they may do: the one function every door
asks (``may``), and the refusal it raises (``require``).

A principal is a signed-in user (users file or a host app's sign-in), an
API token (at the API, or given to the command line or the MCP server),
or break-glass: a command given only a database URL. Break-glass may do
what the database lets it (it could write SQL anyway) but never approve,
and every audit line it writes says so. The system (worker, sweeps) acts
outside this model.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ..rules import roles
from .policy import Grant, Policy

USER = "user"
TOKEN = "token"
BREAK_GLASS = "break-glass"

# The doors, as the actor string names them.
DASHBOARD, API, CLI, MCP = "dashboard", "api", "cli", "mcp"


@dataclass(frozen=True)
class Principal:
    kind: str
    name: str
    role: str
    door: str
    groups: tuple[str, ...] = ()
    # A read-only token: it may do nothing, whatever its role or a grant.
    read_only: bool = False

    @property
    def key(self) -> str:
        """Who this is whatever the door: the approver must be another key."""
        return BREAK_GLASS if self.kind == BREAK_GLASS else f"{self.kind}:{self.name}"

    @property
    def actor(self) -> str:
        """The audit trail's name: the door and the proven name."""
        return f"{self.door}:{BREAK_GLASS}" if self.kind == BREAK_GLASS else f"{self.door}:{self.name}"

    @property
    def break_glass(self) -> bool:
        return self.kind == BREAK_GLASS


def user(name: str, role: str, *, groups: Iterable[str] = (), door: str = DASHBOARD) -> Principal:
    return Principal(USER, name, role, door, tuple(groups))


def token(name: str, role: str, *, door: str, read_only: bool = False) -> Principal:
    return Principal(TOKEN, name, role, door, read_only=read_only)


def break_glass(door: str) -> Principal:
    return Principal(BREAK_GLASS, BREAK_GLASS, roles.ADMIN, door)


def _names(grant: Grant, principal: Principal) -> bool:
    kind, _, name = grant.to.partition(":")
    if kind == "group":
        return name in principal.groups
    return kind == principal.kind and name == principal.name


def may(principal: Principal, power: str, workflow_class: str | None, policy: Policy) -> bool:
    """May *principal* use *power* (a verb's name, approve, reveal or
    policy) on runs of *workflow_class* (None: a power of no class, or
    "of every class")? Its role, then the policy's grants naming it."""
    if principal.read_only:
        return False
    if principal.break_glass:
        return power != roles.APPROVE
    if power in roles.powers(principal.role):
        return True
    return any(
        _names(grant, principal) and power in grant.powers() and grant.covers(workflow_class) for grant in policy.grants
    )


def may_some(principal: Principal, power: str, policy: Policy) -> bool:
    """May *principal* use *power* on the runs of at least one class (a
    menu worth drawing)?"""
    if may(principal, power, None, policy):
        return True
    if principal.read_only:
        return False
    return any(_names(grant, principal) and power in grant.powers() for grant in policy.grants)


def acts_at_all(principal: Principal, policy: Policy) -> bool:
    """May *principal* use any verb on some class?"""
    return any(may_some(principal, verb, policy) for verb in roles.RUN_VERBS)


def fingerprint(principal: Principal, policy: Policy) -> tuple[Any, ...]:
    """What a drawing for *principal* depends on: equal for two principals
    who may do the same (kept rows are shared between them)."""
    mine = tuple(grant for grant in policy.grants if _names(grant, principal))
    return (principal.role, principal.break_glass, principal.read_only, mine, policy.marker if mine else 0)


class NotPermitted(Exception):
    """*actor* may not use *power* on runs of *workflow_class* (None: the
    policy, or approving as break-glass). Nothing was changed."""

    def __init__(self, principal: Principal, power: str, workflow_class: str | None = None) -> None:
        self.principal = principal
        self.actor = principal.actor
        self.power = power
        self.workflow_class = workflow_class
        super().__init__(
            f"{principal.actor} may not {power}" + (f" runs of {workflow_class}" if workflow_class is not None else "")
        )


def require(principal: Principal, power: str, workflow_class: str | None, policy: Policy) -> None:
    if not may(principal, power, workflow_class, policy):
        raise NotPermitted(principal, power, workflow_class)


def require_all(principal: Principal, power: str, classes: Iterable[str], policy: Policy) -> None:
    """NotPermitted naming the first of *classes* (sorted) *principal* may
    not use *power* on."""
    for workflow_class in sorted(classes):
        require(principal, power, workflow_class, policy)
