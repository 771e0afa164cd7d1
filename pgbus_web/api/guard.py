"""Who may use the API, checked before any view runs.

- ``Authorization: Bearer <token>`` with an ``api_auth`` hook set (the
  standalone app's tokens table, or a host's own): the hook names the
  caller (api/tokens.Caller) or refuses the token (401). Its role decides:
  a viewer's post is 403. No CSRF token: a browser never sends a bearer
  header on its own, so a forged cross-site request cannot carry one.
- Otherwise the pages' rules: the host's can_view and can_act hooks (the
  standalone app's sign-in, HTTP Basic included), and a post needs the
  CSRF token (header X-CSRF-Token) like any form of the dashboard.

The actor is ``api:<token name>`` for a token, else the pages' actor.
"""

from __future__ import annotations

from flask import Response, g, request
from werkzeug.exceptions import HTTPException
from werkzeug.wrappers import Response as BaseResponse

from ..core import permissions, problems, tokens
from ..plumbing import csrf, security, unrouted
from ..plumbing.security import actor as dashboard_actor
from ..plumbing.state import state
from ..rules import roles
from .problems import from_refusal, problem

_CALLER = "_pgbus_api_caller"


def caller() -> tokens.Caller | None:
    return g.get(_CALLER)


def actor() -> str:
    found = caller()
    return found.actor if found is not None else dashboard_actor()


def principal() -> permissions.Principal:
    """Who this API request is: its token's principal, else the page's."""
    found = caller()
    return found.principal(permissions.API) if found is not None else security.principal()


def _bearer() -> str | None:
    header = request.headers.get("Authorization", "")
    scheme, _, token = header.partition(" ")
    return token.strip() if scheme.lower() == "bearer" else None


def _refused_token(token: str) -> Response:
    refusal = problems.token_refused(tokens.refused(state().database.primary, token) if token else tokens.UNKNOWN)
    return problem(
        401, refusal.message, headers={"WWW-Authenticate": 'Bearer realm="pgbus-web", error="invalid_token"'}
    )


def _forbidden() -> Response:
    return from_refusal(problems.forbidden())


def _token_acts(found: tokens.Caller) -> bool:
    """May the token change anything at all (its role or a grant)? Each
    act then asks the core for its class and verb."""
    who, kept = found.principal(permissions.API), security.current_policy()
    return permissions.acts_at_all(who, kept) or any(
        permissions.may_some(who, power, kept) for power in roles.BEYOND_VERBS
    )


def check() -> BaseResponse | None:
    """The blueprint's before_request: None lets the view run."""
    # Werkzeug refuses a longer body (413) when the view reads it.
    if request.max_content_length is None or request.max_content_length > csrf.MAX_BODY:
        request.max_content_length = csrf.MAX_BODY
    # An unrouted request changes nothing: it only gets its 404 or 405.
    unsafe = request.method in security.UNSAFE_METHODS and not unrouted.adopted()
    hook = state().settings.api_auth
    token = _bearer()
    if token is not None and hook is not None:
        found = hook(request, token) if token else None
        if found is None:
            return _refused_token(token)
        g.setdefault(_CALLER, found)
        if unsafe and not _token_acts(found):
            return _forbidden()
        return None
    try:
        if not security.may_view():
            return _forbidden()
    except HTTPException as refused:
        # The standalone sign-in's challenge: a 401 (with its Basic
        # challenge), said as a problem. What it answers a browser (a
        # redirect to its form) is a 401 here too: the API answers JSON to
        # every client, curl's "Accept: */*" included.
        response = refused.get_response()
        if response.status_code == 401 or 300 <= response.status_code < 400:
            headers = (
                {"WWW-Authenticate": response.headers["WWW-Authenticate"]}
                if "WWW-Authenticate" in response.headers
                else {"WWW-Authenticate": 'Bearer realm="pgbus-web"'}
            )
            return from_refusal(problems.sign_in_required(), headers=headers)
        if response.status_code == 503:
            # The sign-in cannot tell callers apart (its users file is broken).
            return problem(503, response.get_data(as_text=True).strip())
        return response
    if unsafe:
        if not security.may_act():
            return _forbidden()
        try:
            csrf.validate()
        except csrf.CSRFError:
            return from_refusal(problems.api_csrf_refused())
    return None


def record_use(response: Response) -> Response:
    """A token's last use: written when it was answered, not refused."""
    found = caller()
    if found is not None and found.token_id is not None and response.status_code < 400:
        tokens.used(state().database.primary, found, request.remote_addr)
    return response
