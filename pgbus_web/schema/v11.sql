-- operations: the time spent paused, every pause summed (docs/operations.md,
-- "The million-run trial"): the page's rate and time left count working
-- time only. paused_at/resumed_at keep the last pause alone; each go-on
-- adds that pause's length here.
ALTER TABLE pgbus_web_operations
    ADD COLUMN IF NOT EXISTS held_seconds double precision NOT NULL DEFAULT 0;
