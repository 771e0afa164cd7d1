import pytest
import sqlalchemy as sa
from click.testing import CliRunner

from pgbus_web import schema
from pgbus_web.launch import main_group


def _tables(conn):
    return {name for (name,) in conn.execute(sa.text("SELECT tablename FROM pg_tables WHERE schemaname = 'public'"))}


def test_install_twice_is_a_no_op(engine):
    result = schema.install(engine)
    assert result.installed is False
    assert result.version == schema.SCHEMA_VERSION
    with engine.connect() as conn:
        assert set(schema.TABLES + schema.DERIVED_TABLES) <= _tables(conn)
        assert schema.installed_version(conn) == schema.SCHEMA_VERSION
        assert conn.execute(sa.text("SELECT to_regclass('pgmq.meta') IS NOT NULL")).scalar_one()


def test_every_connection_runs_in_utc(engine):
    with engine.connect() as conn:
        assert conn.execute(sa.text("SHOW TimeZone")).scalar_one() == "UTC"


def catalog(conn) -> dict[str, list]:
    """What install could change: tables, columns, functions, triggers,
    indexes and the recorded versions."""
    queries = {
        "tables": "SELECT tablename FROM pg_tables WHERE schemaname IN ('public', 'pgmq') ORDER BY 1",
        "columns": "SELECT table_name, column_name, data_type FROM information_schema.columns "
        "WHERE table_schema = 'public' ORDER BY 1, 2",
        "functions": "SELECT proname, md5(prosrc) FROM pg_proc WHERE pronamespace = 'public'::regnamespace ORDER BY 1",
        "triggers": "SELECT tgname, pg_get_triggerdef(oid) FROM pg_trigger WHERE NOT tgisinternal ORDER BY 1",
        "indexes": "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = 'public' ORDER BY 1",
        "versions": "SELECT version FROM pgbus_web_schema ORDER BY 1",
    }
    return {name: [tuple(row) for row in conn.execute(sa.text(sql))] for name, sql in queries.items()}


def test_a_fresh_install_records_each_version_it_applied(engine):
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT version FROM pgbus_web_schema ORDER BY 1")).scalars().all() == list(
            range(1, schema.SCHEMA_VERSION + 1)
        )
        triggers = (
            conn.execute(
                sa.text("SELECT tgname FROM pg_trigger WHERE NOT tgisinternal AND tgname LIKE '%latest%' ORDER BY 1")
            )
            .scalars()
            .all()
        )
    assert triggers == [
        "pgbus_workflow_steps_latest_on_delete",
        "pgbus_workflow_steps_latest_on_move",
        "pgbus_workflow_steps_latest_on_run",
        "pgbus_workflow_steps_latest_on_truncate",
        "pgbus_workflows_latest_on_insert",
    ]


@pytest.mark.parametrize("newer", [schema.SCHEMA_VERSION + 1, 99])
def test_a_newer_schema_version_is_refused_and_nothing_changes(engine, newer):
    with engine.begin() as conn:
        conn.execute(sa.text("INSERT INTO pgbus_web_schema (version) VALUES (:v)"), {"v": newer})
    try:
        with engine.connect() as conn:
            before = catalog(conn)
        with pytest.raises(schema.SchemaVersionError, match=f"version {newer}"):
            schema.install(engine)
        with engine.connect() as conn:
            assert catalog(conn) == before
            assert schema.installed_version(conn) == newer
    finally:
        with engine.begin() as conn:
            conn.execute(sa.text("DELETE FROM pgbus_web_schema WHERE version = :v"), {"v": newer})


def test_cli_install_twice(engine, database_url):
    runner = CliRunner()
    first = runner.invoke(main_group, ["db", "install", "--database-url", database_url])
    assert first.exit_code == 0, first.output
    assert "already installed" in first.output


def test_cli_refuses_a_newer_version_with_one_line(engine, database_url):
    newer = schema.SCHEMA_VERSION + 1
    with engine.begin() as conn:
        conn.execute(sa.text("INSERT INTO pgbus_web_schema (version) VALUES (:v)"), {"v": newer})
    try:
        result = CliRunner().invoke(main_group, ["db", "install", "--database-url", database_url])
        assert result.exit_code == 1
        assert f"schema version {newer}" in result.output
        assert "Nothing was changed" in result.output
        assert "Traceback" not in result.output
    finally:
        with engine.begin() as conn:
            conn.execute(sa.text("DELETE FROM pgbus_web_schema WHERE version = :v"), {"v": newer})


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
    from pgbus_web.models import events, workflow_rows

    run_id = new_id()
    with engine.begin() as conn:
        workflow_rows.insert_run(conn, {"workflow_id": run_id, "workflow_class": "OrderWorkflow", "status": "ready"})
        events.record(conn, workflow_id=run_id, event="started", actor="system")
    with pytest.raises(sa.exc.DBAPIError, match="append-only"):
        with engine.begin() as conn:
            conn.execute(sa.text("UPDATE pgbus_workflow_events SET actor = 'mallory'"))
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT actor FROM pgbus_workflow_events")).scalar_one() == "system"
