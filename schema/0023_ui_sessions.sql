-- 0023: the memory browser's sessions (/ui). The cookie holds an opaque random id, never the
-- API key; only the id's hash is kept, with the key the wearer logged in with, the session's
-- CSRF token and its expiry. A session ends at its expiry, at logout, and at once when its key
-- is revoked or gone: every lookup joins the key's row and reads its revoked_at.
--
-- Per-wearer rows (on Citus: distributed by user_id, colocated with users): every key
-- carries user_id, and nothing sets a key column to NULL. No foreign key to api_keys (a
-- reference table on Citus, placed after the per-wearer ones): the lookup's join is the
-- check, and a purge removes the rows with the user. The cookie's lookup goes by the hash
-- alone through its own index (on Citus that asks every shard: a browser's requests are few).
CREATE TABLE ui_sessions (
    user_id     text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    id_hash     text NOT NULL,
    key_id      bigint NOT NULL,
    csrf_token  text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    expires_at  timestamptz NOT NULL,
    CONSTRAINT ui_sessions_pkey PRIMARY KEY (user_id, id_hash)
);
CREATE INDEX ui_sessions_id_hash_idx ON ui_sessions (id_hash);
