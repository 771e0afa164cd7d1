-- insights: the runs counted by class, status and hour of created_at
--
-- The insights page's counts by status of one class over a range used to
-- count the runs created in it (an index-only scan of
-- pgbus_workflows_class_created: 10 ms at 100,000 runs, 86 ms at 1,000,000
-- over 30 days). The run count triggers of schema/v3.sql now also keep
-- the counts per hour: each delta they append carries the hour of the
-- run's created_at, and their fold moves the deltas into the totals by
-- (class, status) and into pgbus_workflow_hour_counts by (class, status,
-- hour). A range's full hours are summed from the kept rows (24 per day
-- per status at most, whatever the number of runs); its partial first and
-- last hours are counted from the index, so the figure stays exact
-- (models/workflow_counts.class_status_counts, docs/insights.md).
--
-- No new trigger: the delta row a write appended already is the one row
-- per (class, status) it needs; only its hour column is new.

-- Held until this commits: every open write to the runs is waited for, and
-- the next ones wait at their statement, so the recount below and the
-- deltas written after it never overlap.
LOCK TABLE pgbus_workflows IN SHARE ROW EXCLUSIVE MODE;
LOCK TABLE pgbus_workflow_count_deltas IN EXCLUSIVE MODE;

CREATE TABLE IF NOT EXISTS pgbus_workflow_hour_counts (
    workflow_class text NOT NULL,
    hour           timestamptz NOT NULL,
    status         text NOT NULL,
    runs           bigint NOT NULL,
    PRIMARY KEY (workflow_class, hour, status)
);

-- A delta without an hour (written before this version, or by the
-- seeder's bulk load, which adds its hours itself) counts in the totals
-- only.
ALTER TABLE pgbus_workflow_count_deltas ADD COLUMN IF NOT EXISTS hour timestamptz;

CREATE OR REPLACE FUNCTION pgbus_workflow_counts_fold() RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF current_setting('transaction_isolation') <> 'read committed'
       OR NOT pg_try_advisory_xact_lock(8099317832010231412) THEN
        RETURN;
    END IF;
    WITH moved AS (
        DELETE FROM pgbus_workflow_count_deltas RETURNING workflow_class, status, hour, runs
    ),
    totals AS (
        INSERT INTO pgbus_workflow_counts AS c (workflow_class, status, runs)
        SELECT workflow_class, status, sum(runs) FROM moved
        GROUP BY workflow_class, status
        ORDER BY workflow_class, status
        ON CONFLICT (workflow_class, status) DO UPDATE SET runs = c.runs + EXCLUDED.runs
    )
    INSERT INTO pgbus_workflow_hour_counts AS h (workflow_class, hour, status, runs)
    SELECT workflow_class, hour, status, sum(runs) FROM moved
    WHERE hour IS NOT NULL
    GROUP BY workflow_class, hour, status
    HAVING sum(runs) <> 0
    ORDER BY workflow_class, hour, status
    ON CONFLICT (workflow_class, hour, status) DO UPDATE SET runs = h.runs + EXCLUDED.runs;
END;
$$;

CREATE OR REPLACE FUNCTION pgbus_workflows_count_on_insert() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO pgbus_workflow_count_deltas (workflow_class, status, hour, runs)
    SELECT workflow_class, status, date_trunc('hour', created_at, 'UTC'), count(*)
    FROM inserted_runs GROUP BY 1, 2, 3;
    PERFORM pgbus_workflow_counts_maybe_fold();
    RETURN NULL;
END;
$$;

CREATE OR REPLACE FUNCTION pgbus_workflows_count_on_delete() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO pgbus_workflow_count_deltas (workflow_class, status, hour, runs)
    SELECT workflow_class, status, date_trunc('hour', created_at, 'UTC'), -count(*)
    FROM deleted_runs GROUP BY 1, 2, 3;
    PERFORM pgbus_workflow_counts_maybe_fold();
    RETURN NULL;
END;
$$;

CREATE OR REPLACE FUNCTION pgbus_workflows_count_on_update() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO pgbus_workflow_count_deltas (workflow_class, status, hour, runs)
    VALUES (OLD.workflow_class, OLD.status, date_trunc('hour', OLD.created_at, 'UTC'), -1),
           (NEW.workflow_class, NEW.status, date_trunc('hour', NEW.created_at, 'UTC'), 1);
    PERFORM pgbus_workflow_counts_maybe_fold();
    RETURN NULL;
END;
$$;

CREATE OR REPLACE FUNCTION pgbus_workflows_count_on_truncate() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM pgbus_workflow_count_deltas;
    DELETE FROM pgbus_workflow_counts;
    DELETE FROM pgbus_workflow_hour_counts;
    RETURN NULL;
END;
$$;

-- A run moved to another hour (a hand-written fix of created_at) moves
-- its count too: its -1 and +1 cancel in the totals.
DROP TRIGGER IF EXISTS pgbus_workflows_count_on_update ON pgbus_workflows;
CREATE TRIGGER pgbus_workflows_count_on_update
    AFTER UPDATE ON pgbus_workflows
    FOR EACH ROW
    WHEN (OLD.status IS DISTINCT FROM NEW.status
          OR OLD.workflow_class IS DISTINCT FROM NEW.workflow_class
          OR OLD.created_at IS DISTINCT FROM NEW.created_at)
    EXECUTE FUNCTION pgbus_workflows_count_on_update();

-- The existing runs, counted once (under the locks above).
DELETE FROM pgbus_workflow_hour_counts;
INSERT INTO pgbus_workflow_hour_counts (workflow_class, hour, status, runs)
SELECT workflow_class, date_trunc('hour', created_at, 'UTC'), status, count(*)
FROM pgbus_workflows GROUP BY 1, 2, 3;
