"""The Policy page: every rule every process reads, its value, who changed
it last and why, and its history; an admin changes a rule here (the same
core function as ``PUT /api/v1/policy/<key>`` and ``pgbus-web policy set``).

GET /policy shows it; POST /policy/<key> changes one rule (``value`` as
JSON text, ``reason``, the ``version`` the form was drawn with, or
``reset``): a refusal draws the page again with the sentence beside the
field and what was typed, nothing changed."""

from __future__ import annotations

import json

from flask import Blueprint, Response, redirect, request, url_for

from ...core import permissions, policy, policy_changes, problems
from ...core.words import results
from ...plumbing.security import may, principal
from ...plumbing.state import state
from ...rules import roles
from ...runtime.clock import utcnow
from ..answering import answers, pages, render
from . import views


def _shown(value) -> str:
    return json.dumps(value, ensure_ascii=False, indent=2, sort_keys=True)


def _page(refused: dict | None = None, status: int = 200) -> Response:
    engine = state().database.primary
    rules = policy_changes.rules(engine)
    for rule in rules:
        rule["shown"] = _shown(rule["value"])
        rule["default_shown"] = _shown(rule["default"])
    page = {
        "rules": rules,
        "history": policy_changes.history(engine),
        "may_change": may(roles.POLICY),
        "refused": refused or {},
        "who": principal(),
        "now": utcnow(),
    }
    page.update(views.common())
    return render.page(pages.POLICY.template, page, pages.POLICY.fragments, status=status)


def show():
    """GET /policy."""
    return _page()


def change(key: str):
    """POST /policy/<key>."""
    form = request.form
    reset = form.get("reset") == "1"
    version_text = form.get("version", "").strip()
    version = int(version_text) if version_text.isdigit() else None
    try:
        value = None if reset else policy_changes.parse_value(form.get("value", ""))
        made = policy_changes.change(
            state().database.primary,
            principal(),
            key,
            value,
            reason=form.get("reason"),
            expected_version=version,
            reset=reset,
        )
    except (policy.PolicyError, permissions.NotPermitted) as problem:
        refusal = problems.refusal(problem)
        if refusal.status == 403:
            return answers.refused(refusal)
        return _page(
            {
                "key": key,
                "message": refusal.message,
                "field": refusal.field or "value",
                "value": form.get("value", ""),
                "reason": form.get("reason", ""),
            },
            refusal.status,
        )
    answers.flash_message("ok", results.policy_changed(made["key"]))
    return redirect(url_for("pgbus_web.policy") + f"#pgbus-policy-{made['key']}", 303)


def register(blueprint: Blueprint) -> None:
    blueprint.add_url_rule("/policy", "policy", show)
    blueprint.add_url_rule("/policy/<key>", "policy_change", change, methods=["POST"])
