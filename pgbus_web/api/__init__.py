"""The JSON API (DESIGN §12, docs/api.md): a blueprint of its own,
``pgbus_api``, mounted at ``/api/v1`` under the dashboard's prefix, over
the same domain functions as the pages. Every answer is JSON; every
refusal ``application/problem+json`` with a translated ``detail``.

``Caller`` is what an ``api_auth`` hook returns: who a bearer token names.
"""

from __future__ import annotations

from flask import Blueprint, Flask, Response, request, url_for
from werkzeug.exceptions import HTTPException, MethodNotAllowed, NotFound

from .. import i18n
from ..i18n import t
from ..web import csrf, run_ids, security
from ..web.extension import state
from . import guard, openapi, reads, writes
from .answers import json_answer
from .problems import problem
from .tokens import Caller

__all__ = ["Caller", "PREFIX", "BLUEPRINT", "register"]

PREFIX = "/api/v1"
_ROUTING = {404: NotFound, 405: MethodNotAllowed}
BLUEPRINT = "pgbus_api"


def _http_error(error: HTTPException) -> Response:
    """Werkzeug's refusals (404, 405, 413, ...) as problems."""
    status = error.code or 500
    if status == 413:
        detail = t("pgbus.workflows.forms.errors.too_large", max=csrf.MAX_BODY // 1024)
    elif status == 404:
        detail = t("pgbus.api.errors.not_found")
    elif status == 405:
        detail = t("pgbus.api.errors.method")
    else:
        detail = t("pgbus.api.errors.http", status=status)
    return problem(status, detail)


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
    blueprint.after_request(security.add_headers)
    blueprint.after_request(_no_store)
    blueprint.register_error_handler(HTTPException, _http_error)
    run_ids.init_blueprint(blueprint)  # before the routes that use it
    run = f"/runs/<{run_ids.CONVERTER}:workflow_id>"
    rules = (
        ("/openapi.json", "openapi", document, "GET"),
        ("/runs", "runs", reads.runs, "GET"),
        (run, "run", reads.run, "GET"),
        (f"{run}/signals", "send_signal", writes.send_signal, "POST"),
        (f"{run}/<verb>", "run_verb", writes.run_verb, "POST"),
        ("/counts", "counts", reads.counts, "GET"),
        ("/attention", "attention", reads.attention, "GET"),
        ("/operations", "operations", reads.operations, "GET"),
        ("/operations", "operation_start", writes.start_operation, "POST"),
        ("/operations/<int:operation_id>", "operation", reads.operation, "GET"),
        ("/operations/<int:operation_id>/cancel", "operation_cancel", writes.cancel_operation, "POST"),
        ("/locks", "locks", reads.locks, "GET"),
    )
    for rule, endpoint, view, method in rules:
        blueprint.add_url_rule(rule, endpoint, view, methods=[method])

    @blueprint.record_once
    def _unrouted(setup_state) -> None:
        prefix = (setup_state.url_prefix or "").rstrip("/")

        def as_problem(response: Response) -> Response:
            # No rule matched (a 404, a 405): routing answered before any
            # blueprint was chosen; under the API's prefix it is a problem.
            if request.url_rule is None and response.status_code in (404, 405) and (
                    request.path == prefix or request.path.startswith(prefix + "/")):
                with i18n.force_locale(i18n.select_locale(request, state().settings.default_locale)):
                    answer = _http_error(_ROUTING[response.status_code]())
                if "Allow" in response.headers:
                    answer.headers["Allow"] = response.headers["Allow"]
                return security.add_headers(answer)
            return response

        setup_state.app.after_request(as_problem)

    return blueprint


def register(app: Flask, url_prefix: str) -> None:
    """Mount the API under the dashboard's *url_prefix*."""
    app.register_blueprint(build_blueprint(), url_prefix=url_prefix.rstrip("/") + PREFIX)
