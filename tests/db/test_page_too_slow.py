"""A page whose statement the server cancels past its statement timeout
says so ("Took too long": the database answers, slowly), not "Database
unavailable", which sent the operator looking for an outage in the
million-run trial (docs/operations.md). A database that is away still says
"Database unavailable" (tests/test_frozen_database.py)."""

from __future__ import annotations

import sqlalchemy as sa
from support.frozen import app_on
from support.web_helpers import soup, text_of

from pgbus_web.i18n import force_locale, t


def test_a_statement_past_its_timeout_says_it_took_too_long(database_url, engine):
    # Control: the same page, nothing in its way.
    assert app_on(database_url, statement_timeout=0.5).test_client().get("/workflows").status_code == 200
    # A fresh app: one that has drawn the index shows its kept read again
    # while the change marker stands (web/answering/page_cache.py).
    client = app_on(database_url, statement_timeout=0.5).test_client()
    # Another transaction holds the runs table: the page's read waits on
    # it until the server cancels it.
    holder = engine.connect()
    held = holder.begin()
    holder.execute(sa.text("LOCK TABLE pgbus_workflows IN ACCESS EXCLUSIVE MODE"))
    try:
        response = client.get("/workflows")
    finally:
        held.rollback()
        holder.close()
    assert response.status_code == 503
    page = soup(response)
    with force_locale("en"):
        assert text_of(page.select_one("h1")) == t("pgbus.web.errors.too_slow_title") == "Took too long"
        assert t("pgbus.web.errors.too_slow") in text_of(page.select_one("main"))
    assert "not answering" not in response.get_data(as_text=True)
