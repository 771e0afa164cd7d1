"""The sessions and tokens an admin sees and ends, and the access log
(core/sessions.py, core/access_log.py): the sessions power, else 403."""

from __future__ import annotations

from flask import Response

from ..core import access_log, permissions, problems, sessions
from ..core.words import results
from ..plumbing import security
from ..plumbing.state import state
from . import body, guard
from .answers import json_answer
from .problems import from_refusal, problem

NAME_FIELDS = {"name": body.STRING}


def _engine():
    return state().database.primary


def listing() -> Response:
    """GET /sessions: the live sessions and tokens."""
    try:
        found = sessions.listing(_engine(), guard.principal(), security.current_policy())
    except permissions.NotPermitted as refused:
        return from_refusal(problems.refusal(refused))
    return json_answer(
        {
            "sessions": [sessions.session_shown(row) for row in found["sessions"]],
            "tokens": [sessions.token_shown(row) for row in found["tokens"]],
        }
    )


def log() -> Response:
    """GET /access-log: the newest lines."""
    try:
        lines = access_log.latest(_engine(), guard.principal(), security.current_policy())
    except permissions.NotPermitted as refused:
        return from_refusal(problems.refusal(refused))
    return json_answer({"lines": lines})


def end(session_id: str) -> Response:
    """POST /sessions/<id>/end: refused on its next request at every process."""
    try:
        body.read({})
        row = sessions.end(_engine(), guard.principal(), security.current_policy(), session_id)
    except body.BodyError as refused:
        return problem(refused.status, refused.message, field=refused.field)
    except (permissions.NotPermitted, sessions.SessionNotFound) as refused:
        return from_refusal(problems.refusal(refused))
    return json_answer({"message": results.session_ended(row["name"]), "ended": 1})


def end_all() -> Response:
    """POST /sessions/end-all {"name": ...}: every session of a person."""
    try:
        given = body.read(NAME_FIELDS)
    except body.BodyError as refused:
        return problem(refused.status, refused.message, field=refused.field)
    name = given.get("name")
    if not name:
        return from_refusal(problems.session_name_missing())
    try:
        ended = sessions.end_all(_engine(), guard.principal(), security.current_policy(), name)
    except permissions.NotPermitted as refused:
        return from_refusal(problems.refusal(refused))
    return json_answer({"message": results.sessions_ended(name), "ended": ended})


def revoke_token(name: str) -> Response:
    """POST /tokens/<name>/revoke: refused on its next request."""
    try:
        body.read({})
        sessions.revoke_token(_engine(), guard.principal(), security.current_policy(), name)
    except body.BodyError as refused:
        return problem(refused.status, refused.message, field=refused.field)
    except (permissions.NotPermitted, sessions.TokenNotFound) as refused:
        return from_refusal(problems.refusal(refused))
    return json_answer({"message": results.token_revoked(name), "ended": 1})
