-- 0005: several API keys per user (create, list by prefix, rotate, revoke) and an audit
-- trail of admin actions.
--
-- A key is stored as its hash only, with its first characters (`prefix`, e.g. 'wmm_Ab12Cd34')
-- so an admin can find a key someone pasted in a log without the key itself ever being kept.
-- Revocation is a timestamp, checked on every request by every API process: nothing caches
-- a key's validity, so a revoked key is refused at once everywhere.
CREATE TABLE api_keys (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    user_id      text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    key_hash     text NOT NULL,
    prefix       text NOT NULL CHECK (length(prefix) BETWEEN 1 AND 32),
    name         text CHECK (name IS NULL OR length(name) BETWEEN 1 AND 100),
    created_at   timestamptz NOT NULL DEFAULT now(),
    revoked_at   timestamptz,
    -- the key that replaced this one when it was rotated
    replaced_by  bigint REFERENCES api_keys (id) ON DELETE SET NULL,
    CONSTRAINT api_keys_hash_key UNIQUE (key_hash),
    CONSTRAINT api_keys_user_id_key UNIQUE (user_id, id)
);
CREATE INDEX api_keys_user_idx ON api_keys (user_id, id);
CREATE INDEX api_keys_prefix_idx ON api_keys (prefix text_pattern_ops);

-- the one key per user of 0001 becomes that user's first key
INSERT INTO api_keys (user_id, key_hash, prefix, created_at)
SELECT id, api_key_hash, '(before 0005)', coalesce(api_key_rotated_at, created_at)
FROM users WHERE api_key_hash IS NOT NULL;
ALTER TABLE users DROP COLUMN api_key_hash, DROP COLUMN api_key_rotated_at;

-- Who did what with the admin key. No foreign key to users: the record of a purge must
-- outlive the user it removed (the column is not named user_id for the same reason: purge
-- treats every user_id column as the user's own data).
CREATE TABLE admin_audit (
    id        bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at        timestamptz NOT NULL DEFAULT now(),
    actor     text NOT NULL,
    action    text NOT NULL,
    subject_user text,
    key_id    bigint,
    detail    jsonb NOT NULL DEFAULT '{}'::jsonb
);
CREATE INDEX admin_audit_subject_idx ON admin_audit (subject_user, id);
