"""The standalone app on a database URL with short waits (a frozen or gone server)."""

from __future__ import annotations

from pgbus_web.app import create_app
from pgbus_web.demo.workflows import REGISTRY

# The pages' bounds in these tests (seconds), small so the tests are quick;
# the connect bound is the longest so that a request stuck on a frozen
# server outlives the health check by a clear margin.
CONNECT = 6


STATEMENT = 2


HEALTH = 2


def app_on(url: str, **settings):
    values = {
        "database_url": url,
        "registry": REGISTRY,
        "TESTING": True,
        "connect_timeout": CONNECT,
        "statement_timeout": STATEMENT,
        "health_timeout": HEALTH,
        # The pool is the pages' alone here: no operations thread takes a connection.
        "run_operations": False,
    }
    values.update(settings)
    return create_app(values)
