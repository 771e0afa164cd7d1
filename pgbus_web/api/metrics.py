"""GET <prefix>/metrics (docs/metrics.md): the Prometheus exposition of
pgbus_web/metrics.py, plus how long the dashboard's requests take by route.

Its own blueprint, so that it is there only when the ``metrics`` setting
(or the standalone app's default) asks for it. Who may scrape is what the
JSON API allows (api/guard.py): a bearer token (``pgbus-web tokens``, or a
host's ``api_auth`` hook), else the pages' can_view (the standalone sign-in,
HTTP Basic included).
"""

from __future__ import annotations

import time

from flask import Blueprint, Flask, Response, current_app, g, request

from .. import i18n, metrics
from ..core import policy
from ..plumbing import csrf, security
from ..plumbing.state import EXTENSION_NAME, state
from . import guard

BLUEPRINT = "pgbus_metrics"
EXTENSION = "pgbus_metrics"
# The blueprints whose requests are timed: the pages, the API, the sign-in and this.
TIMED = frozenset({"pgbus_web", "pgbus_api", "pgbus_auth", BLUEPRINT})
# Request durations' buckets, in seconds: a page answers in milliseconds,
# a slow one in seconds (the pages' statement timeout is 10 s by default).
BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class Exposition:
    """One app's metrics: its registry (the collector over the database,
    and the request-duration histogram)."""

    def __init__(self, cache: metrics.Cache) -> None:
        client = metrics.require_client()
        self.client = client
        self.cache = cache
        self.registry = client.CollectorRegistry(auto_describe=False)
        self.registry.register(metrics.Collector(cache))
        self.durations = client.Histogram(
            "pgbus_web_request_duration_seconds",
            "Dashboard requests by route: seconds to answer.",
            labelnames=("route", "method"),
            buckets=BUCKETS,
            registry=self.registry,
        )

    def text(self) -> bytes:
        return self.client.generate_latest(self.registry)


def _exposition() -> Exposition:
    return current_app.extensions[EXTENSION]


def scrape() -> Response:
    """GET /metrics."""
    found = _exposition()
    return Response(
        found.text(),
        mimetype=None,
        headers={"Content-Type": found.client.CONTENT_TYPE_LATEST, "Cache-Control": "no-store"},
    )


def _started() -> None:
    if request.blueprint in TIMED:
        g._pgbus_started = time.perf_counter()


def _timed(response: Response) -> Response:
    started = g.pop("_pgbus_started", None)
    if started is not None:
        # The endpoint, not the path: one series per route, whatever the ids.
        route = request.endpoint or "unmatched"
        _exposition().durations.labels(route, request.method).observe(time.perf_counter() - started)
    return response


def register(app: Flask, url_prefix: str) -> None:
    """Serve /metrics under *url_prefix* and time the dashboard's requests."""
    found = app.extensions[EXTENSION_NAME]
    settings, database = found.settings, found.database

    def load() -> metrics.Reading:
        kept = policy.current(database.primary)
        return metrics.read(
            database,
            threshold=kept.stall_threshold,
            waiting_threshold=kept.waiting_threshold,
            gone_after=settings.worker_gone_after,
        )

    app.extensions[EXTENSION] = Exposition(metrics.Cache(load, settings.metrics_interval))
    blueprint = Blueprint(BLUEPRINT, __name__)
    i18n.init_locale(blueprint, default_locale=lambda: state().settings.default_locale, cookie_path=csrf.cookie_path)
    blueprint.before_request(guard.check)
    blueprint.after_request(guard.record_use)  # a token's last use, as on the API
    blueprint.after_request(security.add_headers)
    blueprint.add_url_rule("/metrics", "metrics", scrape, methods=["GET"])
    app.register_blueprint(blueprint, url_prefix=url_prefix.rstrip("/") or None)
    app.before_request(_started)
    app.after_request(_timed)
