-- searches inside JSON
-- The filters arg.<path>=<value> and signal.<path>=<value> (docs/search.md)
-- are containments (@>) of the run's arguments and of a signal's payload:
-- a GIN index of the jsonb_path_ops class answers them with one lookup per
-- path and value, at any table size. Built in the install's transaction:
-- on a big existing table the upgrade holds the table's write lock while
-- it builds (about a second per hundred thousand runs; docs/search.md).
CREATE INDEX IF NOT EXISTS pgbus_workflows_arguments
    ON pgbus_workflows USING gin (arguments jsonb_path_ops);
CREATE INDEX IF NOT EXISTS pgbus_workflow_signals_payload
    ON pgbus_workflow_signals USING gin (payload jsonb_path_ops);
