"""The runs index with no run at all says which database it reads (host or
socket directory, and database name): the likeliest reason for an empty
dashboard is that it reads the wrong database. Never the password: the
test connects through a URL that carries one."""

from __future__ import annotations

import uuid

import pytest
import sqlalchemy as sa
from support.web_helpers import make_app, soup, text_of

from pgbus_web import db


@pytest.fixture
def with_password(engine, database_url):
    """(URL with a password, that password): a role of its own that may do
    what the test's role may."""
    role = f"pgbus_reader_{uuid.uuid4().hex[:8]}"
    password = f"never-shown-{uuid.uuid4().hex}"
    with engine.begin() as conn:
        member_of = conn.execute(sa.text("SELECT current_user")).scalar_one()
        conn.exec_driver_sql(f"CREATE ROLE {role} LOGIN PASSWORD '{password}'")
        conn.exec_driver_sql(f'GRANT "{member_of}" TO {role}')
    url = sa.make_url(database_url).set(username=role, password=password)
    try:
        yield url, password
    finally:
        with engine.begin() as conn:
            conn.exec_driver_sql(f"DROP ROLE {role}")


def where(url: sa.URL) -> tuple[str, str]:
    """The host and database the page should name, from the URL alone."""
    if url.host:
        return f"{url.host}:{url.port or 5432}", url.database
    socket_directory = url.query["host"]
    return (socket_directory if isinstance(socket_directory, str) else socket_directory[0]), url.database


def test_the_empty_index_names_host_and_database_and_never_the_password(with_password, runs):
    url, password = with_password
    host, name = where(url)
    database = db.Database.from_urls(url.render_as_string(hide_password=False))
    try:
        client = make_app(database).test_client()
        response = client.get("/workflows")
        assert response.status_code == 200
        body = response.get_data(as_text=True)
        assert password not in body
        found = soup(response).select_one(".pgbus-database-place")
        assert text_of(found) == f"This dashboard reads the database {name} on {host}."
        assert (found["data-host"], found["data-database"]) == (host, name)
        german = client.get("/workflows", headers={"Accept-Language": "de"})
        assert (
            text_of(soup(german).select_one(".pgbus-database-place"))
            == f"Das Dashboard liest die Datenbank {name} auf {host}."
        )
        assert password not in german.get_data(as_text=True)
        # Control: once there is a run, the page does not say it.
        runs.make("completed")
        assert soup(client.get("/workflows")).select_one(".pgbus-database-place") is None
    finally:
        database.dispose()
