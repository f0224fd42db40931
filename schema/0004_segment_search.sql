-- 0004: what the lexical and dense lanes of episodic retrieval search.
--
-- Lexical: a tsvector of each segment's caption (weight A) and transcript (weight B), kept by
-- PostgreSQL itself (a stored generated column: every write path is covered, nothing in the
-- application can forget it), with a GIN index. The 'english' configuration is named
-- explicitly so the expression is immutable.
ALTER TABLE segments ADD COLUMN search_tsv tsvector GENERATED ALWAYS AS (
    setweight(to_tsvector('english'::regconfig, coalesce(caption, '')), 'A')
    || setweight(to_tsvector('english'::regconfig, coalesce(transcript, '')), 'B')
) STORED;
CREATE INDEX segments_search_tsv_idx ON segments USING gin (search_tsv);

-- Dense: one text embedding of caption + transcript per segment, every scale. A table of its
-- own, like visual_embeddings: the HNSW index stays narrow, the window and scale are copied
-- so the as_of and scale filters need no join, and `model` names the embedder that made the
-- vector (the backfill re-embeds rows another model made). Missing rows are what
-- `worldmm db backfill-embeddings` fills for memories written before this migration.
CREATE TABLE segment_embeddings (
    segment_id     bigint PRIMARY KEY,
    user_id        text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    scale_seconds  integer NOT NULL,
    window_start   timestamptz NOT NULL,
    window_end     timestamptz NOT NULL,
    model          text NOT NULL,
    embedding      {text_vec}({text_dim}) NOT NULL,
    updated_at     timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT segment_embeddings_segment_fk FOREIGN KEY (user_id, segment_id)
        REFERENCES segments (user_id, id) ON DELETE CASCADE
);
CREATE INDEX segment_embeddings_user_end_idx ON segment_embeddings (user_id, window_end);
CREATE INDEX segment_embeddings_hnsw ON segment_embeddings
    USING hnsw (embedding {text_vec}_cosine_ops);
