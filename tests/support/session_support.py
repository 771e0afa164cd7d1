"""Sessions, tokens and access log lines for the pages' browser tests
(the Sessions page with something in each of its tables)."""

from __future__ import annotations

from datetime import timedelta

import sqlalchemy as sa

from pgbus_web.core import access_log, sessions, tokens


def seed_sessions(engine) -> None:
    for name, address in (("ada", "192.0.2.10"), ("pat.on-call@payments.example.com", "2001:db8:85a3::8a2e:370:7334")):
        sessions.start(engine, name, address=address, lifetime=timedelta(hours=8))
    tokens.add(
        engine, "grafana-read-only", "viewer", expires_in=timedelta(days=30), read_only=True, actor="cli:break-glass"
    )
    tokens.add(engine, "deploy-bot", "operator", actor="cli:break-glass")
    with engine.begin() as conn:
        conn.execute(
            sa.text(
                "UPDATE pgbus_web_api_tokens SET last_used_at = now() - interval '3 minutes',"
                " last_used_from = '198.51.100.23' WHERE name = 'deploy-bot'"
            )
        )
    access_log.new_address(engine, "deploy-bot", "198.51.100.23")
    sessions.failed(engine, "mallory", address="203.0.113.99")
