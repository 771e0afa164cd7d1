"""Changing the policy, and the command line under a token."""

from __future__ import annotations

from click.testing import CliRunner

from pgbus_web.core import policy
from pgbus_web.launch import main_group


def set_rule(engine, key, value, actor="test:admin"):
    return policy.change(engine, key, value, actor=actor, reason="the test's")


def cli(database_url, *args, token=None):
    env = {"PGBUS_WEB_TOKEN": token or "", "LOGNAME": "someoneelse", "PGBUS_WEB_APPROVAL_THRESHOLD": ""}
    return CliRunner().invoke(main_group, [*args, "--database-url", database_url], env=env, catch_exceptions=False)
