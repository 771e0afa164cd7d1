"""A database at schema version 1 is brought to version 2 by `db install`:
the new triggers, and a repair of the runs version 1 left wrong. Each test
gets a database of its own on the test server."""

from __future__ import annotations

from datetime import timedelta

import pytest
import sqlalchemy as sa
from click.testing import CliRunner
from support.latest_steps import add_run, add_step, assert_columns_match, sql
from support.runtime_support import T0

from pgbus_web import schema
from pgbus_web.launch import main_group
from pgbus_web.models import recount, workflow_upkeep
from pgbus_web.rules import states


def stuck(engine):
    # Counted from the runs' latest_* columns themselves (what version 1
    # left wrong), not from the kept counts a later version adds.
    with engine.connect() as conn:
        summary = recount.stuck_reason_summary(conn, threshold=timedelta(minutes=10), now=T0)
    return {key: runs for key, (runs, _) in summary.items()}


def mismatches(engine) -> int:
    with engine.connect() as conn:
        return workflow_upkeep.latest_mismatches(conn, after_id=0, last_id=2**62, limit=0)[0]


def versions(engine) -> list[int]:
    with engine.connect() as conn:
        return conn.execute(sa.text("SELECT version FROM pgbus_web_schema ORDER BY 1")).scalars().all()


def test_db_install_upgrades_a_version_1_database_and_repairs_what_it_left(scratch):
    url, engine = scratch
    assert schema.install(engine, target=1).version == 1
    stalled_run, moved_from, kept = add_run(engine, "stalled"), add_run(engine, "moved"), add_run(engine, "kept")
    stalled = add_step(engine, stalled_run, "charge", "failed", error_class=states.STEP_STALLED_ERROR)
    moved = add_step(engine, moved_from, "charge", "failed", error_class="Boom")
    add_step(engine, kept, "charge", "failed", error_class="Boom")
    sql(engine, "DELETE FROM pgbus_workflow_steps WHERE id = :id", id=stalled)
    sql(engine, "UPDATE pgbus_workflow_steps SET workflow_id = 'kept' WHERE id = :id", id=moved)
    # What version 1 leaves: both runs still read their gone step.
    assert mismatches(engine) == 2
    assert stuck(engine) == {("Hand", states.STALLED): 1, ("Hand", states.PAUSED_ERROR): 2}

    result = CliRunner().invoke(main_group, ["db", "install", "--database-url", url])
    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == [
        f"Upgraded pgbus-web schema version 1 to {schema.SCHEMA_VERSION}.",
        "Repaired the latest-step columns of 2 of 3 runs.",
    ]
    assert versions(engine) == list(range(1, schema.SCHEMA_VERSION + 1))
    assert mismatches(engine) == 0
    assert stuck(engine) == {("Hand", states.PAUSED_MANUAL): 2, ("Hand", states.PAUSED_ERROR): 1}

    # The version 2 triggers are in place: a delete keeps the columns right.
    sql(engine, "DELETE FROM pgbus_workflow_steps WHERE workflow_id = 'kept' AND id = :id", id=moved)
    assert_columns_match(engine)

    again = CliRunner().invoke(main_group, ["db", "install", "--database-url", url])
    assert (again.exit_code, again.output.strip()) == (
        0,
        f"Schema version {schema.SCHEMA_VERSION} is already installed; nothing to do.",
    )


def test_install_upgrades_in_place_and_says_from_which_version(scratch):
    _, engine = scratch
    schema.install(engine, target=1)
    assert not _has_table(engine, "pgbus_web_operations")  # control: version 1 has none
    result = schema.install(engine)
    assert (result.version, result.installed, result.upgraded_from) == (schema.SCHEMA_VERSION, True, 1)
    assert versions(engine) == list(range(1, schema.SCHEMA_VERSION + 1))
    # Version 2 brings the operations table (docs/operations.md).
    assert _has_table(engine, "pgbus_web_operations")


def _has_table(engine, name: str) -> bool:
    import sqlalchemy as sa

    with engine.connect() as conn:
        return conn.execute(sa.text("SELECT to_regclass(:name) IS NOT NULL"), {"name": name}).scalar_one()


def test_a_fresh_install_is_no_upgrade(scratch):
    _, engine = scratch
    result = schema.install(engine)
    assert (result.installed, result.pgmq_installed, result.upgraded_from) == (True, True, None)
    assert versions(engine) == list(range(1, schema.SCHEMA_VERSION + 1))


def test_no_version_beyond_this_release_is_installed(scratch):
    _, engine = scratch
    with pytest.raises(ValueError, match=f"no schema version {schema.SCHEMA_VERSION + 1}"):
        schema.install(engine, target=schema.SCHEMA_VERSION + 1)
    with engine.connect() as conn:
        assert schema.installed_version(conn) is None


def test_a_version_2_database_gets_the_api_tokens_table(scratch):
    from pgbus_web.core import tokens

    _, engine = scratch
    schema.install(engine, target=2)
    assert not _has_table(engine, "pgbus_web_api_tokens")  # control: version 2 has none
    result = schema.install(engine, target=3)
    assert (result.version, result.upgraded_from) == (3, 2)
    assert _has_table(engine, "pgbus_web_api_tokens")
    schema.install(engine)  # the code of this release reads the columns later versions add
    token, row = tokens.add(engine, "ci", "viewer")
    assert tokens.check(engine, token).name == "ci" and row["role"] == "viewer"


def test_a_version_16_database_keeps_its_tokens_and_gets_sessions_and_the_access_log(scratch):
    import hashlib

    import sqlalchemy as sa

    from pgbus_web.core import tokens

    _, engine = scratch
    schema.install(engine, target=16)
    assert not _has_table(engine, "pgbus_web_sessions") and not _has_table(engine, "pgbus_web_access_log")
    token = tokens.PREFIX + "made-by-version-16"
    with engine.begin() as conn:
        conn.execute(
            sa.text("INSERT INTO pgbus_web_api_tokens (name, role, token_sha256) VALUES ('old', 'admin', :d)"),
            {"d": hashlib.sha256(token.encode()).hexdigest()},
        )
    result = schema.install(engine, target=17)
    assert (result.version, result.upgraded_from) == (17, 16)
    assert _has_table(engine, "pgbus_web_sessions") and _has_table(engine, "pgbus_web_access_log")
    # A token made before expiries and scopes never expires and keeps its role's powers.
    found = tokens.check(engine, token)
    assert (found.name, found.role, found.read_only, found.expires_at) == ("old", "admin", False, None)


def test_a_version_3_database_gets_the_sign_in_generations_table(scratch):
    from pgbus_web.models import sign_ins

    _, engine = scratch
    schema.install(engine, target=3)
    assert not _has_table(engine, "pgbus_web_sign_in_generations")  # control: version 3 has none
    result = schema.install(engine, target=4)
    assert (result.version, result.upgraded_from) == (4, 3)
    with engine.begin() as conn:
        assert sign_ins.generation(conn, "vera") == 0
        assert [sign_ins.bump(conn, "vera"), sign_ins.bump(conn, "vera")] == [1, 2]
        assert sign_ins.generation(conn, "vera") == 2
