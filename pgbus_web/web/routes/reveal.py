"""POST /workflows/<workflow_id>/reveal: the run's values the policy
redacts, in clear, for one viewer who may reveal them on its class
(docs/redaction.md). Thin: the core (core/reveal.py) checks the power,
writes the audit line and reads the run unredacted; this draws it.

With htmx the answer is the revealed panel (swapped into the page's
empty one, which the live refresh leaves alone, so the values stay shown
until the page is left) and the audit trail with its new line. A plain
form gets the whole page with the panel open. Neither is kept for other
viewers (web/answering/page_cache.py keeps only the redacted reads).
"""

from __future__ import annotations

from flask import Blueprint, make_response, render_template, request

from ...core import page_reads, permissions, problems
from ...core import reveal as revealing
from ...core.words import results
from ...plumbing import hx, run_ids, security
from ...plumbing.state import state
from ...rules import roles
from ..answering import answers, pages, render
from . import views

# The panel's own template (run.html includes it when a page is revealed).
PANEL_TEMPLATE = "pgbus_web/_run_revealed.html"


def reveal(workflow_id: str):
    try:
        page = revealing.reveal(
            state().database.primary,
            state().settings,
            workflow_id,
            principal=security.principal(),
            reason=request.form.get("reason"),
        )
    except page_reads.NotFound:
        return answers.refused(problems.run_not_found(workflow_id))
    except permissions.NotPermitted as problem:
        return answers.refused(problems.refusal(problem, workflow_id=workflow_id))
    message = results.revealed()
    page.update(views.common())
    if hx.details().request:
        body = (
            render_template(PANEL_TEMPLATE, **page)
            + render.fragments(pages.RUN.template, ("run_audit",), page)
            + answers.messages("warn", message)
        )
        return render.answer(body, 200)
    page["pgbus_messages"] = [("warn", message)]
    return make_response(render_template(pages.RUN.template, **page), 200)


def may_reveal(workflow_class: str | None) -> bool:
    """May this request reveal the redacted values of runs of *workflow_class*?"""
    return security.may(roles.REVEAL, workflow_class)


def register(blueprint: Blueprint) -> None:
    # A static last segment: it wins over actions.py's <verb>.
    blueprint.add_url_rule(
        f"/workflows/<{run_ids.CONVERTER}:workflow_id>/reveal", "run_reveal", reveal, methods=["POST"]
    )


# What the templates call (template_names.py gives them).
TEMPLATE_NAMES = {"pgbus_may_reveal": may_reveal}
