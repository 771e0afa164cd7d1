"""The dashboard's configuration: every knob in one place, with its default.

A host app passes these to ``PgbusWeb(app, ...)``; the standalone app builds
them from the command line and the environment.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Callable, Optional

from .. import db, defaults

# Runs per page of the index.
PAGE_SIZE = 50
# Seconds between live refreshes of the index and the run page (0: off).
REFRESH_INTERVAL = 10


def _default_actor(request) -> str:
    """Who the audit trail says acted: the host's REMOTE_USER, else "anonymous"."""
    return request.environ.get("REMOTE_USER") or "anonymous"


@dataclass
class Settings:
    database_url: Optional[str] = None
    # Pages may read from a replica; writes always go to database_url.
    replica_url: Optional[str] = None
    stall_threshold: timedelta = defaults.STALL_THRESHOLD
    waiting_threshold: timedelta = defaults.WAITING_THRESHOLD
    # Unbound locks younger than this are "fresh", not orphans (Locks page, reaper).
    lock_age_floor: timedelta = defaults.LOCK_AGE_FLOOR
    # subject_url(subject_type, subject_id) -> URL or None; shown only when safe.
    subject_url: Optional[Callable[[str, str], Optional[str]]] = None
    # can_view(request) / can_act(request) -> bool. None for can_view means
    # open to anyone who reaches it (a warning is logged once); None for
    # can_act means "whoever may view may act".
    can_view: Optional[Callable[[Any], bool]] = None
    can_act: Optional[Callable[[Any], bool]] = None
    # actor_name(request) -> the name recorded as "dashboard:<name>".
    actor_name: Callable[[Any], str] = _default_actor
    # api_auth(request, token) -> pgbus_web.api.Caller or None: who a JSON
    # API request carrying "Authorization: Bearer <token>" is (None: the
    # token is refused, 401). Unset, a bearer header means nothing and the
    # hooks above decide, with the CSRF token for a post (docs/api.md).
    # The standalone app sets it to its tokens table (pgbus-web tokens).
    api_auth: Optional[Callable[[Any, str], Any]] = None
    default_locale: str = "en"
    page_size: int = PAGE_SIZE
    refresh_interval: int = REFRESH_INTERVAL
    # The workflow definitions loaded in this process (a runtime Registry);
    # without one, class-only verbs are not offered.
    registry: Any = None
    # Do queued operations (act on every run a filter matches) in a thread
    # of this process too; a host whose workers do them may turn it off.
    run_operations: bool = True
    # GET <prefix>/metrics in Prometheus text format (docs/metrics.md),
    # behind can_view or an api_auth token. None: off in a mounted app, on
    # in the standalone one; needs prometheus_client (the metrics extra).
    metrics: Optional[bool] = None
    # A scrape reads the database at most once per this many seconds.
    metrics_interval: float = 15.0
    # Secret used to sign CSRF tokens when the host app has no SECRET_KEY.
    secret_key: Optional[str] = None
    # How long a request waits on the database, in seconds (pgbus_web.db;
    # docs/web.md). Used for the engines the extension makes from
    # database_url and replica_url; a ready Database keeps its own.
    connect_timeout: float = db.CONNECT_TIMEOUT
    # The server cancels a page's statement after this; the client stops
    # waiting for an answer db.ANSWER_GRACE seconds later.
    statement_timeout: float = db.STATEMENT_TIMEOUT
    # Waiting for a free pooled connection while all are in use.
    pool_timeout: float = db.POOL_TIMEOUT
    # /health, all in: it opens a connection of its own each time.
    health_timeout: float = db.HEALTH_TIMEOUT

    def bounds(self) -> db.Bounds:
        """The pages' bounds on the database."""
        return db.Bounds(
            connect=self.connect_timeout, statement=self.statement_timeout, pool=self.pool_timeout
        )
