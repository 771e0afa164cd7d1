-- Finding a run by a fragment from anywhere in its id (docs/web.md,
-- "Finding a run"): a trigram index over the same expression the id
-- prefix search reads, lower(workflow_id COLLATE "C"), so that
-- LIKE '%fragment%' is a bitmap scan of it instead of a read of every run.
--
-- pg_trgm ships with PostgreSQL's contrib and is a trusted extension (any
-- role that may create objects in the database may create it), but a
-- database can lack it or refuse it to this role. The extension and the
-- index are then left out and the script still installs: the search sees
-- that the index is missing and keeps to the id's prefix
-- (workflow_index.fragment_index_present). Created later by hand (the two
-- statements below, as a role allowed to), the index is used from the next
-- search on.
--
-- The index is built inside the install's transaction, so writes to
-- pgbus_workflows wait for it: 25 s at 300,000 runs on a busy two-CPU
-- machine (docs/performance.md, "Search").
DO $$
DECLARE
    trgm_schema name;
BEGIN
    SELECT n.nspname INTO trgm_schema
        FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace
        WHERE e.extname = 'pg_trgm';
    IF trgm_schema IS NULL THEN
        IF NOT EXISTS (SELECT FROM pg_available_extensions WHERE name = 'pg_trgm') THEN
            RAISE NOTICE 'pg_trgm is not available: a run id is found by its prefix only';
            RETURN;
        END IF;
        BEGIN
            CREATE EXTENSION IF NOT EXISTS pg_trgm;
        EXCEPTION WHEN insufficient_privilege OR feature_not_supported THEN
            RAISE NOTICE 'pg_trgm could not be created (%): a run id is found by its prefix only', SQLERRM;
            RETURN;
        END;
        SELECT n.nspname INTO trgm_schema
            FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace
            WHERE e.extname = 'pg_trgm';
    END IF;
    -- The operator class named with the extension's schema: it may have
    -- been created in one outside the search path.
    EXECUTE format(
        'CREATE INDEX IF NOT EXISTS pgbus_workflows_id_trgm ON pgbus_workflows'
        ' USING gin (lower(workflow_id COLLATE "C") %I.gin_trgm_ops)', trgm_schema);
END
$$;
