"""What a refused request left behind: every table's rows (to prove nothing
was written) and the message a page showed."""

from __future__ import annotations

import sqlalchemy as sa

from pgbus_web.schema import TABLES
from support.web_helpers import soup, text_of


def everything(engine) -> dict[str, list[tuple]]:
    """Every row of every dashboard table, to prove nothing was written.
    Not the sign-in's own bookkeeping (the throttle's counts, the session
    generations), which a refused sign-in writes on purpose."""
    with engine.connect() as conn:
        return {
            table: sorted(tuple(map(repr, row)) for row in conn.execute(sa.text(f"SELECT * FROM {table}")))
            for table in TABLES
            if not table.startswith("pgbus_web_sign_in")
        }


def page_message(response) -> str:
    page = soup(response)
    node = (
        page.select_one(".pgbus-error-message")
        or page.select_one(".pgbus-notice-error")
        or page.select_one("#pgbus-messages")
    )
    return text_of(node)
