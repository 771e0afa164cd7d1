-- pgbus-web schema, version 2, applied after v1.sql (on a fresh install
-- and on a version 1 database): the runs' latest_* columns stay equal to
-- their latest step row through every write to the steps, and the table of
-- operations (one verb on every run a filter matches, docs/operations.md).
--
-- Version 1 copied a step row into its run on INSERT and UPDATE only, so a
-- run kept pointing at its latest step after that row was deleted, moved
-- to another run or given a lower id, and after a TRUNCATE of the steps;
-- the needs-attention groups then differed from the latest step's truth.
-- This migration changes no existing data: rows version 1 left wrong are found by
-- `pgbus-web db check` and fixed by `pgbus-web db repair` (which
-- `pgbus-web db install` runs after this upgrade), in short batches rather
-- than inside this transaction.

-- INSERT and UPDATE keep calling version 1's pgbus_workflow_steps_latest_on_run,
-- which copies the new row into its run when it is that run's latest: the
-- worker's hot path stays one plain function call, one index probe and,
-- only when something changed, one run row version. Its trigger now also
-- fires on a change of id.
DROP TRIGGER pgbus_workflow_steps_latest_on_run ON pgbus_workflow_steps;
CREATE TRIGGER pgbus_workflow_steps_latest_on_run
    AFTER INSERT OR UPDATE OF id, workflow_id, step_name, status, error_class, scheduled_at,
                              waiting_since, timeout_at
    ON pgbus_workflow_steps
    FOR EACH ROW EXECUTE FUNCTION pgbus_workflow_steps_latest_on_run();

-- A row that leaves its run (an UPDATE of workflow_id or id, a DELETE)
-- and was its latest makes that run read its latest step again, through
-- pgbus_workflow_steps_latest: maybe the row before it, maybe none (all
-- NULL). Any other row leaving changes nothing and writes nothing.
-- Row triggers fire after the whole statement, so the lookup sees every row
-- the statement wrote: a many-row move ends right whatever the order its
-- rows are handled in. Where a moved row lands is the job of
-- pgbus_workflow_steps_latest_on_run, which fires for the same UPDATE
-- (either order ends right).
CREATE FUNCTION pgbus_workflow_steps_latest_on_move() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE pgbus_workflows w
    SET (latest_step_id, latest_step_name, latest_step_status, latest_error_class,
         latest_scheduled_at, latest_waiting_since, latest_timeout_at) =
        (SELECT s.id, s.step_name, s.status, s.error_class,
                s.scheduled_at, s.waiting_since, s.timeout_at
         FROM pgbus_workflow_steps s
         WHERE s.workflow_id = w.workflow_id
         ORDER BY s.id DESC
         LIMIT 1)
    WHERE w.workflow_id = OLD.workflow_id AND w.latest_step_id = OLD.id;
    RETURN NULL;
END;
$$;
-- The worker never changes a step's id or run: its updates set neither
-- column, so this trigger (even its WHEN) is not looked at for them.
CREATE TRIGGER pgbus_workflow_steps_latest_on_move
    AFTER UPDATE OF id, workflow_id ON pgbus_workflow_steps
    FOR EACH ROW
    WHEN (OLD.id IS DISTINCT FROM NEW.id OR OLD.workflow_id IS DISTINCT FROM NEW.workflow_id)
    EXECUTE FUNCTION pgbus_workflow_steps_latest_on_move();

-- The same for deleted rows, once per statement over all of them: pruning
-- deletes runs, whose steps go by cascade, one statement per run; a trigger
-- per step row cost that three times what it costs without (bench/
-- latest_triggers.py), this one next to nothing (the runs are gone, the
-- join finds no row to write).
CREATE FUNCTION pgbus_workflow_steps_latest_on_delete() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE pgbus_workflows w
    SET (latest_step_id, latest_step_name, latest_step_status, latest_error_class,
         latest_scheduled_at, latest_waiting_since, latest_timeout_at) =
        (SELECT s.id, s.step_name, s.status, s.error_class,
                s.scheduled_at, s.waiting_since, s.timeout_at
         FROM pgbus_workflow_steps s
         WHERE s.workflow_id = w.workflow_id
         ORDER BY s.id DESC
         LIMIT 1)
    FROM deleted_steps d
    WHERE w.workflow_id = d.workflow_id AND w.latest_step_id = d.id;
    RETURN NULL;
END;
$$;
CREATE TRIGGER pgbus_workflow_steps_latest_on_delete
    AFTER DELETE ON pgbus_workflow_steps
    REFERENCING OLD TABLE AS deleted_steps
    FOR EACH STATEMENT EXECUTE FUNCTION pgbus_workflow_steps_latest_on_delete();

