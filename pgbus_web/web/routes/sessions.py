"""The Sessions page (admins: the sessions power): the live signed-in
sessions and API tokens, the forms that end one session, every session of
a person, or a token (the same core functions as the API's and
``pgbus-web sessions``), and the access log.

GET /sessions shows it; POST /sessions/<id>/end, POST /sessions/end-all
(``name``) and POST /tokens/<name>/revoke end, then lead back to it with a
message. Anyone else is refused (403), nothing changed."""

from __future__ import annotations

from flask import Blueprint, Response, request, url_for

from ...core import access_log, permissions, problems, sessions
from ...core.words import results
from ...plumbing.redirects import see_other
from ...plumbing.security import current_policy, principal
from ...plumbing.state import state
from ...runtime.clock import utcnow
from ..answering import answers, pages, render
from . import views


def _engine():
    return state().database.primary


def show() -> Response:
    """GET /sessions."""
    try:
        found = sessions.listing(_engine(), principal(), current_policy())
        lines = access_log.latest(_engine(), principal(), current_policy())
    except permissions.NotPermitted as refused:
        return answers.refused(problems.refusal(refused))
    page = {
        "sessions": found["sessions"],
        "tokens": [sessions.token_shown(row) for row in found["tokens"]],
        "lines": lines,
        "now": utcnow(),
        "who": principal(),
    }
    page.update(views.common())
    return render.page(pages.SESSIONS.template, page, pages.SESSIONS.fragments)


def _done(act, message) -> Response:
    """*act*(), then back to the page with *message*(what act returned)."""
    try:
        done = act()
    except (permissions.NotPermitted, sessions.SessionNotFound, sessions.TokenNotFound) as refused:
        return answers.refused(problems.refusal(refused))
    answers.flash_message("ok", message(done))
    return see_other(url_for("pgbus_web.sessions"))


def end(session_id: str) -> Response:
    """POST /sessions/<id>/end."""
    return _done(
        lambda: sessions.end(_engine(), principal(), current_policy(), session_id),
        lambda row: results.session_ended(row["name"]),
    )


def end_all() -> Response:
    """POST /sessions/end-all."""
    name = request.form.get("name", "").strip()
    if not name:
        return answers.refused(problems.session_name_missing())
    return _done(
        lambda: sessions.end_all(_engine(), principal(), current_policy(), name),
        lambda _: results.sessions_ended(name),
    )


def revoke_token(name: str) -> Response:
    """POST /tokens/<name>/revoke."""
    return _done(
        lambda: sessions.revoke_token(_engine(), principal(), current_policy(), name),
        lambda _: results.token_revoked(name),
    )


def register(blueprint: Blueprint) -> None:
    blueprint.add_url_rule("/sessions", "sessions", show)
    blueprint.add_url_rule("/sessions/end-all", "sessions_end_all", end_all, methods=["POST"])
    blueprint.add_url_rule("/sessions/<session_id>/end", "session_end", end, methods=["POST"])
    blueprint.add_url_rule("/tokens/<name>/revoke", "token_revoke", revoke_token, methods=["POST"])
