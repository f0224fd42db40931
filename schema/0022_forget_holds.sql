-- 0022: a forget holds (issue #42).
--
-- forgotten_ranges: every span a wearer forgot, written by the forget in the transaction that
-- deletes its rows. Whatever could write the span again reads it: the flow's windows (open
-- or being built) and late captures, `worldmm retrigger`, `worldmm replay`. Ranges go with
-- the user (a purge); a forget is never undone.
--
-- blob_deletions: blobs the store must lose, queued in the transaction that deleted the rows
-- pointing at them and removed once the blob store confirms (retried while it is down):
-- 'object' a capture stored alone, 'container' a window's container to delete or rewrite
-- without its forgotten captures, 'prefix' everything under a purged user's prefix. No key
-- to users: a purge's deletions outlive the user's rows.
--
-- Per-wearer rows (on Citus: distributed by user_id, colocated with users): every key
-- carries user_id, and nothing sets a key column to NULL.
CREATE TABLE forgotten_ranges (
    user_id       text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    id            bigint GENERATED ALWAYS AS IDENTITY,
    range_start   timestamptz NOT NULL,
    range_end     timestamptz NOT NULL,
    forgotten_at  timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT forgotten_ranges_pkey PRIMARY KEY (user_id, id),
    CONSTRAINT forgotten_ranges_span CHECK (range_end > range_start)
);
CREATE INDEX forgotten_ranges_span_idx ON forgotten_ranges (user_id, range_start, range_end);

CREATE TABLE blob_deletions (
    user_id      text NOT NULL,
    blob_key     text NOT NULL,
    kind         text NOT NULL CHECK (kind IN ('object', 'container', 'prefix')),
    enqueued_at  timestamptz NOT NULL DEFAULT now(),
    attempts     integer NOT NULL DEFAULT 0,
    last_error   text,
    CONSTRAINT blob_deletions_pkey PRIMARY KEY (user_id, blob_key)
);
