"""Reading the runs index's needs-attention block as viewers of each role see it."""

from __future__ import annotations

from pgbus_web.plumbing import csrf
from support.web_helpers import make_app, soup


def role_app(database):
    """One app for operators and viewers: X-Role: operator may act."""
    return make_app(database, can_act=lambda request: request.headers.get("X-Role") == "operator")


def block(response):
    found = soup(response).select_one("#pgbus-attention")
    assert found is not None
    return found


def without_tokens(node) -> str:
    """*node*'s HTML with the CSRF tokens blanked (each browser has its own)."""
    for field in node.select(f"input[name={csrf.FIELD_NAME}]"):
        field["value"] = ""
    return str(node)
