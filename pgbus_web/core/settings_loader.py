"""One loader of the settings for every process and door: ``serve``, the
worker, the commands and the MCP server (docs/settings.md).

Each setting is taken from the highest of these sources that gives it,
lowest first:

1. its default, written once, in ``Settings``' declaration (settings.py);
2. the settings file, TOML, named by ``--config`` or ``PGBUS_WEB_CONFIG``;
3. the environment: ``PGBUS_WEB_<NAME>`` (the database URLs keep pgbus's
   own ``PGBUS_DATABASE_URL`` and ``PGBUS_REPLICA_URL``);
4. the command's options.

Then the whole goes through ``settings.check``, as a host app's keywords
and config do (the blueprint keeps its own way in: extension.py). A key
of the file or a ``PGBUS_WEB_`` variable that names no setting is refused
by name, never ignored; so is a value the setting cannot take, with where
it came from. A setting the policy now owns is refused with the policy's
sentence (settings.MOVED_TO_POLICY).
"""

from __future__ import annotations

import dataclasses
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from ..db import DATABASE_URL_ENV
from ..i18n import available_locales
from ..runtime.definitions import DefinitionError, load_registry
from .settings import MOVED_TO_POLICY, SettingError, Settings, check, moved_to_policy

PREFIX = "PGBUS_WEB_"
CONFIG_ENV = PREFIX + "CONFIG"
REPLICA_URL_ENV = "PGBUS_REPLICA_URL"
# Not a field of Settings: the module whose REGISTRY is the registry setting.
DEFINITIONS = "definitions"

# How the text of each setting a file, a variable or an option can give is
# read. The rest of Settings (the hooks, the registry) are Python values
# only a host app can pass.
TEXT, SECONDS, WHOLE, FLAG, VERBS = "text", "seconds", "whole", "flag", "verbs"
KINDS: dict[str, str] = {
    "database_url": TEXT,
    "replica_url": TEXT,
    DEFINITIONS: TEXT,
    "secret_key": TEXT,
    "default_locale": TEXT,
    "page_size": WHOLE,
    "refresh_interval": WHOLE,
    "run_operations": FLAG,
    "operation_stale_after": SECONDS,
    "worker_gone_after": SECONDS,
    "lock_age_floor": SECONDS,
    "approval_threshold": WHOLE,
    "approval_verbs": VERBS,
    "metrics": FLAG,
    "metrics_interval": SECONDS,
    "connect_timeout": SECONDS,
    "statement_timeout": SECONDS,
    "pool_timeout": SECONDS,
    "health_timeout": SECONDS,
    "replica_max_lag": SECONDS,
}
NAMES = tuple(KINDS)
# Shown masked: a URL's password, the whole key.
SECRETS = frozenset({"database_url", "replica_url", "secret_key"})
# The database URLs keep the names pgbus's own processes read.
_OWN_VARIABLES = {"database_url": DATABASE_URL_ENV, "replica_url": REPLICA_URL_ENV}
# PGBUS_WEB_ variables that are not settings: one command's options
# (serve's listener and sign-in, --token, --users-file) and this file's
# name. Never refused.
OTHER_VARIABLES = frozenset(
    {
        CONFIG_ENV,
        PREFIX + "TOKEN",
        PREFIX + "USERS_FILE",
        PREFIX + "HOST",
        PREFIX + "PORT",
        PREFIX + "THREADS",
        PREFIX + "TRUSTED_HEADER",
        PREFIX + "TRUSTED_ROLE_HEADER",
        PREFIX + "TRUSTED_PROXY",
        PREFIX + "TRUSTED_PROXIES",
        PREFIX + "NO_AUTH",
        PREFIX + "INSTALL_SCHEMA",
        PREFIX + "ACCESS_LOG",
    }
)
_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off"})
MASK = "***"

DEFAULT, FILE, ENVIRONMENT, OPTION = "default", "file", "environment", "option"


