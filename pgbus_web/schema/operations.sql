-- Operations: one outside verb on every run a filter of the runs index
-- matches, done in chunks by any worker or serving process (DESIGN §9,
-- docs/operations.md). Safe to run again: every object is IF NOT EXISTS.

CREATE TABLE IF NOT EXISTS pgbus_web_operations (
    id           bigserial PRIMARY KEY,
    verb         text NOT NULL,
    -- The runs index's query (name -> value): what the operation walks.
    filters      jsonb NOT NULL DEFAULT '{}'::jsonb,
    -- The highest run id at preview: runs created later are never swept in.
    ceiling_id   bigint NOT NULL,
    -- The verb's fields (at, from_step, signal name/payload) and the
    -- thresholds the index's stuck-reason filters were read with.
    params       jsonb NOT NULL DEFAULT '{}'::jsonb,
    reason       text NOT NULL CHECK (char_length(reason) <= 1000),
    actor        text NOT NULL,
    status       text NOT NULL DEFAULT 'queued'
                 CHECK (status IN ('queued', 'running', 'done', 'cancelled', 'failed')),
    total        bigint NOT NULL DEFAULT 0,
    moved        bigint NOT NULL DEFAULT 0,
    skipped      bigint NOT NULL DEFAULT 0,
    refused      bigint NOT NULL DEFAULT 0,
    -- The last run id handled (every run up to it is done and counted).
    cursor       bigint NOT NULL DEFAULT 0,
    heartbeat_at timestamptz,
    created_at   timestamptz NOT NULL DEFAULT now(),
    started_at   timestamptz,
    finished_at  timestamptz,
    error        text
);
-- What a worker looks for on every tick: the few open operations.
CREATE INDEX IF NOT EXISTS pgbus_web_operations_open
    ON pgbus_web_operations (id) WHERE status IN ('queued', 'running');
CREATE INDEX IF NOT EXISTS pgbus_web_operations_created
    ON pgbus_web_operations (created_at DESC, id DESC);

-- The runs an operation touched (GET /workflows?operation=<id>), and the
-- check that keeps a run from being acted on twice by one operation.
CREATE INDEX IF NOT EXISTS pgbus_workflow_events_operation
    ON pgbus_workflow_events ((details ->> 'operation_id'), workflow_id)
    WHERE details ? 'operation_id';
