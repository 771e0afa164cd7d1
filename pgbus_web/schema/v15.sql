-- An operation's walk, bounded by its window of ids in the index itself
--
-- An operation walks the runs its filter matches one window of ids at a
-- time (models/workflow_index.walk). With a class and a status, the
-- planner read the window from pgbus_workflows_stuck or
-- pgbus_workflows_class_status, whose keys end at the status: the id
-- range was a filter, so every chunk read every run of that class in that
-- status and sorted them for the first thousand (100,000 index entries,
-- 20 to 50 ms a chunk for 100,000 matching runs, growing with the
-- matching runs, not the chunk). With the id as the last key column the
-- window is a range of the index, read in id order up to the chunk's
-- limit (0.4 ms). Both indexes keep their names and serve every read they
-- served (their leading columns are the same).

DROP INDEX IF EXISTS pgbus_workflows_stuck;
CREATE INDEX pgbus_workflows_stuck
    ON pgbus_workflows (workflow_class, status, id)
    INCLUDE (workflow_id, current_step, paused_at, latest_step_name, latest_step_status,
             latest_error_class, latest_scheduled_at, latest_waiting_since, latest_timeout_at)
    WHERE status IN ('paused', 'ready', 'waiting');

DROP INDEX IF EXISTS pgbus_workflows_class_status;
CREATE INDEX pgbus_workflows_class_status ON pgbus_workflows (workflow_class, status, id);
