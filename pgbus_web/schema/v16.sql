-- The policy: the rules that decide what may happen, read by every process
--
-- One row per rule that differs from its default (no row: the default).
-- Every process reads the rows through core/policy.py, kept in memory
-- behind the history's last id, so a change reaches every process within
-- a second or two. Each change is a row of the history with who, why, the
-- old and the new value; the version a row carries is the history id that
-- wrote it, which two admins changing one rule compare (the second is told
-- it changed under them).

CREATE TABLE IF NOT EXISTS pgbus_web_policy (
    key        text PRIMARY KEY CHECK (key ~ '^[a-z_]{1,40}$'),
    value      jsonb NOT NULL,
    version    bigint NOT NULL,
    changed_at timestamptz NOT NULL,
    changed_by text NOT NULL,
    reason     text NOT NULL CHECK (char_length(reason) <= 1000)
);

CREATE TABLE IF NOT EXISTS pgbus_web_policy_history (
    id         bigserial PRIMARY KEY,
    key        text NOT NULL,
    -- NULL: the default (no row before, or the rule reset to it).
    old_value  jsonb,
    new_value  jsonb,
    actor      text NOT NULL,
    reason     text NOT NULL CHECK (char_length(reason) <= 1000),
    changed_at timestamptz NOT NULL
);
CREATE INDEX IF NOT EXISTS pgbus_web_policy_history_key ON pgbus_web_policy_history (key, id DESC);

-- Who asked for an operation, proven (the principal's key: user:<name>,
-- token:<name>, break-glass): the approver must be another. And who
-- cancelled it and why, beside the pause's, resume's and approval's.
ALTER TABLE pgbus_web_operations
    ADD COLUMN IF NOT EXISTS requested_by    text,
    ADD COLUMN IF NOT EXISTS cancelled_by    text,
    ADD COLUMN IF NOT EXISTS cancel_reason   text CHECK (char_length(cancel_reason) <= 1000),
    ADD COLUMN IF NOT EXISTS approve_reason  text CHECK (char_length(approve_reason) <= 1000),
    ADD COLUMN IF NOT EXISTS pause_reason    text CHECK (char_length(pause_reason) <= 1000),
    ADD COLUMN IF NOT EXISTS resume_reason   text CHECK (char_length(resume_reason) <= 1000);

-- A token's role may be any of the four (viewer < operator < approver < admin).
ALTER TABLE pgbus_web_api_tokens DROP CONSTRAINT IF EXISTS pgbus_web_api_tokens_role_check;
ALTER TABLE pgbus_web_api_tokens ADD CONSTRAINT pgbus_web_api_tokens_role_check
    CHECK (role IN ('viewer', 'operator', 'approver', 'admin'));

-- The policy's redaction rules applied on the server, for the exports,
-- which the server writes line by line (docs/redaction.md). The same walk
-- as rules/redaction.py: a rule is a key name (at any depth) or a path of
-- keys from the root ("*" any one key); arrays are walked through; what a
-- rule names becomes the string "[redacted]".
CREATE OR REPLACE FUNCTION pgbus_web_redacts(rules text[], path text[]) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT EXISTS (
        SELECT 1 FROM unnest(rules) AS r(rule)
        WHERE CASE WHEN strpos(r.rule, '.') = 0 THEN r.rule = path[cardinality(path)]
                   ELSE cardinality(string_to_array(r.rule, '.')) = cardinality(path)
                        AND NOT EXISTS (SELECT 1 FROM unnest(string_to_array(r.rule, '.'), path) AS k(want, got)
                                        WHERE k.want <> '*' AND k.want IS DISTINCT FROM k.got)
              END)
$$;

CREATE OR REPLACE FUNCTION pgbus_web_redact(value jsonb, rules text[], path text[] DEFAULT '{}') RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
    found jsonb;
BEGIN
    IF value IS NULL OR cardinality(rules) = 0 THEN
        RETURN value;
    END IF;
    CASE jsonb_typeof(value)
    WHEN 'object' THEN
        SELECT coalesce(jsonb_object_agg(e.key, CASE WHEN pgbus_web_redacts(rules, path || e.key)
                                                     THEN to_jsonb('[redacted]'::text)
                                                     ELSE pgbus_web_redact(e.value, rules, path || e.key) END),
                        '{}'::jsonb)
        INTO found FROM jsonb_each(value) AS e;
        RETURN found;
    WHEN 'array' THEN
        SELECT coalesce(jsonb_agg(pgbus_web_redact(e.item, rules, path) ORDER BY e.n), '[]'::jsonb)
        INTO found FROM jsonb_array_elements(value) WITH ORDINALITY AS e(item, n);
        RETURN found;
    ELSE
        RETURN value;
    END CASE;
END;
$$;
