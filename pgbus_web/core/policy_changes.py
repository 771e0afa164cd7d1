"""The policy as the doors show and change it: every rule with its value,
its default, who changed it last and why; a change by a principal with
the policy power (an admin), kept with its old and new value; the history.
The Policy page, ``GET``/``PUT /api/v1/policy`` and ``pgbus-web policy``
call these and nothing else.
"""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy.engine import Engine

from ..rules import roles
from . import permissions, policy
from .permissions import Principal

# History rows a door shows at most.
HISTORY_SHOWN = 100


def rules(engine: Engine) -> list[dict[str, Any]]:
    """Each rule in the order of policy.KEYS: its value (the default when
    not stored), the default, whether it is the default, its version and
    the last change's who, when and why."""
    kept = policy.read(engine)
    shown = []
    for key in policy.KEYS:
        row = kept.rows.get(key)
        shown.append(
            {
                "key": key,
                "value": kept.value_of(key),
                "default": policy.DEFAULTS[key],
                "is_default": row is None,
                "version": kept.version_of(key),
                "changed_by": row["changed_by"] if row else None,
                "changed_at": row["changed_at"] if row else None,
                "reason": row["reason"] if row else None,
            }
        )
    return shown


def history(engine: Engine, key: str | None = None, limit: int = HISTORY_SHOWN) -> list[dict[str, Any]]:
    if key is not None and key not in policy.KEYS:
        policy.check(key, None)  # the unknown rule's refusal
    return policy.history(engine, key=key, limit=min(int(limit), HISTORY_SHOWN))


def parse_value(text: str) -> Any:
    """A value typed as JSON text (the page's field, the command's
    argument); PolicyError when it is not JSON."""
    try:
        return json.loads(text)
    except (TypeError, ValueError):
        raise policy.PolicyError("not_json", "the value is not JSON", rule="value") from None


def change(
    engine: Engine,
    principal: Principal,
    key: str,
    value: Any,
    *,
    reason: str | None,
    expected_version: int | None = None,
    reset: bool = False,
) -> dict[str, Any]:
    """Set (or with *reset*, return to its default) the rule *key* for
    *principal*, who must hold the policy power: NotPermitted otherwise,
    and PolicyError for a value the rule cannot take. Nothing is written
    when anything is refused."""
    permissions.require(principal, roles.POLICY, None, policy.current(engine))
    if key not in policy.KEYS:
        policy.check(key, value)
    if reset:
        value = None
    return policy.change(engine, key, value, actor=principal.actor, reason=reason, expected_version=expected_version)
