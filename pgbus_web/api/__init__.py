"""The JSON API (docs/api.md): a blueprint of its own,
``pgbus_api``, mounted at ``/api/v1`` under the dashboard's prefix, over
the same domain functions as the pages. Every answer is JSON; every
refusal ``application/problem+json`` with a translated ``detail``.

``Caller`` is what an ``api_auth`` hook returns: who a bearer token names.
"""

from __future__ import annotations

from flask import Blueprint, Flask, Response, url_for
from werkzeug.exceptions import HTTPException

from .. import i18n
from ..core import policy
from ..core.problems import http_refusal, too_large
from ..core.tokens import Caller
from ..plumbing import csrf, reading, run_ids, security, unrouted
from ..plumbing.state import state
from . import guard, openapi, reads, reveal, sessions, writes
from .answers import json_answer
from .problems import problem

__all__ = ["Caller", "PREFIX", "BLUEPRINT", "register"]

PREFIX = "/api/v1"
BLUEPRINT = "pgbus_api"


def _http_error(error: HTTPException) -> Response:
    """Werkzeug's refusals (404, 405, 413, ...) as problems."""
    status = error.code or 500
    refusal = too_large(csrf.MAX_BODY // 1024) if status == 413 else http_refusal(status)
    # A 405's Allow header names the methods the address takes.
    return problem(
        status, refusal.message, headers={name: value for name, value in error.get_headers() if name == "Allow"}
    )


def _no_store(response: Response) -> Response:
    # Live state: never from a cache.
    response.headers.setdefault("Cache-Control", "no-store")
    return response


def document() -> Response:
    """GET /openapi.json, its server the API's own address here."""
    return json_answer(openapi.document(url_for(f"{BLUEPRINT}.openapi").rsplit("/", 1)[0]))


def build_blueprint() -> Blueprint:
    blueprint = Blueprint(BLUEPRINT, __name__)
    i18n.init_locale(blueprint, default_locale=lambda: state().settings.default_locale, cookie_path=csrf.cookie_path)
    blueprint.before_request(guard.check)
    blueprint.after_request(guard.record_use)
    blueprint.after_request(reading.after_request)
    blueprint.after_request(security.add_headers)
    blueprint.after_request(_no_store)
    blueprint.register_error_handler(HTTPException, _http_error)
    run_ids.init_blueprint(blueprint)  # before the routes that use it
    run = f"/runs/<{run_ids.CONVERTER}:workflow_id>"
    rules = (
        ("/openapi.json", "openapi", document, "GET"),
        ("/runs", "runs", reads.runs, "GET"),
        ("/runs/export", "runs_export", reads.export, "GET"),
        ("/runs/compare", "runs_compare", reads.compare, "GET"),
        (f"/runs/<{run_ids.READ_CONVERTER}:workflow_id>", "run", reads.run, "GET"),
        (f"{run}/signals", "send_signal", writes.send_signal, "POST"),
        (f"{run}/reveal", "run_reveal", reveal.reveal, "POST"),
        (f"{run}/<verb>", "run_verb", writes.run_verb, "POST"),
        ("/counts", "counts", reads.counts, "GET"),
        ("/attention", "attention", reads.attention, "GET"),
        ("/operations", "operations", reads.operations, "GET"),
        ("/operations", "operation_start", writes.start_operation, "POST"),
        ("/operations/<int:operation_id>", "operation", reads.operation, "GET"),
        ("/operations/<int:operation_id>/cancel", "operation_cancel", writes.cancel_operation, "POST"),
        ("/operations/<int:operation_id>", "operation_pace", writes.pace_operation, "PATCH"),
        ("/operations/<int:operation_id>/pace", "operation_pace_post", writes.pace_operation, "POST"),
        ("/operations/<int:operation_id>/pause", "operation_pause", writes.pause_operation, "POST"),
        ("/operations/<int:operation_id>/resume", "operation_resume", writes.resume_operation, "POST"),
        ("/operations/<int:operation_id>/approve", "operation_approve", writes.approve_operation, "POST"),
        ("/policy", "policy", reads.policy_rules, "GET"),
        ("/policy/history", "policy_history", reads.policy_history, "GET"),
        # Only the rules' names: PUT /policy/history is no rule, a 405.
        (f"/policy/<any({', '.join(policy.KEYS)}):key>", "policy_rule", writes.set_policy_rule, "PUT"),
        ("/sessions", "sessions", sessions.listing, "GET"),
        ("/sessions/end-all", "sessions_end_all", sessions.end_all, "POST"),
        ("/sessions/<session_id>/end", "session_end", sessions.end, "POST"),
        ("/tokens/<name>/revoke", "token_revoke", sessions.revoke_token, "POST"),
        ("/access-log", "access_log", sessions.log, "GET"),
        ("/locks", "locks", reads.locks, "GET"),
        ("/workers", "workers", reads.workers, "GET"),
        ("/queues", "queues", reads.queues, "GET"),
    )
    for rule, endpoint, view, method in rules:
        blueprint.add_url_rule(rule, endpoint, view, methods=[method])

    # A 404 or 405 routing gives under the API's prefix reaches the
    # blueprint (its hooks and _http_error): a problem, never a page.
    unrouted.init_blueprint(blueprint)
    return blueprint


def register(app: Flask, url_prefix: str) -> None:
    """Mount the API under the dashboard's *url_prefix*."""
    app.register_blueprint(build_blueprint(), url_prefix=url_prefix.rstrip("/") + PREFIX)
