-- 0023: the memory browser's sessions (/ui). The cookie holds an opaque random id, never the
-- API key; only the id's hash is kept, with the key the wearer logged in with, the session's
-- CSRF token and its expiry. A session ends at its expiry, at logout, and at once when its key
-- is revoked or gone: every lookup joins the key's row and reads its revoked_at.
--
-- Global rows, like api_keys (on Citus a reference table, on every node): the cookie's lookup
-- goes by the id's hash alone, before the wearer is known, and joins the key's row. No
-- foreign key: the lookup's join is the check, and a purge deletes the wearer's sessions.
CREATE TABLE ui_sessions (
    user_id     text NOT NULL,
    id_hash     text NOT NULL,
    key_id      bigint NOT NULL,
    csrf_token  text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    expires_at  timestamptz NOT NULL,
    CONSTRAINT ui_sessions_pkey PRIMARY KEY (user_id, id_hash)
);
CREATE INDEX ui_sessions_id_hash_idx ON ui_sessions (id_hash);
