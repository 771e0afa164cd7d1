"""The words of ``pgbus-web config`` (pgbus.config.*): where each setting
came from, an unset value, the settings file read, the table's headers."""

from __future__ import annotations

from ...i18n import t
from ..settings_loader import DEFAULT, ENVIRONMENT, FILE, OPTION

# The words of each source (FILE's with the path, ENVIRONMENT's with the
# variable, OPTION's with the option).
_SOURCE_KEYS = {
    DEFAULT: ("pgbus.config.sources.default", None),
    FILE: ("pgbus.config.sources.file", "path"),
    ENVIRONMENT: ("pgbus.config.sources.environment", "variable"),
    OPTION: ("pgbus.config.sources.option", "option"),
}


def source(kind: str, where: str | None) -> str:
    """Where a setting came from: its default, the file at *where*, the
    variable or the option *where*."""
    key, name = _SOURCE_KEYS[kind]
    return t(key) if name is None else t(key, **{name: where})


def unset() -> str:
    """A setting with no value."""
    return t("pgbus.config.unset")


def settings_file(path: str | None, *, option: str, variable: str) -> str:
    """The settings file read (*path*), or that none was given, and how to give one."""
    if path is None:
        return t("pgbus.config.no_file", option=option, variable=variable)
    return t("pgbus.config.file", path=path)


def columns() -> tuple[str, str, str]:
    """The table's headers: the setting, its value, where it came from."""
    return t("pgbus.config.columns.setting"), t("pgbus.config.columns.value"), t("pgbus.config.columns.source")