def variable(name: str) -> str:
    """The environment variable of setting *name*."""
    return _OWN_VARIABLES.get(name, PREFIX + name.upper())


def default_of(name: str) -> Any:
    """Setting *name*'s default, as its declaration in Settings says."""
    if name == DEFINITIONS:
        return None
    found = {field.name: field for field in dataclasses.fields(Settings)}[name]
    return found.default


@dataclass(frozen=True)
class Source:
    """Where a setting's value came from: DEFAULT, FILE (*where* its path),
    ENVIRONMENT (the variable) or OPTION (the option's name)."""

    kind: str
    where: str | None = None

    def __str__(self) -> str:
        return self.kind if self.where is None else f"{self.kind} {self.where}"


@dataclass(frozen=True)
class Loaded:
    """The checked settings, the definitions module they name, where each
    setting came from, and the settings file read (or None)."""

    settings: Settings
    definitions: str | None
    sources: dict[str, Source]
    file: Path | None

    def value(self, name: str) -> Any:
        return self.definitions if name == DEFINITIONS else getattr(self.settings, name)


def _refuse(name: str, wanted: str, value: Any, source: Source) -> SettingError:
    return SettingError(f"pgbus-web setting {name} must be {wanted}; got {value!r} ({source})", name)


def parse(name: str, value: Any, source: Source) -> Any:
    """*value* of setting *name* as Settings holds it: text (a variable's)
    read by the setting's kind, a file's or an option's value as it is
    when it is already of that kind; SettingError otherwise."""
    kind = KINDS[name]
    if kind == TEXT:
        if not isinstance(value, str):
            raise _refuse(name, "text", value, source)
        return value
    if kind == VERBS:
        if isinstance(value, (list, tuple)) and all(isinstance(verb, str) for verb in value):
            return tuple(value)
        if not isinstance(value, str):
            raise _refuse(name, "verb names (a list, or text with commas)", value, source)
        return value
    if kind == FLAG:
        if isinstance(value, bool):
            return value
        text = value.strip().lower() if isinstance(value, str) else None
        if text in _TRUE or text in _FALSE:
            return text in _TRUE
        raise _refuse(name, "true or false", value, source)
    if isinstance(value, bool):
        raise _refuse(name, "a number" if kind == SECONDS else "a whole number", value, source)
    if kind == WHOLE:
        if isinstance(value, int):
            return value
        if isinstance(value, str) and value.strip().lstrip("-").isdigit():
            return int(value.strip())
        raise _refuse(name, "a whole number", value, source)
    if isinstance(value, (int, float)):
        return value
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, str):
        try:
            return float(value.strip())
        except ValueError:
            pass
    raise _refuse(name, "a number of seconds", value, source)


def _refuse_unknown(name: str, where: str) -> SettingError:
    if name in MOVED_TO_POLICY:
        return moved_to_policy(name)
    return SettingError(f"unknown pgbus-web setting {name!r} in {where}; known: {', '.join(NAMES)}", name)


