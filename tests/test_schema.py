import pytest
import sqlalchemy as sa
from click.testing import CliRunner

from pgbus_web import schema
from pgbus_web.cli import main_group


def _tables(conn):
    return {
        name
        for (name,) in conn.execute(
            sa.text("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
        )
    }


def test_install_twice_is_a_no_op(engine):
    result = schema.install(engine)
    assert result.installed is False
    assert result.version == schema.SCHEMA_VERSION
    with engine.connect() as conn:
        assert set(schema.TABLES) <= _tables(conn)
        assert schema.installed_version(conn) == schema.SCHEMA_VERSION
        assert conn.execute(sa.text("SELECT to_regclass('pgmq.meta') IS NOT NULL")).scalar_one()


def test_every_connection_runs_in_utc(engine):
    with engine.connect() as conn:
        assert conn.execute(sa.text("SHOW TimeZone")).scalar_one() == "UTC"


def test_another_schema_version_is_refused_and_nothing_changes(engine):
    with engine.begin() as conn:
        conn.execute(sa.text("UPDATE pgbus_web_schema SET version = 99"))
    try:
        with pytest.raises(schema.SchemaVersionError, match="version 99"):
            schema.install(engine)
        with engine.connect() as conn:
            assert conn.execute(sa.text("SELECT version FROM pgbus_web_schema")).scalars().all() == [99]
    finally:
        with engine.begin() as conn:
            conn.execute(sa.text("UPDATE pgbus_web_schema SET version = :v"), {"v": schema.SCHEMA_VERSION})


def test_cli_install_twice(engine, database_url):
    runner = CliRunner()
    first = runner.invoke(main_group, ["db", "install", "--database-url", database_url])
    assert first.exit_code == 0, first.output
    assert "already installed" in first.output


def test_cli_refuses_another_version_with_one_line(engine, database_url):
    with engine.begin() as conn:
        conn.execute(sa.text("UPDATE pgbus_web_schema SET version = 2"))
    try:
        result = CliRunner().invoke(main_group, ["db", "install", "--database-url", database_url])
        assert result.exit_code == 1
        assert "schema version 2" in result.output
        assert "Traceback" not in result.output
    finally:
        with engine.begin() as conn:
            conn.execute(sa.text("UPDATE pgbus_web_schema SET version = :v"), {"v": schema.SCHEMA_VERSION})


@pytest.mark.parametrize(
    "url, message",
    [
        ("mysql://root@localhost/app", "not a PostgreSQL URL"),
        ("postgresql://u@127.0.0.1:1/nowhere", "cannot reach the database"),
        ("::::", "malformed database URL"),
    ],
)
def test_cli_bad_urls_fail_in_one_line(url, message):
    result = CliRunner().invoke(main_group, ["db", "install", "--database-url", url])
    assert result.exit_code == 1
    assert message in result.output
    assert "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_events_are_append_only(engine, new_id):
    from pgbus_web.models import events, workflows

    run_id = new_id()
    with engine.begin() as conn:
        workflows.insert_run(conn, {"workflow_id": run_id, "workflow_class": "OrderWorkflow", "status": "ready"})
        events.record(conn, workflow_id=run_id, event="started", actor="system")
    with pytest.raises(sa.exc.DBAPIError, match="append-only"):
        with engine.begin() as conn:
            conn.execute(sa.text("UPDATE pgbus_workflow_events SET actor = 'mallory'"))
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT actor FROM pgbus_workflow_events")).scalar_one() == "system"
