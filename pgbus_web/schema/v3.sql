-- worker
-- The worker keeps its runs' latest_* columns itself: it declares so for
-- its transaction (set_config('pgbus_web.latest_by_writer', 'on', true))
-- and writes them in the one run UPDATE that ends the transaction
-- (models/workflows.py, runtime/flow.py deferred()). Its step writes then
-- skip this trigger's per-row UPDATE of the run, which cost a run row
-- version per step row written (2.8 per step). Every other writer (pgbus
-- itself, a hand-written fix, the verbs) leaves the setting unset and has
-- the trigger as version 1 and 2 defined it. The setting is local to the
-- transaction: it ends with it, on commit as on rollback.
CREATE OR REPLACE FUNCTION pgbus_workflow_steps_latest_on_run() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF current_setting('pgbus_web.latest_by_writer', true) = 'on' THEN
        RETURN NULL;
    END IF;
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
