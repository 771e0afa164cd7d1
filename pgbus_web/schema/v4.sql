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
