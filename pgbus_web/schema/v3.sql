-- search
-- The index's search box (GET /workflows?q=, DESIGN §10, docs/web.md
-- "Finding a run"): each form it accepts reads its own expression index,
-- whatever the table's size (bench/search.py). IF NOT EXISTS: safe to run
-- again.
--
-- A run id by prefix or whole, in any case: lower() under the "C"
-- collation folds A-Z only, which the dashboard's code computes the same
-- way, so the prefix's range bounds (>= prefix, < its successor) are
-- exact; and a range, unlike LIKE with a bound pattern, can use the index
-- in a generic plan.
CREATE INDEX IF NOT EXISTS pgbus_workflows_search_id
    ON pgbus_workflows (lower(workflow_id COLLATE "C"));
-- An idempotency key in any case (the unique index leads with the class).
-- Not partial: ANALYZE keeps statistics of an index expression, which the
-- planner reads for a partial index only when the query repeats its
-- predicate; without them it guessed hundreds of matches and walked the
-- whole table newest first instead (bench/search.py).
CREATE INDEX IF NOT EXISTS pgbus_workflows_search_idempotency
    ON pgbus_workflows (lower(idempotency_key));
-- A subject by its id alone, or by type and id, in any case.
CREATE INDEX IF NOT EXISTS pgbus_workflows_search_subject
    ON pgbus_workflows (lower(subject_id), lower(subject_type));

-- The index's failed runs grouped by class, step and error class of their
-- latest step (models.workflows.failed_groups): read from this index alone
-- and in its order, so the grouping needs no sort, however many runs the
-- table holds. The step is the query's own expression; its columns are
-- included, as an index-only scan needs them.
CREATE INDEX IF NOT EXISTS pgbus_workflows_failed
    ON pgbus_workflows (workflow_class, (COALESCE(latest_step_name, current_step)), latest_error_class)
    INCLUDE (latest_step_name, current_step, finished_at)
    WHERE status = 'failed';
