-- Brings a benchmark database seeded before the runs carried their latest
-- step's facts (it records schema version 1, from before v1.sql took them
-- in) up to schema/v1.sql as released: the latest_* columns, the trigger
-- that keeps them, a backfill from each run's latest step, the reworked
-- pgbus_workflows_stuck and a narrower pgbus_workflow_steps_latest. Then
-- `pgbus-web db install` takes it to the current version like any version 1
-- database (schema/v2.sql, and `db repair` of whatever the backfill missed).
-- For benchmark databases only; a released database never lacked these.
-- Safe to run twice, and only on a database still at version 1:
--
--     psql URL -v ON_ERROR_STOP=1 -f bench/migrate_bench_db.sql
--     pgbus-web db install --database-url URL

\timing on

BEGIN;
-- On a later version this would put version 1's trigger back: refuse.
DO $$
BEGIN
    IF (SELECT max(version) FROM pgbus_web_schema) <> 1 THEN
        RAISE EXCEPTION 'this script is for schema version 1 databases only';
    END IF;
END;
$$;
ALTER TABLE pgbus_workflows
    ADD COLUMN IF NOT EXISTS latest_step_id       bigint,
    ADD COLUMN IF NOT EXISTS latest_step_name     text,
    ADD COLUMN IF NOT EXISTS latest_step_status   text,
    ADD COLUMN IF NOT EXISTS latest_error_class   text,
    ADD COLUMN IF NOT EXISTS latest_scheduled_at  timestamptz,
    ADD COLUMN IF NOT EXISTS latest_waiting_since timestamptz,
    ADD COLUMN IF NOT EXISTS latest_timeout_at    timestamptz;

CREATE OR REPLACE FUNCTION pgbus_workflow_steps_latest_on_run() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE pgbus_workflows
    SET latest_step_id = NEW.id,
        latest_step_name = NEW.step_name,
        latest_step_status = NEW.status,
        latest_error_class = NEW.error_class,
        latest_scheduled_at = NEW.scheduled_at,
        latest_waiting_since = NEW.waiting_since,
        latest_timeout_at = NEW.timeout_at
    WHERE workflow_id = NEW.workflow_id
      AND (latest_step_id IS NULL OR latest_step_id <= NEW.id)
      AND (latest_step_id, latest_step_name, latest_step_status, latest_error_class,
           latest_scheduled_at, latest_waiting_since, latest_timeout_at)
          IS DISTINCT FROM (NEW.id, NEW.step_name, NEW.status, NEW.error_class,
                            NEW.scheduled_at, NEW.waiting_since, NEW.timeout_at);
    RETURN NULL;
END;
$$;
DROP TRIGGER IF EXISTS pgbus_workflow_steps_latest_on_run ON pgbus_workflow_steps;
CREATE TRIGGER pgbus_workflow_steps_latest_on_run
    AFTER INSERT OR UPDATE OF workflow_id, step_name, status, error_class, scheduled_at,
                              waiting_since, timeout_at
    ON pgbus_workflow_steps
    FOR EACH ROW EXECUTE FUNCTION pgbus_workflow_steps_latest_on_run();

-- The old stuck index goes before the backfill: one index less to write
-- for every updated run.
DROP INDEX IF EXISTS pgbus_workflows_stuck;
COMMIT;

-- From here on the trigger keeps every new step write right; the backfill
-- fills in what was there before (a run changed meanwhile is already right
-- and is left alone).
UPDATE pgbus_workflows w
SET latest_step_id = s.id,
    latest_step_name = s.step_name,
    latest_step_status = s.status,
    latest_error_class = s.error_class,
    latest_scheduled_at = s.scheduled_at,
    latest_waiting_since = s.waiting_since,
    latest_timeout_at = s.timeout_at
FROM (
    SELECT DISTINCT ON (workflow_id)
           workflow_id, id, step_name, status, error_class, scheduled_at, waiting_since, timeout_at
    FROM pgbus_workflow_steps
    ORDER BY workflow_id, id DESC
) s
WHERE w.workflow_id = s.workflow_id
  AND w.latest_step_id IS DISTINCT FROM s.id;

CREATE INDEX pgbus_workflows_stuck
    ON pgbus_workflows (workflow_class, status)
    INCLUDE (id, workflow_id, current_step, paused_at, latest_step_name, latest_step_status,
             latest_error_class, latest_scheduled_at, latest_waiting_since, latest_timeout_at)
    WHERE status IN ('paused', 'ready', 'waiting');

-- The latest-step index no longer needs its included columns: built anew
-- beside the old one, then swapped, so queries keep an index meanwhile.
CREATE INDEX pgbus_workflow_steps_latest_narrow ON pgbus_workflow_steps (workflow_id, id DESC);
BEGIN;
DROP INDEX pgbus_workflow_steps_latest;
ALTER INDEX pgbus_workflow_steps_latest_narrow RENAME TO pgbus_workflow_steps_latest;
COMMIT;

VACUUM ANALYZE pgbus_workflows;
VACUUM ANALYZE pgbus_workflow_steps;
