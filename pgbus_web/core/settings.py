"""The dashboard's configuration: every knob in one place, with its default.

A host app passes these to ``PgbusWeb(app, ...)`` or puts them in its
``app.config`` as ``PGBUS_WEB_<NAME>`` (keywords win); the standalone app
builds them from the command line and the environment. ``check`` refuses a
wrong value at start-up, naming the setting, so it never surfaces as a 500
on some later request.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any, cast

from .. import db, defaults
from ..i18n import match_locale
from ..metrics import INTERVAL as METRICS_INTERVAL
from ..rules import verb_table

# Runs per page of the index.
PAGE_SIZE = 50
# Seconds between live refreshes of the index and the run page (0: off).
REFRESH_INTERVAL = 10


def _default_actor(request: Any) -> str:
    """Who the audit trail says acted: the host's REMOTE_USER, else "anonymous"."""
    return request.environ.get("REMOTE_USER") or "anonymous"


@dataclass
class Settings:
    database_url: str | None = None
    # Pages may read from a replica; writes always go to database_url.
    replica_url: str | None = None
    # Seconds the replica may be behind the primary and still serve pages
    # (beyond, and after a browser's own write until the replica has
    # replayed it, pages read the primary: docs/replica.md).
    replica_max_lag: float = db.REPLICA_MAX_LAG
    # Unbound locks younger than this are "fresh", not orphans (Locks page, reaper).
    lock_age_floor: timedelta = defaults.LOCK_AGE_FLOOR
    # A worker (or serving process) whose heartbeat is older than this is
    # gone: the Workers page and the index say so, with the runs it held.
    # At most half of stall_threshold, so it is flagged before they stall.
    worker_gone_after: timedelta = defaults.WORKER_GONE_AFTER
    # subject_url(subject_type, subject_id) -> URL or None; shown only when safe.
    subject_url: Callable[[str, str], str | None] | None = None
    # can_view(request) / can_act(request) -> bool. None for can_view means
    # open to anyone who reaches it (a warning is logged once); None for
    # can_act means "whoever may view may act".
    can_view: Callable[[Any], bool] | None = None
    can_act: Callable[[Any], bool] | None = None
    # actor_name(request) -> the name recorded as "dashboard:<name>".
    actor_name: Callable[[Any], str] = _default_actor
    # role_of(request) -> viewer, operator, approver or admin; groups_of(request)
    # -> the groups the policy's grants may name (docs/policy.md). Without
    # role_of a request that can_act is an operator, else a viewer.
    role_of: Callable[[Any], str] | None = None
    groups_of: Callable[[Any], Any] | None = None
    # api_auth(request, token) -> pgbus_web.api.Caller or None: who a JSON
    # API request carrying "Authorization: Bearer <token>" is (None: the
    # token is refused, 401). Unset, a bearer header means nothing and the
    # hooks above decide, with the CSRF token for a post (docs/api.md).
    # The standalone app sets it to its tokens table (pgbus-web tokens).
    api_auth: Callable[[Any, str], Any] | None = None
    # A locale code with a catalog ("de", "pt-BR" gives pt). The language
    # of a request that asked for none (docs/i18n.md).
    default_locale: str = "en"
    # For hosts without Flask-Babel: locale_selector() -> a locale code or
    # None, timezone_selector() -> a zone name, a tzinfo or None. Called
    # once per dashboard request, after the dashboard's own ?locale= and
    # cookies; a host with Flask-Babel's selectors needs neither.
    locale_selector: Callable[[], Any] | None = None
    timezone_selector: Callable[[], Any] | None = None
    page_size: int = PAGE_SIZE
    refresh_interval: int = REFRESH_INTERVAL
    # The workflow definitions loaded in this process (a runtime Registry);
    # without one, class-only verbs are not offered.
    registry: Any = None
    # Do queued operations (act on every run a filter matches) in a thread
    # of this process too; a host whose workers do them may turn it off.
    run_operations: bool = True
    # A running operation whose heartbeat is older than this is taken over
    # by this process (its holder died); every process of one database
    # should say the same (docs/operations.md "Takeover").
    operation_stale_after: timedelta = defaults.OPERATION_STALE_AFTER
    # Approval (docs/operations.md): an operation of one of approval_verbs
    # (None: every verb) that would act on more than approval_threshold
    # runs waits as awaiting_approval until a different operator approves
    # it. None: no operation waits. Config text "cancel,rerun" is read as
    # the two verbs.
    approval_threshold: int | None = None
    approval_verbs: tuple[str, ...] | None = None
    # GET <prefix>/metrics in Prometheus text format (docs/metrics.md),
    # behind can_view or an api_auth token. None: off in a mounted app, on
    # in the standalone one; needs prometheus_client (the metrics extra).
    metrics: bool | None = None
    # A scrape reads the database at most once per this many seconds.
    metrics_interval: float = METRICS_INTERVAL
    # Secret used to sign CSRF tokens when the host app has no SECRET_KEY.
    secret_key: str | None = None
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
        return db.Bounds(connect=self.connect_timeout, statement=self.statement_timeout, pool=self.pool_timeout)


class SettingError(ValueError):
    """A setting with a value the dashboard cannot use; the message names it
    (and ``setting`` does, when it is about one setting)."""

    def __init__(self, message: str, setting: str | None = None) -> None:
        super().__init__(message)
        self.setting = setting


# The lowest stall threshold the policy takes (core/policy.STALL_BOUNDS).
STALL_FLOOR = timedelta(seconds=60)


