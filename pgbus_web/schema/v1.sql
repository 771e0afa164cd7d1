-- pgbus-web schema, version 1: the tables pgbus 0.20 keeps for workflows,
-- batches and uniqueness locks, and the indexes the dashboard's own queries
-- need at a million runs. Applied once, inside one transaction, by
-- pgbus_web.schema.install().

CREATE TABLE pgbus_workflows (
    id                bigserial PRIMARY KEY,
    workflow_id       text NOT NULL UNIQUE,
    workflow_class    text NOT NULL,
    status            text NOT NULL
                      CHECK (status IN ('ready', 'running', 'waiting', 'paused',
                                        'completed', 'failed', 'cancelled')),
    current_step      text,
    arguments         jsonb NOT NULL DEFAULT '{}'::jsonb,
    subject_type      text,
    subject_id        text,
    idempotency_key   text,
    definition_digest text,
    paused_at         timestamptz,
    started_at        timestamptz,
    finished_at       timestamptz,
    created_at        timestamptz NOT NULL DEFAULT now(),
    updated_at        timestamptz NOT NULL DEFAULT now(),
    -- The run's latest step attempt (its highest pgbus_workflow_steps id),
    -- the facts the stuck-reason rules read: kept here by the trigger
    -- pgbus_workflow_steps_latest_on_run, NULL while the run has no step.
    latest_step_id       bigint,
    latest_step_name     text,
    latest_step_status   text,
    latest_error_class   text,
    latest_scheduled_at  timestamptz,
    latest_waiting_since timestamptz,
    latest_timeout_at    timestamptz
);

-- insert_run's ON CONFLICT target: one run per idempotency key and class.
CREATE UNIQUE INDEX pgbus_workflows_idempotency
    ON pgbus_workflows (workflow_class, idempotency_key)
    WHERE idempotency_key IS NOT NULL;

-- At most one ongoing run per subject and class.
CREATE UNIQUE INDEX pgbus_workflows_one_ongoing_per_subject
    ON pgbus_workflows (workflow_class, subject_type, subject_id)
    WHERE subject_type IS NOT NULL AND status IN ('ready', 'running', 'waiting', 'paused');

-- status_counts reads this index only (an index-only scan, no heap).
CREATE INDEX pgbus_workflows_class_status ON pgbus_workflows (workflow_class, status);

-- The stuck-run queries (stuck_reason_counts, attention_groups,
-- attention_ids) read the runs that can be stuck, with their latest step's
-- facts, from this index alone: an index-only scan, no heap, no lookup in
-- the steps table per run (docs/performance.md).
CREATE INDEX pgbus_workflows_stuck
    ON pgbus_workflows (workflow_class, status)
    INCLUDE (id, workflow_id, current_step, paused_at, latest_step_name, latest_step_status,
             latest_error_class, latest_scheduled_at, latest_waiting_since, latest_timeout_at)
    WHERE status IN ('paused', 'ready', 'waiting');

-- The runs index: newest first (by id), filtered by status or subject.
CREATE INDEX pgbus_workflows_status_id ON pgbus_workflows (status, id);
CREATE INDEX pgbus_workflows_class_id ON pgbus_workflows (workflow_class, id);
CREATE INDEX pgbus_workflows_subject ON pgbus_workflows (subject_type, subject_id);
CREATE INDEX pgbus_workflows_created_at ON pgbus_workflows (created_at);
-- Pruning old terminal runs (the stale scope).
CREATE INDEX pgbus_workflows_terminal_updated
    ON pgbus_workflows (updated_at)
    WHERE status IN ('completed', 'failed', 'cancelled');

CREATE TABLE pgbus_workflow_steps (
    id              bigserial PRIMARY KEY,
    workflow_id     text NOT NULL REFERENCES pgbus_workflows (workflow_id) ON DELETE CASCADE,
    step_name       text NOT NULL,
    status          text NOT NULL
                    CHECK (status IN ('scheduled', 'waiting', 'in_progress', 'completed',
                                      'failed', 'cancelled', 'skipped')),
    attempt         integer NOT NULL DEFAULT 1,
    scheduled_at    timestamptz,
    started_at      timestamptz,
    finished_at     timestamptz,
    wait_for        text,
    waiting_since   timestamptz,
    timeout_at      timestamptz,
    batch_id        text,
    error_class     text,
    error_message   text,
    error_backtrace text,
    result          jsonb,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now()
);

-- A run's latest step row is its highest id: the runs index, a run's page
-- and the runtime look it up by this index.
CREATE INDEX pgbus_workflow_steps_latest ON pgbus_workflow_steps (workflow_id, id DESC);

-- Copies a step attempt's stuck-relevant facts into its run when it is the
-- run's latest attempt, so the dashboard's stuck queries read them from
-- pgbus_workflows_stuck alone. A trigger rather than the runtime's code:
-- a writer that is not this runtime (pgbus itself, a hand-written fix)
-- keeps them right too. Writes that change nothing are skipped.
CREATE FUNCTION pgbus_workflow_steps_latest_on_run() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
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
CREATE TRIGGER pgbus_workflow_steps_latest_on_run
    AFTER INSERT OR UPDATE OF workflow_id, step_name, status, error_class, scheduled_at,
                              waiting_since, timeout_at
    ON pgbus_workflow_steps
    FOR EACH ROW EXECUTE FUNCTION pgbus_workflow_steps_latest_on_run();

