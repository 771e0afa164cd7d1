"""Every answer under the dashboard's prefix is a dashboard page, the ones
routing gives too (a 404 for ``/workflows/`` or ``/locks/xyz``, a 405).

The dashboard's API adopts the ones under its own prefix the same way,
answering them as problems. Werkzeug raises those before any blueprint is chosen, so Flask would answer
them with the host app's handlers, or its bare "Not Found", in English,
without the dashboard's look, language or sign-in. Here such a request is
handed to the blueprint before Flask prepares it (``request_started``
comes before the before-request functions are chosen): it gets the
blueprint's endpoint ``unrouted``, whose view raises the routing's own
error, so the blueprint's hooks (who may view, the language, the headers)
and its error pages (views.http_error) answer it, in the operator's
language. Redirects routing gives (a doubled or missing slash) and
everything outside the prefix are left as they are.
"""

from __future__ import annotations

from flask import Blueprint, Flask, request, request_started
from werkzeug.exceptions import MethodNotAllowed, NotFound
from werkzeug.routing import Rule

ENDPOINT = "unrouted"
# Where each app keeps the (prefix, endpoint) of each blueprint that adopts
# its unrouted requests (the dashboard's pages, its API below them), the
# longest prefix first: a path goes to the deepest one it is under.
_APP_KEY = "pgbus_web_unrouted"
# Where the request keeps the routing's error for the view to raise.
_ENVIRON_KEY = "pgbus_web.routing_error"


def under(path: str, prefix: str) -> bool:
    """True when *path* is the dashboard's *prefix* or below it ("" is
    the whole site)."""
    return not prefix or path == prefix or path.startswith(prefix + "/")


def adopted() -> bool:
    """True for a request handed over here: it changes nothing and only
    gets an error page, so the checks that guard a change (CSRF, who may
    act) let it through to its 404 or 405."""
    return _ENVIRON_KEY in request.environ


def _view():
    raise request.environ[_ENVIRON_KEY]


def _adopt(app: Flask, **_: object) -> None:
    problem = request.routing_exception
    if request.url_rule is not None or not isinstance(problem, (NotFound, MethodNotAllowed)):
        return
    endpoint = next((endpoint for prefix, endpoint in app.extensions[_APP_KEY] if under(request.path, prefix)), None)
    if endpoint is None:
        return
    request.environ[_ENVIRON_KEY] = problem
    request.url_rule = Rule(request.path, endpoint=endpoint)
    request.view_args = {}
    request.routing_exception = None


def init_blueprint(blueprint: Blueprint) -> None:
    @blueprint.record_once
    def _register(setup_state) -> None:
        app = setup_state.app
        endpoint = f"{setup_state.name_prefix}.{setup_state.name}.{ENDPOINT}".lstrip(".")
        app.view_functions[endpoint] = _view
        adopting = app.extensions.setdefault(_APP_KEY, [])
        adopting.append(((setup_state.url_prefix or "").rstrip("/"), endpoint))
        adopting.sort(key=lambda entry: len(entry[0]), reverse=True)
        # A module-level receiver, held strongly: a closure would be
        # collected (blinker keeps weak references by default). Connected
        # once per app, however many blueprints adopt.
        if len(adopting) == 1:
            request_started.connect(_adopt, app, weak=False)
