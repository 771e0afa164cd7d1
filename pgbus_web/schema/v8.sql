-- attention
-- The needs-attention groups and the failed runs' groups, kept rather than
-- counted on every request (models/attention_counts.py,
-- models/workflow_attention.py, docs/performance.md "The first screen").
--
-- What the stuck rules decide without the clock (a paused run's reason:
-- stalled, paused_error or paused_manual) and the failed runs are counted
-- by triggers in the same transaction as each insert, delete and update
-- of a run, as the counts by class and status are (schema version 3):
-- one row per group key, the folded totals in pgbus_workflow_attention_counts,
-- the signed changes not folded yet appended to
-- pgbus_workflow_attention_deltas. A key is the array
--   [workflow_class, status, COALESCE(latest_step_name, current_step),
--    latest_error_class, latest_step_status]
-- (an array, because two arrays with NULL in the same place are equal, so
-- a NULL step or error class is a key like any other, in the primary key,
-- the fold's ON CONFLICT and the moments index below).
--
-- Each group's first and last moments and its newest run are read from
-- pgbus_workflows_attention_moments: two index probes per key, whatever
-- the number of runs in it.
--
-- What depends on the clock (overdue: a ready run's step due before now
-- minus the threshold; waiting_overdue: a waiting run's wait begun before
-- now minus the waiting threshold) is read from a partial index holding
-- the candidates only, ordered by that moment, so the read stops at the
-- cutoff: it is proportional to the runs that are stuck for that reason.
-- The indexes' predicates are those rules' conditions without the clock
-- (rules/stuck.py); a test reads each rule's plan.

CREATE TABLE IF NOT EXISTS pgbus_workflow_attention_counts (
    key  text[] PRIMARY KEY,
    runs bigint NOT NULL
);
-- Append-only between folds: no index, nothing for two writers to share.
CREATE TABLE IF NOT EXISTS pgbus_workflow_attention_deltas (
    key  text[] NOT NULL,
    runs bigint NOT NULL
);

CREATE INDEX IF NOT EXISTS pgbus_workflows_attention_moments
    ON pgbus_workflows ((ARRAY[workflow_class, status, COALESCE(latest_step_name, current_step),
                              latest_error_class, latest_step_status]),
                        (CASE WHEN status = 'failed' THEN finished_at ELSE paused_at END) NULLS FIRST,
                        id)
    WHERE status IN ('paused', 'failed');

CREATE INDEX IF NOT EXISTS pgbus_workflows_attention_overdue
    ON pgbus_workflows (latest_scheduled_at)
    INCLUDE (id, status, workflow_class, latest_step_name, current_step, latest_error_class)
    WHERE status = 'ready' AND latest_step_status = 'scheduled';

CREATE INDEX IF NOT EXISTS pgbus_workflows_attention_waiting
    ON pgbus_workflows (latest_waiting_since)
    INCLUDE (id, status, workflow_class, latest_step_name, current_step, latest_error_class)
    WHERE status = 'waiting' AND latest_step_status = 'waiting' AND latest_timeout_at IS NULL;

-- A needs-attention or failed group's runs, as its "N runs" link lists them
-- (class, step, the reason's status, error class; newest first): a walk of
-- exactly that group in id order, instead of every paused run of the class
-- read from the table to find the group's (0.1 s for a group of none at a
-- million runs; 2.6 ms with this index).
CREATE INDEX IF NOT EXISTS pgbus_workflows_group_runs
    ON pgbus_workflows (workflow_class, (COALESCE(latest_step_name, current_step)), status, latest_error_class, id)
    WHERE status IN ('paused', 'ready', 'waiting', 'failed');

-- The failed runs' groups read the kept counts and the moments index, and
-- a failed group's runs the index above: the failed runs' own index (the
-- schema version 3 grouping read) has no reader left.
DROP INDEX IF EXISTS pgbus_workflows_failed;

-- The planner's estimate of a stuck reason's runs: the facts a rule tests
-- together are far from independent (a stalled run is a paused run whose
-- latest step failed with one error class). Estimated as if independent,
-- the index's reason filter expected a few dozen stalled runs among a
-- million, read all 10,000 and sorted them instead of walking the newest
-- first (0.9 s against 6 ms; docs/performance.md).
CREATE STATISTICS IF NOT EXISTS pgbus_workflows_latest_facts (mcv, dependencies)
    ON status, latest_step_status, latest_error_class, (latest_timeout_at IS NULL)
    FROM pgbus_workflows;
-- Statistics are gathered by ANALYZE: now, for an upgraded database (a
-- sample of the table, seconds at a million runs), not at autovacuum's
-- next pass.
ANALYZE pgbus_workflows;

-- Moves every committed delta into the totals, as pgbus_workflow_counts_fold
-- does: only in READ COMMITTED and only when the fold lock is free (it never
-- waits; no two folds run at once). The key spells "pgbatten".
CREATE OR REPLACE FUNCTION pgbus_workflow_attention_fold() RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF current_setting('transaction_isolation') <> 'read committed'
       OR NOT pg_try_advisory_xact_lock(8099303339415602542) THEN
        RETURN;
    END IF;
    WITH moved AS (
        DELETE FROM pgbus_workflow_attention_deltas RETURNING key, runs
    )
    INSERT INTO pgbus_workflow_attention_counts AS c (key, runs)
    SELECT key, sum(runs) FROM moved
    GROUP BY key
    ORDER BY key
    ON CONFLICT (key) DO UPDATE SET runs = c.runs + EXCLUDED.runs;
    DELETE FROM pgbus_workflow_attention_counts WHERE runs = 0;
END;
$$;

CREATE OR REPLACE FUNCTION pgbus_workflow_attention_maybe_fold() RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF random() < 1.0 / 32 THEN
        PERFORM pgbus_workflow_attention_fold();
    END IF;
END;
$$;

CREATE OR REPLACE FUNCTION pgbus_workflows_attention_on_insert() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO pgbus_workflow_attention_deltas (key, runs)
    SELECT ARRAY[r.workflow_class, r.status, COALESCE(r.latest_step_name, r.current_step),
           r.latest_error_class, r.latest_step_status], count(*) FROM inserted_runs r
    WHERE r.status IN ('paused', 'failed')
    GROUP BY 1;
    IF FOUND THEN
        PERFORM pgbus_workflow_attention_maybe_fold();
    END IF;
    RETURN NULL;
END;
$$;

CREATE OR REPLACE FUNCTION pgbus_workflows_attention_on_delete() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO pgbus_workflow_attention_deltas (key, runs)
    SELECT ARRAY[r.workflow_class, r.status, COALESCE(r.latest_step_name, r.current_step),
           r.latest_error_class, r.latest_step_status], -count(*) FROM deleted_runs r
    WHERE r.status IN ('paused', 'failed')
    GROUP BY 1;
    IF FOUND THEN
        PERFORM pgbus_workflow_attention_maybe_fold();
    END IF;
    RETURN NULL;
END;
$$;

-- Per row, and only for a row that is or was paused or failed and whose
-- key changed (the WHEN is evaluated without calling the function): the
-- worker's updates of running and ready runs cost nothing here.
CREATE OR REPLACE FUNCTION pgbus_workflows_attention_on_update() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF OLD.status IN ('paused', 'failed') THEN
        INSERT INTO pgbus_workflow_attention_deltas (key, runs)
        VALUES (ARRAY[OLD.workflow_class, OLD.status, COALESCE(OLD.latest_step_name, OLD.current_step),
                        OLD.latest_error_class, OLD.latest_step_status], -1);
    END IF;
    IF NEW.status IN ('paused', 'failed') THEN
        INSERT INTO pgbus_workflow_attention_deltas (key, runs)
        VALUES (ARRAY[NEW.workflow_class, NEW.status, COALESCE(NEW.latest_step_name, NEW.current_step),
                        NEW.latest_error_class, NEW.latest_step_status], 1);
    END IF;
    PERFORM pgbus_workflow_attention_maybe_fold();
    RETURN NULL;
END;
$$;

CREATE OR REPLACE FUNCTION pgbus_workflows_attention_on_truncate() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM pgbus_workflow_attention_deltas;
    DELETE FROM pgbus_workflow_attention_counts;
    RETURN NULL;
END;
$$;

DROP TRIGGER IF EXISTS pgbus_workflows_attention_on_insert ON pgbus_workflows;
CREATE TRIGGER pgbus_workflows_attention_on_insert
    AFTER INSERT ON pgbus_workflows
    REFERENCING NEW TABLE AS inserted_runs
    FOR EACH STATEMENT EXECUTE FUNCTION pgbus_workflows_attention_on_insert();
DROP TRIGGER IF EXISTS pgbus_workflows_attention_on_delete ON pgbus_workflows;
CREATE TRIGGER pgbus_workflows_attention_on_delete
    AFTER DELETE ON pgbus_workflows
    REFERENCING OLD TABLE AS deleted_runs
    FOR EACH STATEMENT EXECUTE FUNCTION pgbus_workflows_attention_on_delete();
DROP TRIGGER IF EXISTS pgbus_workflows_attention_on_update ON pgbus_workflows;
CREATE TRIGGER pgbus_workflows_attention_on_update
    AFTER UPDATE ON pgbus_workflows
    FOR EACH ROW
    WHEN ((OLD.status IN ('paused', 'failed') OR NEW.status IN ('paused', 'failed'))
          AND ARRAY[OLD.workflow_class, OLD.status, COALESCE(OLD.latest_step_name, OLD.current_step),
                    OLD.latest_error_class, OLD.latest_step_status]
              IS DISTINCT FROM
              ARRAY[NEW.workflow_class, NEW.status, COALESCE(NEW.latest_step_name, NEW.current_step),
                    NEW.latest_error_class, NEW.latest_step_status])
    EXECUTE FUNCTION pgbus_workflows_attention_on_update();
DROP TRIGGER IF EXISTS pgbus_workflows_attention_on_truncate ON pgbus_workflows;
CREATE TRIGGER pgbus_workflows_attention_on_truncate
    AFTER TRUNCATE ON pgbus_workflows
    FOR EACH STATEMENT EXECUTE FUNCTION pgbus_workflows_attention_on_truncate();

-- The existing runs, counted once the triggers are in place (creating them
-- waited for every open write to the runs and holds new ones off until this
-- transaction commits, so no run is counted twice or missed).
DELETE FROM pgbus_workflow_attention_deltas;
DELETE FROM pgbus_workflow_attention_counts;
INSERT INTO pgbus_workflow_attention_counts (key, runs)
SELECT ARRAY[w.workflow_class, w.status, COALESCE(w.latest_step_name, w.current_step),
           w.latest_error_class, w.latest_step_status], count(*) FROM pgbus_workflows w
WHERE w.status IN ('paused', 'failed')
GROUP BY 1;
