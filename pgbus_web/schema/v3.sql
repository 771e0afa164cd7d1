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
