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

-- scale: exact run counts per (class, status), and the pages' change marker
--
-- Counts. The runs index's status counts used to count every run (a pass
-- over pgbus_workflows_class_status, growing with the history). Triggers
-- now keep them in the same transaction as every insert, status change
-- and delete of a run (prune included) and every TRUNCATE, as
-- pgbus_workflow_counts (folded totals) plus pgbus_workflow_count_deltas
-- (signed changes not yet folded): a class's count is the sum of both.
-- A writer only ever appends delta rows, so concurrent workers never wait
-- on a shared counter row; whoever gets the fold lock without waiting (at
-- random, one trigger call in FOLD_ODDS) moves the committed deltas into the
-- totals, so the delta table stays a few dozen rows (docs/performance.md).
-- `pgbus-web db check` compares the sums with count(*), `db repair` refills
-- them (models/workflows.py).

CREATE TABLE IF NOT EXISTS pgbus_workflow_counts (
    workflow_class text NOT NULL,
    status         text NOT NULL,
    runs           bigint NOT NULL,
    PRIMARY KEY (workflow_class, status)
);
-- Append-only between folds: no index, nothing for two writers to share.
CREATE TABLE IF NOT EXISTS pgbus_workflow_count_deltas (
    workflow_class text NOT NULL,
    status         text NOT NULL,
    runs           bigint NOT NULL
);

-- Moves every committed delta into the totals. Only in READ COMMITTED (a
-- repeatable-read writer could find a delta deleted after its snapshot),
-- and only when the fold lock is free: it never waits, and no two folds run
-- at once, so the totals' rows are written by one transaction at a time.
-- The key spells "pgbcount".
CREATE OR REPLACE FUNCTION pgbus_workflow_counts_fold() RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF current_setting('transaction_isolation') <> 'read committed'
       OR NOT pg_try_advisory_xact_lock(8099317832010231412) THEN
        RETURN;
    END IF;
    WITH moved AS (
        DELETE FROM pgbus_workflow_count_deltas RETURNING workflow_class, status, runs
    )
    INSERT INTO pgbus_workflow_counts AS c (workflow_class, status, runs)
    SELECT workflow_class, status, sum(runs) FROM moved
    GROUP BY workflow_class, status
    ORDER BY workflow_class, status
    ON CONFLICT (workflow_class, status) DO UPDATE SET runs = c.runs + EXCLUDED.runs;
END;
$$;

-- One run in FOLD_ODDS (1/32) of the writes folds: the deltas stay at a
-- few dozen rows on a busy system, and a fold costs about as much as a write.
CREATE OR REPLACE FUNCTION pgbus_workflow_counts_maybe_fold() RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF random() < 1.0 / 32 THEN
        PERFORM pgbus_workflow_counts_fold();
    END IF;
END;
$$;

CREATE OR REPLACE FUNCTION pgbus_workflows_count_on_insert() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO pgbus_workflow_count_deltas (workflow_class, status, runs)
    SELECT workflow_class, status, count(*) FROM inserted_runs GROUP BY workflow_class, status;
    PERFORM pgbus_workflow_counts_maybe_fold();
    RETURN NULL;
END;
$$;

CREATE OR REPLACE FUNCTION pgbus_workflows_count_on_delete() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO pgbus_workflow_count_deltas (workflow_class, status, runs)
    SELECT workflow_class, status, -count(*) FROM deleted_runs GROUP BY workflow_class, status;
    PERFORM pgbus_workflow_counts_maybe_fold();
    RETURN NULL;
END;
$$;

-- Per row, and only for a row whose class or status changed (the WHEN is
-- evaluated without calling the function): the latest_* columns' updates,
-- several per step, cost nothing here.
CREATE OR REPLACE FUNCTION pgbus_workflows_count_on_update() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO pgbus_workflow_count_deltas (workflow_class, status, runs)
    VALUES (OLD.workflow_class, OLD.status, -1), (NEW.workflow_class, NEW.status, 1);
    PERFORM pgbus_workflow_counts_maybe_fold();
    RETURN NULL;
END;
$$;

CREATE OR REPLACE FUNCTION pgbus_workflows_count_on_truncate() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM pgbus_workflow_count_deltas;
    DELETE FROM pgbus_workflow_counts;
    RETURN NULL;
END;
$$;

DROP TRIGGER IF EXISTS pgbus_workflows_count_on_insert ON pgbus_workflows;
CREATE TRIGGER pgbus_workflows_count_on_insert
    AFTER INSERT ON pgbus_workflows
    REFERENCING NEW TABLE AS inserted_runs
    FOR EACH STATEMENT EXECUTE FUNCTION pgbus_workflows_count_on_insert();
DROP TRIGGER IF EXISTS pgbus_workflows_count_on_delete ON pgbus_workflows;
CREATE TRIGGER pgbus_workflows_count_on_delete
    AFTER DELETE ON pgbus_workflows
    REFERENCING OLD TABLE AS deleted_runs
    FOR EACH STATEMENT EXECUTE FUNCTION pgbus_workflows_count_on_delete();
DROP TRIGGER IF EXISTS pgbus_workflows_count_on_update ON pgbus_workflows;
CREATE TRIGGER pgbus_workflows_count_on_update
    AFTER UPDATE ON pgbus_workflows
    FOR EACH ROW
    WHEN (OLD.status IS DISTINCT FROM NEW.status
          OR OLD.workflow_class IS DISTINCT FROM NEW.workflow_class)
    EXECUTE FUNCTION pgbus_workflows_count_on_update();
DROP TRIGGER IF EXISTS pgbus_workflows_count_on_truncate ON pgbus_workflows;
CREATE TRIGGER pgbus_workflows_count_on_truncate
    AFTER TRUNCATE ON pgbus_workflows
    FOR EACH STATEMENT EXECUTE FUNCTION pgbus_workflows_count_on_truncate();

