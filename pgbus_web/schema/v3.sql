-- worker
-- The worker keeps its runs' latest_* columns itself: it declares so for
-- its transaction (set_config('pgbus_web.latest_by_writer', 'on', true))
-- and writes them in the one run UPDATE that ends the transaction
-- (models/workflows.py, runtime/flow.py deferred()). Its step writes then
-- skip this trigger's per-row UPDATE of the run, which cost a run row
-- version per step row written (2.8 per step). Every other writer (pgbus
-- itself, a hand-written fix, the verbs) leaves the setting unset and has
-- the trigger as version 2 defined it (its function is unchanged). The
-- setting is local to the transaction: it ends with it, on commit as on
-- rollback.
DROP TRIGGER IF EXISTS pgbus_workflow_steps_latest_on_run ON pgbus_workflow_steps;
CREATE TRIGGER pgbus_workflow_steps_latest_on_run
    AFTER INSERT OR UPDATE OF id, workflow_id, step_name, status, error_class, scheduled_at,
                              waiting_since, timeout_at
    ON pgbus_workflow_steps
    FOR EACH ROW
    -- Checked by the trigger machinery itself: a skipped row costs no
    -- function call. current_setting(..., true) is NULL where never set.
    WHEN (current_setting('pgbus_web.latest_by_writer', true) IS DISTINCT FROM 'on')
    EXECUTE FUNCTION pgbus_workflow_steps_latest_on_run();
