"""POST /runs/<workflow_id>/reveal: one run with the values the policy
redacts in clear, for a caller who may reveal them on its class. A POST,
not a read: it writes the audit line that says who saw them
(core/reveal.py decides and records; docs/redaction.md). Body: an
optional ``reason``, kept on that line."""

from __future__ import annotations

from flask import Response

from ..core import page_reads, permissions, problems
from ..core import representations as rep
from ..core import reveal as revealing
from ..plumbing.state import state
from . import body, guard
from .answers import json_answer
from .problems import from_refusal, problem
from .reads import stuck_of

FIELDS = {"reason": body.STRING}


def reveal(workflow_id: str) -> Response:
    try:
        given = body.read(FIELDS)
    except body.BodyError as refused:
        return problem(refused.status, refused.message, field=refused.field)
    try:
        page = revealing.reveal(
            state().database.primary,
            state().settings,
            workflow_id,
            principal=guard.principal(),
            reason=given.get("reason"),
        )
    except page_reads.NotFound:
        return from_refusal(problems.run_not_found(workflow_id))
    except permissions.NotPermitted as refused:
        return from_refusal(problems.refusal(refused, workflow_id=workflow_id))
    return json_answer(rep.run_detail(page, stuck=stuck_of(page["now"])(page["run"])))
