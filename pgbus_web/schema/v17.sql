-- Tokens with an expiry and a scope; sessions an admin can see and end;
-- the access log.

-- A token past expires_at is refused at every door (NULL: it never
-- expires). A read-only token never acts, whatever its role or the
-- policy's grants. last_used_from: the address of its last answered use.
ALTER TABLE pgbus_web_api_tokens
    ADD COLUMN IF NOT EXISTS expires_at     timestamptz,
    ADD COLUMN IF NOT EXISTS read_only      boolean NOT NULL DEFAULT false,
    ADD COLUMN IF NOT EXISTS last_used_from text CHECK (char_length(last_used_from) <= 100),
    ADD COLUMN IF NOT EXISTS revoked_by     text CHECK (char_length(revoked_by) <= 200);

-- One row per signed-in browser session. The cookie carries the row's id
-- (a random text, not a sequence: ids are seen by admins and must not be
-- guessed into another's cookie, though forging a cookie also needs the
-- secret key); every request reads the row, so a session an admin ends is
-- refused on its next request at every process. last_seen_at is written
-- at most once a minute.
CREATE TABLE IF NOT EXISTS pgbus_web_sessions (
    id           text PRIMARY KEY CHECK (id ~ '^[A-Za-z0-9_-]{16,64}$'),
    name         text NOT NULL CHECK (char_length(name) <= 200),
    provider     text NOT NULL CHECK (char_length(provider) <= 100),
    address      text CHECK (char_length(address) <= 100),
    started_at   timestamptz NOT NULL,
    last_seen_at timestamptz NOT NULL,
    expires_at   timestamptz NOT NULL,
    ended_at     timestamptz,
    ended_by     text CHECK (char_length(ended_by) <= 200),
    end_reason   text CHECK (end_reason IN ('signed_out', 'ended_by_admin'))
);
CREATE INDEX IF NOT EXISTS pgbus_web_sessions_live
    ON pgbus_web_sessions (name, started_at) WHERE ended_at IS NULL;
CREATE INDEX IF NOT EXISTS pgbus_web_sessions_expires ON pgbus_web_sessions (expires_at);

-- Who signed in, failed to, signed out, was ended by an admin; tokens
-- made, revoked and first used from a new address. Pruned by
-- `pgbus-web prune --access-log-older-than`.
CREATE TABLE IF NOT EXISTS pgbus_web_access_log (
    id      bigserial PRIMARY KEY,
    at      timestamptz NOT NULL,
    kind    text NOT NULL CHECK (kind IN ('sign_in', 'sign_in_failed', 'sign_out', 'session_ended',
                                          'sessions_ended', 'token_added', 'token_revoked',
                                          'token_new_address')),
    -- Whose sign-in, session or token: a user or token name (a failed
    -- sign-in's typed name, cut to 64 characters).
    subject text NOT NULL CHECK (char_length(subject) <= 200),
    -- Who did it, when another did (an admin ending a session).
    actor   text CHECK (char_length(actor) <= 200),
    address text CHECK (char_length(address) <= 100),
    detail  text CHECK (char_length(detail) <= 200)
);
CREATE INDEX IF NOT EXISTS pgbus_web_access_log_at ON pgbus_web_access_log (at DESC, id DESC);
CREATE INDEX IF NOT EXISTS pgbus_web_access_log_new_address
    ON pgbus_web_access_log (subject, address) WHERE kind = 'token_new_address';
