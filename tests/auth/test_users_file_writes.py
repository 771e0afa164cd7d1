"""`pgbus-web users add/remove` as operators run them: several at once
(each keeps every other's user: the file is changed under a lock, as it is
then) and through a symlink (the link stays a link; the file it points to
is what changes)."""

from __future__ import annotations

import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest
from support.auth_support import write_users

from pgbus_web.auth import users

PARALLEL = 10


def users_command(*args: str, password: str | None = None) -> subprocess.CompletedProcess:
    # The password comes from stdin's first line when it is not a terminal.
    return subprocess.run(
        [sys.executable, "-m", "pgbus_web", "users", *args], input=password, capture_output=True, text=True, timeout=120
    )


@pytest.mark.scale
def test_parallel_adds_keep_every_user(tmp_path):
    path = write_users(tmp_path / "users")
    before = set(users.read(path))
    names = [f"user{number}" for number in range(PARALLEL)]
    with ThreadPoolExecutor(PARALLEL) as pool:
        done = list(
            pool.map(
                lambda name: users_command(
                    "add", name, "--role", "viewer", "--users-file", str(path), password=f"{name} password\n"
                ),
                names,
            )
        )
    assert [result.returncode for result in done] == [0] * PARALLEL, [result.stderr for result in done]
    assert set(users.read(path)) == before | set(names)
    # And removing them at once leaves the others.
    with ThreadPoolExecutor(PARALLEL) as pool:
        done = list(pool.map(lambda name: users_command("remove", name, "--users-file", str(path)), names))
    assert [result.returncode for result in done] == [0] * PARALLEL, [result.stderr for result in done]
    assert set(users.read(path)) == before
    # Nothing left beside it but its lock file.
    assert sorted(entry.name for entry in tmp_path.iterdir()) == [".users.lock", "users"]


def test_a_users_file_reached_through_a_symlink_stays_a_symlink(tmp_path):
    (tmp_path / "secrets").mkdir()
    target = write_users(tmp_path / "secrets" / "users")
    link = tmp_path / "users"
    link.symlink_to(os.path.relpath(target, tmp_path))
    added = users_command("add", "carol", "--role", "operator", "--users-file", str(link), password="carols password\n")
    assert added.returncode == 0, added.stderr
    assert link.is_symlink() and link.resolve() == target.resolve()
    assert "carol" in users.read(target)
    assert oct(target.stat().st_mode & 0o777) == "0o600"
    removed = users_command("remove", "carol", "--users-file", str(link))
    assert removed.returncode == 0, removed.stderr
    assert link.is_symlink() and "carol" not in users.read(target)
    # The temporary file and the lock are beside the target, not the link.
    assert sorted(entry.name for entry in tmp_path.iterdir()) == ["secrets", "users"]
    assert sorted(entry.name for entry in target.parent.iterdir()) == [".users.lock", "users"]


def test_a_failed_change_writes_nothing(tmp_path):
    path = write_users(tmp_path / "users")
    before = path.read_bytes()
    missing = users_command("remove", "nobody", "--users-file", str(path))
    assert missing.returncode == 1 and "no user 'nobody'" in missing.stderr
    assert path.read_bytes() == before
