"""``pgbus-web config``: the settings this command line would run with,
each with where it came from (its default, the settings file, a variable,
an option: core/settings_loader.py, docs/settings.md), secrets masked.

It opens no database; a setting that cannot be used is refused as every
command refuses it, and nothing is printed but that sentence.
"""

from __future__ import annotations

from typing import Any

import click

from ..core import settings_loader
from ..core.settings_loader import Loaded, Source
from ..core.words import config_words
from . import output
from .common import database_url_option, friendly_errors, load_settings, main_group


def source_words(source: Source) -> str:
    return config_words.source(source.kind, source.where)


def value_text(value: Any) -> str:
    """A shown value (settings_loader.shown) as one cell of the table."""
    if value is None:
        return config_words.unset()
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, list):
        return ",".join(value)
    return str(value)


def rows(loaded: Loaded) -> list[dict[str, Any]]:
    """One object per setting, in the loader's order: its name, its value
    as shown (masked), its source's kind, where (the path, variable or
    option; None for a default) and its variable."""
    return [
        {
            "setting": name,
            "value": settings_loader.shown(name, loaded.value(name)),
            "source": loaded.sources[name].kind,
            "from": loaded.sources[name].where,
            "variable": settings_loader.variable(name),
        }
        for name in settings_loader.NAMES
    ]


@main_group.command("config")
@database_url_option
@click.option("--json", "as_json", is_flag=True, help="JSON Lines for scripts (a setting a line).")
@friendly_errors
def config(database_url: str | None, as_json: bool) -> None:
    """Print the effective settings and where each came from.

    Lowest first: the default, the settings file (--config or
    PGBUS_WEB_CONFIG), the environment (PGBUS_WEB_<NAME>), the options."""
    loaded = load_settings()
    found = rows(loaded)
    if as_json:
        output.echo_json_lines(found)
        return
    path = None if loaded.file is None else str(loaded.file)
    click.echo(config_words.settings_file(path, option="--config", variable=settings_loader.CONFIG_ENV))
    output.echo_table(
        config_words.columns(),
        ((row["setting"], value_text(row["value"]), source_words(loaded.sources[row["setting"]])) for row in found),
    )
