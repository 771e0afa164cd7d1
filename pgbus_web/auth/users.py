"""The users file: one ``name:role:hash`` line per user, or
``name:role:group,group:hash`` for a user in groups that the policy's
grants name (the hash is Argon2id's PHC string, which holds no colon). Lines that start with ``#``
and blank lines are ignored. Written whole to a temporary file and renamed,
readable by its owner only; read again by the server when it changes, so
``pgbus-web users add/remove`` takes effect without a restart.
"""

from __future__ import annotations

import logging
import os
import tempfile
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

try:
    import fcntl
except ImportError:
    fcntl = None  # type: ignore[assignment]  # not POSIX: no lock between two commands

from ..rules import roles
from ..rules.roles import NAME, OPERATOR, ROLES, VIEWER  # noqa: F401  (the users file's names)

T = TypeVar("T")
log = logging.getLogger(__name__)


class UsersFileError(ValueError):
    """A users file that cannot be read, or a bad name or role; *line*:
    the file's line at fault, when one is."""

    def __init__(self, message: str, line: int | None = None) -> None:
        super().__init__(message)
        self.line = line


@dataclass(frozen=True)
class User:
    name: str
    role: str
    password_hash: str
    groups: tuple[str, ...] = ()

    @property
    def may_act(self) -> bool:
        return self.role != VIEWER

    @property
    def line(self) -> str:
        groups = f"{','.join(self.groups)}:" if self.groups else ""
        return f"{self.name}:{self.role}:{groups}{self.password_hash}"


def check_name(name: str) -> str:
    try:
        return roles.check_name(name)
    except roles.BadName as problem:
        raise UsersFileError(str(problem)) from None


def check_role(role: str) -> str:
    if role not in ROLES:
        raise UsersFileError(f"invalid role {role!r}: use {', '.join(ROLES)}")
    return role


def check_groups(text: str) -> tuple[str, ...]:
    """The groups of *text* (names joined by commas), each a name."""
    found = tuple(dict.fromkeys(part.strip() for part in text.split(",") if part.strip()))
    for group in found:
        if not NAME.match(group):
            raise UsersFileError(f"invalid group name {group!r}: use 1 to 64 letters, digits, '.', '_', '@' or '-'")
    return found


def parse(text: str, source: str = "users file") -> dict[str, User]:
    users: dict[str, User] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        parts = line.split(":")
        if len(parts) not in (3, 4) or not parts[-1]:
            raise UsersFileError(f"{source}, line {number}: expected name:role:hash or name:role:groups:hash", number)
        name, role, password_hash = parts[0], parts[1], parts[-1]
        try:
            check_name(name)
            check_role(role)
            groups = check_groups(parts[2]) if len(parts) == 4 else ()
        except UsersFileError as exc:
            raise UsersFileError(f"{source}, line {number}: {exc}", number) from None
        users[name] = User(name, role, password_hash, groups)
    return users


def read(path: Path) -> dict[str, User]:
    """The users in *path*; an absent file has none."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError) as exc:
        raise UsersFileError(f"cannot read {path}: {exc}") from None
    return parse(text, str(path))


def _target(path: Path) -> Path:
    # A users file reached through a symlink (a mounted secret, a shared
    # folder) is written where the link points, so the link stays a link.
    return Path(os.path.realpath(path))


@contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold an exclusive lock for changing *path* (a lock file beside the
    file the path leads to): two `users add` at once would otherwise each
    write what they read before the other's write, and one user is lost."""
    target = _target(path)
    handle = open(target.parent / f".{target.name}.lock", "a")
    try:
        if fcntl is not None:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        yield
    finally:
        handle.close()  # and with it the lock


def change(path: Path, edit: Callable[[dict[str, User]], T]) -> T:
    """Read *path* under the lock, let *edit* change its users in place,
    and write them back; *edit*'s result (it may raise to write nothing)."""
    with locked(path):
        users = read(path)
        result = edit(users)
        write(path, users)
        return result


def write(path: Path, users: dict[str, User]) -> None:
    """Replace *path* (or the file its symlink points to) with *users*,
    atomically, mode 0600."""
    path = _target(path)
    lines = ["# pgbus-web users: name:role[:groups]:argon2 hash (pgbus-web users add/remove)"]
    lines += [u.line for u in sorted(users.values(), key=lambda u: u.name)]
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write("\n".join(lines) + "\n")
        os.chmod(temporary, 0o600)
        os.replace(temporary, path)
    except BaseException:
        try:
            os.unlink(temporary)
        except FileNotFoundError:
            pass
        raise


class UsersFile:
    """The users of one file, read again whenever its mtime or size changes.
    A file that cannot be read raises UsersFileError: at start, and on
    every look-up until the file changes again (logged once per change)."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._stamp: tuple | None = None
        self._users: dict[str, User] = {}
        self._problem: UsersFileError | None = None
        self._started = False
        self.get("")  # a bad file fails at startup, not on the first sign-in
        self._started = True

    def _current_stamp(self) -> tuple | None:
        try:
            stat = self.path.stat()
        except FileNotFoundError:
            return None
        return (stat.st_mtime_ns, stat.st_size, stat.st_ino)

    def users(self) -> dict[str, User]:
        with self._lock:
            stamp = self._current_stamp()
            if stamp != self._stamp or self._stamp is None:
                try:
                    self._users, self._problem = read(self.path), None
                except UsersFileError as problem:
                    # Not the last good users: a user removed by the edit
                    # that broke the file must not stay signed in.
                    self._users, self._problem = {}, problem
                    if self._started:
                        log.error("pgbus-web: %s; sign-in answers 503 until the users file is fixed", problem)
                self._stamp = stamp
            if self._problem is not None:
                raise self._problem
            return self._users

    def get(self, name: str) -> User | None:
        return self.users().get(name)