-- The worker's queue: due steps, oldest first.
CREATE INDEX pgbus_workflow_steps_due
    ON pgbus_workflow_steps (scheduled_at, id) WHERE status = 'scheduled';
-- The sweep: waits with a deadline, and steps in progress (stall detection).
CREATE INDEX pgbus_workflow_steps_wait_deadline
    ON pgbus_workflow_steps (timeout_at) WHERE status = 'waiting' AND timeout_at IS NOT NULL;
CREATE INDEX pgbus_workflow_steps_in_progress
    ON pgbus_workflow_steps (started_at) WHERE status = 'in_progress';
-- A finished batch wakes the steps waiting on it.
CREATE INDEX pgbus_workflow_steps_batch
    ON pgbus_workflow_steps (batch_id) WHERE batch_id IS NOT NULL;

CREATE TABLE pgbus_workflow_events (
    id          bigserial PRIMARY KEY,
    workflow_id text NOT NULL REFERENCES pgbus_workflows (workflow_id) ON DELETE CASCADE,
    event       text NOT NULL,
    actor       text NOT NULL,
    reason      text CHECK (char_length(reason) <= 1000),
    step_id     bigint,
    step_name   text,
    attempt     integer,
    details     jsonb NOT NULL DEFAULT '{}'::jsonb,
    created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX pgbus_workflow_events_run ON pgbus_workflow_events (workflow_id, id);

-- The audit trail is append-only: an UPDATE is refused by the database
-- itself, whoever sends it. Rows go only with their run (cascade).
CREATE FUNCTION pgbus_workflow_events_append_only() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'pgbus_workflow_events is append-only (event %)', OLD.id
        USING ERRCODE = 'restrict_violation';
END;
$$;
CREATE TRIGGER pgbus_workflow_events_no_update
    BEFORE UPDATE ON pgbus_workflow_events
    FOR EACH ROW EXECUTE FUNCTION pgbus_workflow_events_append_only();

CREATE TABLE pgbus_workflow_signals (
    id                 bigserial PRIMARY KEY,
    workflow_id        text NOT NULL REFERENCES pgbus_workflows (workflow_id) ON DELETE CASCADE,
    name               text NOT NULL,
    payload            jsonb NOT NULL DEFAULT '{}'::jsonb,
    idempotency_key    text,
    status             text NOT NULL DEFAULT 'pending'
                       CHECK (status IN ('pending', 'claimed', 'consumed')),
    claimed_by_step_id bigint,
    claimed_at         timestamptz,
    consumed_at        timestamptz,
    created_at         timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX pgbus_workflow_signals_idempotency
    ON pgbus_workflow_signals (workflow_id, idempotency_key)
    WHERE idempotency_key IS NOT NULL;
CREATE INDEX pgbus_workflow_signals_run ON pgbus_workflow_signals (workflow_id, name, id);

CREATE TABLE pgbus_batches (
    id             bigserial PRIMARY KEY,
    batch_id       text NOT NULL UNIQUE,
    description    text,
    total_jobs     integer NOT NULL DEFAULT 0,
    completed_jobs integer NOT NULL DEFAULT 0,
    failed_jobs    integer NOT NULL DEFAULT 0,
    discarded_jobs integer NOT NULL DEFAULT 0,
    status         text NOT NULL DEFAULT 'processing',
    created_at     timestamptz NOT NULL DEFAULT now(),
    finished_at    timestamptz
);

-- created_at is a timestamp WITHOUT time zone, as pgbus has it: written in
-- the session's zone (UTC here) and compared through a cast in that zone.
CREATE TABLE pgbus_uniqueness_keys (
    lock_key   text PRIMARY KEY,
    queue_name text NOT NULL,
    msg_id     bigint NOT NULL DEFAULT 0,
    created_at timestamp NOT NULL DEFAULT CURRENT_TIMESTAMP
);
CREATE INDEX pgbus_uniqueness_keys_message ON pgbus_uniqueness_keys (queue_name, msg_id);
CREATE INDEX pgbus_uniqueness_keys_created_at ON pgbus_uniqueness_keys (created_at);

CREATE TABLE pgbus_blocked_executions (
    id              bigserial PRIMARY KEY,
    concurrency_key text NOT NULL,
    queue_name      text NOT NULL,
    payload         jsonb NOT NULL,
    priority        integer NOT NULL DEFAULT 0,
    expires_at      timestamptz,
    created_at      timestamptz NOT NULL DEFAULT now()
);
-- A parked job's uniqueness key, whether its payload is a JSON object or
-- (written before pgbus fixed a double encoding) a JSON string holding one.
-- A string that is not JSON has no key: NULL, rather than failing every
-- query that reads the parked jobs (the Locks page, the reaper). Only that
-- branch pays for the exception block.
CREATE FUNCTION pgbus_parked_uniqueness_key(payload jsonb, key text) RETURNS text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
BEGIN
    IF jsonb_typeof(payload) IS DISTINCT FROM 'string' THEN
        RETURN payload ->> key;
    END IF;
    BEGIN
        RETURN (payload #>> '{}')::jsonb ->> key;
    EXCEPTION WHEN invalid_text_representation THEN
        RETURN NULL;
    END;
END;
$$;

CREATE INDEX pgbus_blocked_executions_key
    ON pgbus_blocked_executions (concurrency_key, priority, created_at);
