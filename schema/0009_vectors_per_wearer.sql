-- 0009: the dense and visual vectors partitioned by wearer (hash of user_id, 32 partitions).
--
-- One HNSW index held every wearer's segment and clip vectors, and each search walked it
-- discarding other wearers' rows: a wearer's search slowed as others were added (1.46x the
-- episodic p50 with three other wearers' weeks), and once a wearer's share of the index was
-- small the walk stopped at pgvector's scan limit with fewer or other results than exist.
-- Partitioned by a hash of the user, each partition has its own indexes and a search reads
-- only its wearer's partition (pruned by `user_id = ...`), shared with about 1/32 of the
-- other wearers. Unique keys carry the partition key, so both keys gain user_id; the visual
-- id comes from a sequence (identity columns on partitioned tables need PostgreSQL 17).
-- Existing rows are copied over and the HNSW indexes rebuilt: on a large memory this
-- migration takes as long as building those indexes.

-- visual_embeddings ----------------------------------------------------------------------
ALTER TABLE visual_embeddings RENAME TO visual_embeddings_unpartitioned;
ALTER TABLE visual_embeddings_unpartitioned
    DROP CONSTRAINT visual_embeddings_pkey,
    DROP CONSTRAINT visual_embeddings_segment_key;
DROP INDEX visual_embeddings_user_end_idx;
DROP INDEX visual_embeddings_hnsw;
ALTER SEQUENCE visual_embeddings_id_seq RENAME TO visual_embeddings_unpartitioned_id_seq;

CREATE SEQUENCE visual_embeddings_id_seq AS bigint;
CREATE TABLE visual_embeddings (
    id            bigint NOT NULL DEFAULT nextval('visual_embeddings_id_seq'),
    user_id       text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    segment_id    bigint NOT NULL,
    window_start  timestamptz NOT NULL,
    window_end    timestamptz NOT NULL,
    embedding     {visual_vec}({visual_dim}) NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT visual_embeddings_pkey PRIMARY KEY (id, user_id),
    CONSTRAINT visual_embeddings_segment_key UNIQUE (segment_id, user_id),
    CONSTRAINT visual_embeddings_segment_fk FOREIGN KEY (user_id, segment_id)
        REFERENCES segments (user_id, id) ON DELETE CASCADE
) PARTITION BY HASH (user_id);
ALTER SEQUENCE visual_embeddings_id_seq OWNED BY visual_embeddings.id;

-- segment_embeddings ---------------------------------------------------------------------
ALTER TABLE segment_embeddings RENAME TO segment_embeddings_unpartitioned;
ALTER TABLE segment_embeddings_unpartitioned DROP CONSTRAINT segment_embeddings_pkey;
DROP INDEX segment_embeddings_user_end_idx;
DROP INDEX segment_embeddings_hnsw;

CREATE TABLE segment_embeddings (
    segment_id     bigint NOT NULL,
    user_id        text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    scale_seconds  integer NOT NULL,
    window_start   timestamptz NOT NULL,
    window_end     timestamptz NOT NULL,
    model          text NOT NULL,
    embedding      {text_vec}({text_dim}) NOT NULL,
    updated_at     timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT segment_embeddings_pkey PRIMARY KEY (segment_id, user_id),
    CONSTRAINT segment_embeddings_segment_fk FOREIGN KEY (user_id, segment_id)
        REFERENCES segments (user_id, id) ON DELETE CASCADE
) PARTITION BY HASH (user_id);

-- the partitions: visual_embeddings_p00 .. _p31, segment_embeddings_p00 .. _p31
DO $$
DECLARE
    parent text;
    i int;
BEGIN
    FOREACH parent IN ARRAY ARRAY['visual_embeddings', 'segment_embeddings'] LOOP
        FOR i IN 0..31 LOOP
            EXECUTE format(
                'CREATE TABLE %I PARTITION OF %I FOR VALUES WITH (MODULUS 32, REMAINDER %s)',
                parent || '_p' || lpad(i::text, 2, '0'), parent, i);
        END LOOP;
    END LOOP;
END
$$;

INSERT INTO visual_embeddings
    (id, user_id, segment_id, window_start, window_end, embedding, created_at, updated_at)
SELECT id, user_id, segment_id, window_start, window_end, embedding, created_at, updated_at
FROM visual_embeddings_unpartitioned;
SELECT setval('visual_embeddings_id_seq', coalesce(max(id), 0) + 1, false)
FROM visual_embeddings;
INSERT INTO segment_embeddings
SELECT segment_id, user_id, scale_seconds, window_start, window_end, model, embedding, updated_at
FROM segment_embeddings_unpartitioned;
DROP TABLE visual_embeddings_unpartitioned;
DROP TABLE segment_embeddings_unpartitioned;

-- Indexes on the parents are made on every partition (and on partitions added later).
CREATE INDEX visual_embeddings_user_end_idx ON visual_embeddings (user_id, window_end);
CREATE INDEX visual_embeddings_hnsw ON visual_embeddings
    USING hnsw (embedding {visual_vec}_cosine_ops);
CREATE INDEX segment_embeddings_user_end_idx ON segment_embeddings (user_id, window_end);
CREATE INDEX segment_embeddings_hnsw ON segment_embeddings
    USING hnsw (embedding {text_vec}_cosine_ops);