-- The existing runs, counted once the triggers are in place: creating them
-- took a lock that waits for every open write to the runs and holds off new
-- ones until this transaction commits, so no run is counted twice or missed.
DELETE FROM pgbus_workflow_count_deltas;
DELETE FROM pgbus_workflow_counts;
INSERT INTO pgbus_workflow_counts (workflow_class, status, runs)
SELECT workflow_class, status, count(*) FROM pgbus_workflows GROUP BY workflow_class, status;

-- The change marker (web/fresh.py): a number that grows with every
-- committed transaction that wrote a run, step, event, signal or batch,
-- read in one small read. A live-refresh poll whose marker (with a coarse
-- time bucket) is the one its page was drawn with is answered 304.
-- A writing transaction appends one row to pgbus_web_change_log (the first
-- row it writes sets a transaction-local flag, so later rows cost one test
-- in the trigger's WHEN); the marker is the folded total plus the rows not
-- folded yet, so appending never waits on a shared row, and a fold (as for
-- the counts: whoever gets its lock without waiting, one write in 32)
-- leaves the marker unchanged.
CREATE TABLE IF NOT EXISTS pgbus_web_change_log (
    changes bigint NOT NULL DEFAULT 1
);
CREATE TABLE IF NOT EXISTS pgbus_web_change_total (
    id      integer PRIMARY KEY CHECK (id = 1),
    changes bigint NOT NULL
);
INSERT INTO pgbus_web_change_total (id, changes) VALUES (1, 0) ON CONFLICT (id) DO NOTHING;

-- The key spells "pgbchang".
CREATE OR REPLACE FUNCTION pgbus_web_change_fold() RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF current_setting('transaction_isolation') <> 'read committed'
       OR NOT pg_try_advisory_xact_lock(8099317832010925671) THEN
        RETURN;
    END IF;
    WITH moved AS (DELETE FROM pgbus_web_change_log RETURNING changes)
    UPDATE pgbus_web_change_total
    SET changes = changes + (SELECT COALESCE(sum(changes), 0) FROM moved)
    WHERE id = 1;
END;
$$;

-- BEFORE ROW, so the flag is set by the first row and the WHEN of the
-- statement's next rows is false: one call per transaction. A rolled-back
-- savepoint takes its log row and its flag with it.
CREATE OR REPLACE FUNCTION pgbus_web_mark_change() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF current_setting('pgbus_web.changed', true) IS DISTINCT FROM 'on' THEN
        PERFORM set_config('pgbus_web.changed', 'on', true);
        INSERT INTO pgbus_web_change_log DEFAULT VALUES;
        IF random() < 1.0 / 32 THEN
            PERFORM pgbus_web_change_fold();
        END IF;
    END IF;
    IF TG_OP = 'DELETE' THEN
        RETURN OLD;
    END IF;
    RETURN NEW;
END;
$$;

CREATE OR REPLACE FUNCTION pgbus_web_mark_truncate() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO pgbus_web_change_log DEFAULT VALUES;
    RETURN NULL;
END;
$$;

DO $$
DECLARE
    watched text;
BEGIN
    FOREACH watched IN ARRAY ARRAY['pgbus_workflows', 'pgbus_workflow_steps', 'pgbus_workflow_events',
                                   'pgbus_workflow_signals', 'pgbus_batches'] LOOP
        EXECUTE format('DROP TRIGGER IF EXISTS %I ON %I', watched || '_mark_change', watched);
        EXECUTE format(
            'CREATE TRIGGER %I BEFORE INSERT OR UPDATE OR DELETE ON %I FOR EACH ROW '
            'WHEN (current_setting(''pgbus_web.changed'', true) IS DISTINCT FROM ''on'') '
            'EXECUTE FUNCTION pgbus_web_mark_change()',
            watched || '_mark_change', watched);
        EXECUTE format('DROP TRIGGER IF EXISTS %I ON %I', watched || '_mark_truncate', watched);
        EXECUTE format(
            'CREATE TRIGGER %I AFTER TRUNCATE ON %I FOR EACH STATEMENT '
            'EXECUTE FUNCTION pgbus_web_mark_truncate()',
            watched || '_mark_truncate', watched);
    END LOOP;
END;
$$;

-- Insights' counts by status of one class over a range of created_at
-- (workflows.class_status_counts): read from this index alone (an
-- index-only scan of the range), not from the runs' heap pages.
CREATE INDEX IF NOT EXISTS pgbus_workflows_class_created
    ON pgbus_workflows (workflow_class, created_at) INCLUDE (status);
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
-- api tokens
-- The JSON API's bearer tokens (docs/api.md): a name, a role, and the
-- SHA-256 of the token (the token itself is shown once, when added, and
-- never stored). A revoked token keeps its row, so `tokens list` says
-- when; last_used_at is written at most once a minute per token.
CREATE TABLE IF NOT EXISTS pgbus_web_api_tokens (
    id           bigserial PRIMARY KEY,
    name         text NOT NULL CHECK (name ~ '^[A-Za-z0-9._@-]{1,64}$'),
    role         text NOT NULL CHECK (role IN ('viewer', 'operator')),
    token_sha256 text NOT NULL UNIQUE,
    created_at   timestamptz NOT NULL DEFAULT now(),
    last_used_at timestamptz,
    revoked_at   timestamptz
);
-- One live token per name: the actor api:<name> names one token.
CREATE UNIQUE INDEX IF NOT EXISTS pgbus_web_api_tokens_live_name
    ON pgbus_web_api_tokens (name) WHERE revoked_at IS NULL;
