-- sign-in
-- Sign-out ends a session on the server, not only in the browser that
-- signed out: each user has a generation, written into their session at
-- sign-in and compared on every request; sign-out adds one, so every
-- session cookie of that user made before it (a copy included) is refused
-- at once, by every process of the server. No row is generation 0.
CREATE TABLE IF NOT EXISTS pgbus_web_sign_in_generations (
    name       text PRIMARY KEY,
    generation bigint NOT NULL
);

-- Sign-in throttling, shared by every process of the server
-- (auth/throttle.py, models/sign_in_throttle.py): one row per key (a name
-- from one address, an address, a name from anywhere) counting the
-- attempts since window_start. An attempt is reserved here, in one
-- statement that takes the row's lock, before its password is checked,
-- so concurrent attempts cannot all pass a check made before any counted.
CREATE TABLE IF NOT EXISTS pgbus_web_sign_in_throttle (
    key          text PRIMARY KEY,
    window_start timestamptz NOT NULL,
    attempts     integer NOT NULL
);
