-- step durations per day
-- How long each step of each class took, per UTC day, kept as a histogram
-- with fixed log-spaced buckets (docs/insights.md): one row per class,
-- step, day and bucket with the number of attempts whose run time
-- (finished_at - started_at) fell in it. Bucket 0 holds run times under
-- 1 ms (a negative one, a clock's step back, counts as 0); bucket b >= 1
-- holds [2^((b-1)/8), 2^(b/8)) milliseconds, eight buckets per doubling,
-- without a ceiling. An attempt counts once, at the day of its
-- finished_at, when it first has both stamps (finite ones). The insights
-- page reads the median and 95th percentile of the last 30 days from
-- these rows (models/step_durations.py): within 4.43% plus 1 ms of the
-- exact figures, at any number of steps. History, like the runs'
-- activity: pruning runs and their steps takes nothing away.
CREATE OR REPLACE FUNCTION pgbus_step_duration_bucket(seconds double precision) RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN seconds IS NULL OR seconds * 1000 < 1 THEN 0
                ELSE floor(8 * ln(seconds * 1000) / ln(2))::integer + 1 END
$$;

CREATE TABLE IF NOT EXISTS pgbus_workflow_step_durations (
    workflow_class text NOT NULL,
    step_name      text NOT NULL,
    day            date NOT NULL,
    bucket         integer NOT NULL,
    attempts       bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (workflow_class, day, step_name, bucket)
);
-- As with the activity rollup, a writer only appends here; one write in 32
-- that gets the fold lock without waiting moves them into the rows above.
CREATE TABLE IF NOT EXISTS pgbus_workflow_step_duration_deltas (
    workflow_class text NOT NULL,
    step_name      text NOT NULL,
    day            date NOT NULL,
    bucket         integer NOT NULL,
    attempts       bigint NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS pgbus_workflow_step_duration_deltas_class
    ON pgbus_workflow_step_duration_deltas (workflow_class, day);

-- The key spells "pgbstepd".
CREATE OR REPLACE FUNCTION pgbus_workflow_step_durations_fold() RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF current_setting('transaction_isolation') <> 'read committed'
       OR NOT pg_try_advisory_xact_lock(8099550702862692452) THEN
        RETURN;
    END IF;
    WITH moved AS (
        DELETE FROM pgbus_workflow_step_duration_deltas
        RETURNING workflow_class, step_name, day, bucket, attempts
    )
    INSERT INTO pgbus_workflow_step_durations AS d (workflow_class, step_name, day, bucket, attempts)
    SELECT workflow_class, step_name, day, bucket, sum(attempts) FROM moved
    GROUP BY workflow_class, day, step_name, bucket
    ORDER BY workflow_class, day, step_name, bucket
    ON CONFLICT (workflow_class, day, step_name, bucket) DO UPDATE
        SET attempts = d.attempts + EXCLUDED.attempts;
END;
$$;

-- An attempt counts when it first has both stamps: in the row written
-- with both (an INSERT) or in the UPDATE that sets the second. Both are row
-- triggers whose WHEN is checked by the trigger machinery without calling
-- the function, so the worker's writes that do not finish an attempt (the
-- INSERT of a scheduled step, the UPDATE that starts it) cost nothing; a
-- statement trigger over the INSERT's new rows would be called, and would
-- gather its transition table, for every step the worker schedules.
CREATE OR REPLACE FUNCTION pgbus_workflow_steps_durations_on_finish() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO pgbus_workflow_step_duration_deltas (workflow_class, step_name, day, bucket, attempts)
    SELECT w.workflow_class, NEW.step_name, (NEW.finished_at AT TIME ZONE 'UTC')::date,
           pgbus_step_duration_bucket(EXTRACT(EPOCH FROM NEW.finished_at - NEW.started_at)::float8), 1
    FROM pgbus_workflows w WHERE w.workflow_id = NEW.workflow_id;
    -- Within a transaction the fold moves its own deltas too, so a
    -- statement writing thousands of finished attempts leaves a few dozen.
    IF random() < 1.0 / 32 THEN
        PERFORM pgbus_workflow_step_durations_fold();
    END IF;
    RETURN NULL;
END;
$$;

DROP TRIGGER IF EXISTS pgbus_workflow_steps_durations_on_insert ON pgbus_workflow_steps;
CREATE TRIGGER pgbus_workflow_steps_durations_on_insert
    AFTER INSERT ON pgbus_workflow_steps
    FOR EACH ROW
    WHEN (NEW.started_at IS NOT NULL AND NEW.finished_at IS NOT NULL
          AND isfinite(NEW.started_at) AND isfinite(NEW.finished_at))
    EXECUTE FUNCTION pgbus_workflow_steps_durations_on_finish();
DROP TRIGGER IF EXISTS pgbus_workflow_steps_durations_on_update ON pgbus_workflow_steps;
CREATE TRIGGER pgbus_workflow_steps_durations_on_update
    AFTER UPDATE ON pgbus_workflow_steps
    FOR EACH ROW
    WHEN (NEW.started_at IS NOT NULL AND NEW.finished_at IS NOT NULL
          AND isfinite(NEW.started_at) AND isfinite(NEW.finished_at)
          AND NOT (OLD.started_at IS NOT NULL AND OLD.finished_at IS NOT NULL
                   AND isfinite(OLD.started_at) AND isfinite(OLD.finished_at)))
    EXECUTE FUNCTION pgbus_workflow_steps_durations_on_finish();

-- The attempts there are, counted once the triggers are in place.
INSERT INTO pgbus_workflow_step_durations (workflow_class, step_name, day, bucket, attempts)
SELECT w.workflow_class, s.step_name, (s.finished_at AT TIME ZONE 'UTC')::date,
       pgbus_step_duration_bucket(EXTRACT(EPOCH FROM s.finished_at - s.started_at)::float8), count(*)
FROM pgbus_workflow_steps s
JOIN pgbus_workflows w ON w.workflow_id = s.workflow_id
WHERE s.started_at IS NOT NULL AND s.finished_at IS NOT NULL
  AND isfinite(s.started_at) AND isfinite(s.finished_at)
GROUP BY 1, 2, 3, 4
ON CONFLICT (workflow_class, day, step_name, bucket) DO UPDATE SET attempts = EXCLUDED.attempts;
