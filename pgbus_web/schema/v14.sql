-- The change marker, told apart by who wrote: an operation's chunks, or
-- anyone else.
--
-- A bulk operation commits a chunk a few times a second. Each commit moved
-- the one marker, so every page an operator had open read and drew itself
-- anew on every request while the operation ran: the runs fragment's p95
-- tripled beside it. A chunk's transaction now says it is one
-- (set_config('pgbus_web.by_operation', 'on', true)), and its log row
-- carries that; the marker is read as two numbers, every change and the
-- changes not made by an operation's chunks. The pages' kept reads follow
-- the second at once and the first within a second
-- (web/answering/shared.py, OPERATION_LAG; docs/operations.md); a
-- live-refresh poll still compares the first.

ALTER TABLE pgbus_web_change_log ADD COLUMN IF NOT EXISTS by_operation boolean NOT NULL DEFAULT false;
ALTER TABLE pgbus_web_change_total ADD COLUMN IF NOT EXISTS by_operations bigint NOT NULL DEFAULT 0;

CREATE OR REPLACE FUNCTION pgbus_web_change_fold() RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF current_setting('transaction_isolation') <> 'read committed'
       OR NOT pg_try_advisory_xact_lock(8099317832010925671) THEN
        RETURN;
    END IF;
    WITH moved AS (DELETE FROM pgbus_web_change_log RETURNING changes, by_operation)
    UPDATE pgbus_web_change_total
    SET changes = changes + (SELECT COALESCE(sum(changes), 0) FROM moved),
        by_operations = by_operations + (SELECT COALESCE(sum(changes) FILTER (WHERE by_operation), 0) FROM moved)
    WHERE id = 1;
END;
$$;

CREATE OR REPLACE FUNCTION pgbus_web_mark_change() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF current_setting('pgbus_web.changed', true) IS DISTINCT FROM 'on' THEN
        PERFORM set_config('pgbus_web.changed', 'on', true);
        INSERT INTO pgbus_web_change_log (by_operation)
        VALUES (current_setting('pgbus_web.by_operation', true) IS NOT DISTINCT FROM 'on');
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
