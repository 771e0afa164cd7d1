-- operations: pace, pause and go on, approval (docs/operations.md).
--
-- rate: runs per second at most (NULL: as fast as it goes).
-- max_in_flight: runs the operation started that have not settled, at most
--   (NULL: no ceiling).
-- pace_log: the pace's bookkeeping, written by the holder under its fence
--   with each chunk: [[epoch seconds a chunk ended, runs it acted on], ...]
--   for the chunks that ended within the last second.
-- paused_at/paused_by, resumed_at/resumed_by: the last pause and go-on.
-- requested approval: approved_by/approved_at once a different operator
--   approved it (status awaiting_approval until then).
ALTER TABLE pgbus_web_operations
    ADD COLUMN IF NOT EXISTS rate          double precision CHECK (rate > 0 AND rate <= 100000),
    ADD COLUMN IF NOT EXISTS max_in_flight integer CHECK (max_in_flight > 0),
    ADD COLUMN IF NOT EXISTS pace_log      jsonb NOT NULL DEFAULT '[]'::jsonb,
    ADD COLUMN IF NOT EXISTS paused_at     timestamptz,
    ADD COLUMN IF NOT EXISTS paused_by     text,
    ADD COLUMN IF NOT EXISTS resumed_at    timestamptz,
    ADD COLUMN IF NOT EXISTS resumed_by    text,
    ADD COLUMN IF NOT EXISTS approved_at   timestamptz,
    ADD COLUMN IF NOT EXISTS approved_by   text;

ALTER TABLE pgbus_web_operations DROP CONSTRAINT IF EXISTS pgbus_web_operations_status_check;
ALTER TABLE pgbus_web_operations ADD CONSTRAINT pgbus_web_operations_status_check
    CHECK (status IN ('awaiting_approval', 'queued', 'running', 'paused', 'done', 'cancelled', 'failed'));

-- The claim and the serving process's look read queued and running only:
-- a paused operation and one awaiting approval are never claimed. The
-- index keeps them too, so the pages' "open" list stays one index read.
DROP INDEX IF EXISTS pgbus_web_operations_open;
CREATE INDEX IF NOT EXISTS pgbus_web_operations_open
    ON pgbus_web_operations (id) WHERE status IN ('queued', 'running');
CREATE INDEX IF NOT EXISTS pgbus_web_operations_held
    ON pgbus_web_operations (id) WHERE status IN ('paused', 'awaiting_approval');
