"""pgbus_web_sign_in_generations: each user's session generation
(auth/session.py); sign-out raises it, ending every session made before."""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.engine import Connection


def generation(conn: Connection, name: str) -> int:
    """*name*'s current generation (0 before their first sign-out)."""
    found = conn.execute(
        sa.text("SELECT generation FROM pgbus_web_sign_in_generations WHERE name = :name"), {"name": name}
    ).scalar_one_or_none()
    return int(found or 0)


def bump(conn: Connection, name: str) -> int:
    """Raise *name*'s generation by one, in one statement; the new one."""
    return int(
        conn.execute(
            sa.text(
                "INSERT INTO pgbus_web_sign_in_generations AS g (name, generation) VALUES (:name, 1)"
                " ON CONFLICT (name) DO UPDATE SET generation = g.generation + 1 RETURNING generation"
            ),
            {"name": name},
        ).scalar_one()
    )