def read_file(path: Path) -> dict[str, Any]:
    """The settings of the TOML file at *path*, by name; SettingError for a
    file that is missing or not TOML, or a key that names no setting."""
    try:
        with path.open("rb") as handle:
            found = tomllib.load(handle)
    except FileNotFoundError:
        raise SettingError(f"no pgbus-web settings file at {path} (--config or {CONFIG_ENV})") from None
    except OSError as exc:
        raise SettingError(f"cannot read the pgbus-web settings file {path}: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise SettingError(f"the pgbus-web settings file {path} is not TOML: {exc}") from None
    for key in found:
        if key not in KINDS:
            raise _refuse_unknown(key, f"the settings file {path}")
    return found


def read_environment(environ: Mapping[str, str]) -> dict[str, tuple[str, str]]:
    """The settings the environment gives, by name, each with its variable
    (an empty variable gives nothing); SettingError for a ``PGBUS_WEB_``
    variable that is neither a setting's nor one of OTHER_VARIABLES."""
    by_variable = {variable(name): name for name in NAMES}
    for key in sorted(environ):
        if not key.startswith(PREFIX) or key in by_variable or key in OTHER_VARIABLES:
            continue
        name = key[len(PREFIX) :].lower()
        if name in _OWN_VARIABLES:
            raise SettingError(f"{key} is not read: the variable of {name} is {_OWN_VARIABLES[name]}", name)
        if name in MOVED_TO_POLICY:
            raise moved_to_policy(name)
        raise SettingError(
            f"unknown pgbus-web setting in the environment: {key}; known: "
            + ", ".join(variable(known) for known in NAMES if variable(known).startswith(PREFIX)),
            name,
        )
    return {name: (environ[key], key) for key, name in by_variable.items() if environ.get(key)}


def load(
    options: Mapping[str, Any] | None = None,
    *,
    config: str | Path | None = None,
    environ: Mapping[str, str] | None = None,
    flags: Mapping[str, str] | None = None,
    registry: bool = True,
) -> Loaded:
    """The settings of this process: each from the highest source that
    gives it (the module's docstring), checked. *options* are the
    command's, by setting name (None: not given); *flags* the option's
    name where it is not ``--<name>``; *config* the settings file (else
    PGBUS_WEB_CONFIG's); *environ* os.environ by default. With *registry*,
    the definitions module named is loaded as the registry setting.
    SettingError names what is wrong, and where it came from."""
    environ = os.environ if environ is None else environ
    flags = flags or {}
    for name in options or {}:
        if name not in KINDS:
            raise _refuse_unknown(name, "the options")
    values: dict[str, Any] = {}
    sources: dict[str, Source] = {name: Source(DEFAULT) for name in NAMES}
    path = Path(config) if config else (Path(environ[CONFIG_ENV]) if environ.get(CONFIG_ENV) else None)
    if path is not None:
        for name, value in read_file(path).items():
            sources[name] = Source(FILE, str(path))
            values[name] = parse(name, value, sources[name])
    for name, (text, key) in read_environment(environ).items():
        sources[name] = Source(ENVIRONMENT, key)
        values[name] = parse(name, text, sources[name])
    for name, value in (options or {}).items():
        if value is None or value == ():
            continue
        sources[name] = Source(OPTION, flags.get(name, "--" + name.replace("_", "-")))
        values[name] = parse(name, value, sources[name])
    definitions = values.pop(DEFINITIONS, None)
    if registry and definitions:
        try:
            values["registry"] = load_registry(definitions)
        except DefinitionError as exc:
            raise SettingError(f"{exc} ({sources[DEFINITIONS]})", DEFINITIONS) from None
    try:
        settings = check(Settings(**values), available_locales())
    except SettingError as exc:
        source = sources.get(exc.setting or "")
        if source is None or source.kind == DEFAULT:
            raise
        raise SettingError(f"{exc} ({source})", exc.setting) from None
    return Loaded(settings, definitions, sources, path)


def shown(name: str, value: Any) -> Any:
    """*value* of setting *name* as ``pgbus-web config`` shows it: secrets
    masked, durations in seconds, verbs as a list; JSON's types."""
    if value is None:
        return None
    if name == "secret_key":
        return MASK
    if name in SECRETS:
        return masked_url(value)
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, tuple):
        return list(value)
    return value


def masked_url(url: str) -> str:
    """*url* with its password (in the authority or the query) as MASK;
    all of it masked when it cannot be read as a URL."""
    try:
        parsed = make_url(url)
    except ArgumentError:
        return MASK
    if parsed.password is not None:
        parsed = parsed.set(password=MASK)
    query = {key: (MASK if key.lower() == "password" else value) for key, value in parsed.query.items()}
    return parsed.set(query=query).render_as_string(hide_password=False).replace("%2A%2A%2A", MASK)
