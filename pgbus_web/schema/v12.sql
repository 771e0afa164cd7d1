-- The runs' (status, id) index carries the class and the creation moment,
-- so a window's count of a status with a time range (an operation's
-- preview, the index's "act on all matching runs") is read from the index
-- alone: on a cold million-run table the heap visits of the failed runs of
-- one window of ids took most of a second each, and the preview of
-- status=failed with a "from" moment passed the statement timeout. Same
-- key, same name: only the covered columns are new.
CREATE INDEX IF NOT EXISTS pgbus_workflows_status_id_covering
    ON pgbus_workflows (status, id) INCLUDE (workflow_class, created_at);
DROP INDEX IF EXISTS pgbus_workflows_status_id;
ALTER INDEX pgbus_workflows_status_id_covering RENAME TO pgbus_workflows_status_id;