_CALLABLE_OR_NONE = (
    "subject_url",
    "can_view",
    "can_act",
    "role_of",
    "groups_of",
    "locale_selector",
    "timezone_selector",
)
_DURATIONS = ("lock_age_floor", "worker_gone_after")
# Settings that became rules of the policy, the same for every process
# (docs/policy.md): named with where they went rather than as unknown.
MOVED_TO_POLICY = ("stall_threshold", "waiting_threshold")


def moved_to_policy(name: str) -> SettingError:
    return SettingError(
        f"pgbus-web setting {name} is a rule of the policy now, the same for every process: "
        f"pgbus-web policy set {name} SECONDS --reason WHY (docs/policy.md)",
        name,
    )


_SECONDS = ("connect_timeout", "statement_timeout", "pool_timeout", "health_timeout")


def _refuse(name: str, wanted: str, value: Any) -> SettingError:
    return SettingError(f"pgbus-web setting {name} must be {wanted}; got {value!r}", name)


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def approval_verbs(value: Any) -> tuple[str, ...]:
    """The verbs *value* names (a sequence of names, or text with commas),
    each one of the verb table's; SettingError otherwise."""
    names = value.split(",") if isinstance(value, str) else value
    try:
        verbs = tuple(str(name).strip() for name in names if str(name).strip())
    except TypeError:
        raise _refuse("approval_verbs", "verb names (or text with commas) or None", value) from None
    known = tuple(verb.name for verb in verb_table.TABLE)
    unknown = [name for name in verbs if name not in known]
    if isinstance(value, (bytes, Mapping)) or unknown or not verbs:
        raise _refuse("approval_verbs", f"some of {', '.join(known)}", value)
    return verbs


def check(settings: Settings, locales: tuple[str, ...]) -> Settings:
    """*settings* with durations given as seconds (a config file's numbers)
    made timedeltas, or SettingError naming the first wrong one. *locales*
    are the catalogs a default_locale may name."""
    changes: dict[str, Any] = {}
    for name in ("database_url", "replica_url"):
        value = getattr(settings, name)
        if value is not None and not isinstance(value, str):
            raise _refuse(name, "a database URL (text) or None", value)
    for name in _DURATIONS:
        value = getattr(settings, name)
        if (_whole(value) or isinstance(value, float)) and value >= 0:
            changes[name] = value = timedelta(seconds=value)
        if not isinstance(value, timedelta) or value < timedelta(0):
            raise _refuse(name, "a timedelta (or a number of seconds) of zero or more", value)
    gone_after = changes.get("worker_gone_after", settings.worker_gone_after)
    # At most half the default stall threshold, so that a silent worker is
    # flagged before its runs are stalled (a policy that shortens the stall
    # threshold is told to keep it above twice this: docs/policy.md).
    stall = defaults.STALL_THRESHOLD
    if not timedelta(0) < gone_after <= stall / 2:
        raise _refuse(
            "worker_gone_after",
            f"above 0 and at most half of the default stall threshold ({stall.total_seconds():g} s), so "
            "that a silent worker is flagged before its runs are stalled",
            gone_after,
        )
    for name in _CALLABLE_OR_NONE:
        value = getattr(settings, name)
        if value is not None and not callable(value):
            raise _refuse(name, "a callable or None", value)
    if not callable(settings.actor_name):
        raise _refuse("actor_name", "a callable", settings.actor_name)
    if not isinstance(settings.default_locale, str) or match_locale(settings.default_locale) is None:
        hint = " (a callable choice is locale_selector)" if callable(settings.default_locale) else ""
        raise _refuse("default_locale", f"one of the locale codes {', '.join(locales)}{hint}", settings.default_locale)
    if not _whole(settings.page_size) or settings.page_size < 1:
        raise _refuse("page_size", "a whole number of 1 or more", settings.page_size)
    if not _whole(settings.refresh_interval) or settings.refresh_interval < 0:
        raise _refuse("refresh_interval", "a whole number of seconds, 0 or more", settings.refresh_interval)
    if not isinstance(settings.run_operations, bool):
        raise _refuse("run_operations", "True or False", settings.run_operations)
    # A number of seconds is taken too, whatever the field's annotation says.
    value = cast(Any, settings.operation_stale_after)
    if (_whole(value) or isinstance(value, float)) and value > 0:
        changes["operation_stale_after"] = value = timedelta(seconds=value)
    if not isinstance(value, timedelta) or value <= timedelta(0):
        raise _refuse("operation_stale_after", "a timedelta (or a number of seconds) above zero", value)
    if settings.approval_threshold is not None and (
        not _whole(settings.approval_threshold) or settings.approval_threshold < 0
    ):
        raise _refuse("approval_threshold", "a whole number of runs, 0 or more, or None", settings.approval_threshold)
    if settings.approval_verbs is not None:
        changes["approval_verbs"] = approval_verbs(settings.approval_verbs)
    if settings.secret_key is not None and not isinstance(settings.secret_key, (str, bytes)):
        raise _refuse("secret_key", "text or None", settings.secret_key)
    for name in _SECONDS:
        value = getattr(settings, name)
        if value is None and name == "statement_timeout":
            continue  # no statement_timeout at all (db.Bounds)
        if not (_whole(value) or isinstance(value, float)) or not value > 0:
            raise _refuse(name, "a number of seconds above 0", value)
    value = settings.replica_max_lag
    if not (_whole(value) or isinstance(value, float)) or not 0 <= value < float("inf"):
        raise _refuse("replica_max_lag", "a number of seconds, 0 or more", value)
    return replace(settings, **changes) if changes else settings
