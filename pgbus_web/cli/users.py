"""``pgbus-web users ...``: who may sign in to ``pgbus-web serve``."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from ..auth import passwords, users
from ..core.words import command_line
from .common import main_group

USERS_FILE_ENV = "PGBUS_WEB_USERS_FILE"

users_file_option = click.option(
    "--users-file",
    type=click.Path(dir_okay=False, path_type=Path),
    required=True,
    envvar=USERS_FILE_ENV,
    show_envvar=True,
    help="The users file (name:role:hash lines).",
)


def _read(path: Path) -> dict[str, users.User]:
    try:
        return users.read(path)
    except users.UsersFileError as exc:
        raise click.ClickException(str(exc)) from None


def _change(path: Path, edit):
    """*edit* applied to the file as it is under the lock, not as it was
    read before the password was asked: another command may have written
    it since."""
    try:
        return users.change(path, edit)
    except users.UsersFileError as exc:
        raise click.ClickException(str(exc)) from None
    except OSError as exc:
        raise click.ClickException(command_line.cannot_write(path, exc.strerror or exc)) from None


def _password() -> str:
    """Asked twice on a terminal; otherwise the first line of stdin."""
    if sys.stdin.isatty():
        return click.prompt("Password", hide_input=True, confirmation_prompt=True)
    return sys.stdin.readline().rstrip("\r\n")


@main_group.group("users")
def users_group() -> None:
    """Who may sign in to `pgbus-web serve --users-file`."""


@users_group.command("add")
@click.argument("name")
@click.option(
    "--role",
    type=click.Choice(users.ROLES),
    required=True,
    help="viewer: sees the pages; operator: also acts on runs and locks; approver: also approves "
    "another's operation; admin: also reveals redacted values and changes the policy.",
)
@click.option(
    "--group", "groups", multiple=True, help="A group the policy's grants may name (group:<name>); repeat for several."
)
@users_file_option
def add(name: str, role: str, groups: tuple[str, ...], users_file: Path) -> None:
    """Add NAME, or change its role and password. The password is asked
    for on a terminal, else read from the first line of stdin."""
    try:
        users.check_name(name)
        checked_groups = users.check_groups(",".join(groups))
    except users.UsersFileError as exc:
        raise click.ClickException(str(exc)) from None
    _read(users_file)  # an unreadable file fails before the password is asked
    password = _password()
    if len(password) < 8:
        raise click.ClickException(command_line.password_too_short())
    try:
        hashed = passwords.hash_password(password)
    except passwords.HashingUnavailable as exc:
        raise click.ClickException(str(exc)) from None
    user = users.User(name, role, hashed, checked_groups)

    def put(current: dict[str, users.User]) -> bool:
        known = name in current
        current[name] = user
        return known

    known = _change(users_file, put)
    click.echo(command_line.user_put(name, role, users_file, known=known))


@users_group.command("remove")
@click.argument("name")
@users_file_option
def remove(name: str, users_file: Path) -> None:
    """Remove NAME: its sessions end with its next request."""

    def drop(current: dict[str, users.User]) -> None:
        if name not in current:
            raise click.ClickException(command_line.no_user(name, users_file))
        del current[name]

    _change(users_file, drop)
    click.echo(command_line.user_removed(name, users_file))


@users_group.command("list")
@users_file_option
def list_users(users_file: Path) -> None:
    """List the users and their roles."""
    for user in sorted(_read(users_file).values(), key=lambda u: u.name):
        click.echo(f"{user.name}\t{user.role}" + (f"\t{','.join(user.groups)}" if user.groups else ""))