-- TRUNCATE fires no row trigger: every run is left without a step.
CREATE FUNCTION pgbus_workflow_steps_latest_on_truncate() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE pgbus_workflows
    SET latest_step_id = NULL, latest_step_name = NULL, latest_step_status = NULL,
        latest_error_class = NULL, latest_scheduled_at = NULL, latest_waiting_since = NULL,
        latest_timeout_at = NULL
    WHERE num_nonnulls(latest_step_id, latest_step_name, latest_step_status, latest_error_class,
                       latest_scheduled_at, latest_waiting_since, latest_timeout_at) > 0;
    RETURN NULL;
END;
$$;
CREATE TRIGGER pgbus_workflow_steps_latest_on_truncate
    AFTER TRUNCATE ON pgbus_workflow_steps
    FOR EACH STATEMENT EXECUTE FUNCTION pgbus_workflow_steps_latest_on_truncate();

-- A run row inserted with latest_* values of its own (copied from a backup,
-- re-inserted by hand) gets its latest step's facts instead: none, as a
-- rule, since a step cannot name a run that does not exist yet. A run
-- inserted without them (every start) is right as it is and skips the call.
CREATE FUNCTION pgbus_workflows_latest_on_insert() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    SELECT s.id, s.step_name, s.status, s.error_class, s.scheduled_at, s.waiting_since, s.timeout_at
    INTO NEW.latest_step_id, NEW.latest_step_name, NEW.latest_step_status, NEW.latest_error_class,
         NEW.latest_scheduled_at, NEW.latest_waiting_since, NEW.latest_timeout_at
    FROM pgbus_workflow_steps s
    WHERE s.workflow_id = NEW.workflow_id
    ORDER BY s.id DESC
    LIMIT 1;
    RETURN NEW;
END;
$$;
CREATE TRIGGER pgbus_workflows_latest_on_insert
    BEFORE INSERT ON pgbus_workflows
    FOR EACH ROW
    WHEN (num_nonnulls(NEW.latest_step_id, NEW.latest_step_name, NEW.latest_step_status,
                       NEW.latest_error_class, NEW.latest_scheduled_at, NEW.latest_waiting_since,
                       NEW.latest_timeout_at) > 0)
    EXECUTE FUNCTION pgbus_workflows_latest_on_insert();

-- Operations: one outside verb on every run a filter of the runs index
-- matches, done in chunks by any worker or serving process (DESIGN §9,
-- docs/operations.md). Safe to run again: every object is IF NOT EXISTS.

CREATE TABLE IF NOT EXISTS pgbus_web_operations (
    id           bigserial PRIMARY KEY,
    verb         text NOT NULL,
    -- The runs index's query (name -> value): what the operation walks.
    filters      jsonb NOT NULL DEFAULT '{}'::jsonb,
    -- The highest run id at preview: runs created later are never swept in.
    ceiling_id   bigint NOT NULL,
    -- The verb's fields (at, from_step, signal name/payload) and the
    -- thresholds the index's stuck-reason filters were read with.
    params       jsonb NOT NULL DEFAULT '{}'::jsonb,
    reason       text NOT NULL CHECK (char_length(reason) <= 1000),
    actor        text NOT NULL,
    status       text NOT NULL DEFAULT 'queued'
                 CHECK (status IN ('queued', 'running', 'done', 'cancelled', 'failed')),
    total        bigint NOT NULL DEFAULT 0,
    moved        bigint NOT NULL DEFAULT 0,
    skipped      bigint NOT NULL DEFAULT 0,
    refused      bigint NOT NULL DEFAULT 0,
    -- The last run id handled (every run up to it is done and counted).
    cursor       bigint NOT NULL DEFAULT 0,
    heartbeat_at timestamptz,
    created_at   timestamptz NOT NULL DEFAULT now(),
    started_at   timestamptz,
    finished_at  timestamptz,
    error        text
);
-- What a worker looks for on every tick: the few open operations.
CREATE INDEX IF NOT EXISTS pgbus_web_operations_open
    ON pgbus_web_operations (id) WHERE status IN ('queued', 'running');
CREATE INDEX IF NOT EXISTS pgbus_web_operations_created
    ON pgbus_web_operations (created_at DESC, id DESC);

-- The runs an operation touched (GET /workflows?operation=<id>), and the
-- check that keeps a run from being acted on twice by one operation.
CREATE INDEX IF NOT EXISTS pgbus_workflow_events_operation
    ON pgbus_workflow_events ((details ->> 'operation_id'), workflow_id)
    WHERE details ? 'operation_id';
