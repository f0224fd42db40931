-- 0001: users, sessions, segments, raw captures (frames, audio).
--
-- Every table that holds a user's data carries user_id with ON DELETE CASCADE, so purging a
-- user is one DELETE on users. All times are timestamptz (event time unless named *_at for
-- bookkeeping). Template variables ({text_dim}, {text_vec}, {visual_dim}, {visual_vec}) are
-- substituted by worldmm.store.migrate; a missing one is an error.

CREATE EXTENSION IF NOT EXISTS vector;

CREATE TABLE users (
    id               text PRIMARY KEY CHECK (length(id) BETWEEN 1 AND 200),
    -- 'sha256:<hex>' of the API key; the key itself is never stored. NULL = no key yet
    -- (ingest creates users on first sight; an admin issues a key later).
    api_key_hash     text,
    api_key_rotated_at timestamptz,
    created_at       timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE sessions (
    user_id     text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    session_id  text NOT NULL,
    started_at  timestamptz,
    ended_at    timestamptz,
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (user_id, session_id)
);

-- One row per (user, scale, window): 30 s segments carry a caption and transcript; coarser
-- scales carry merged summaries and point their children at them via parent_segment_id.
CREATE TABLE segments (
    id                 bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    user_id            text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    session_id         text,
    scale_seconds      integer NOT NULL CHECK (scale_seconds > 0),
    window_start       timestamptz NOT NULL,
    window_end         timestamptz NOT NULL,
    -- true when the window was flushed early (session end) and covers less than its scale.
    partial            boolean NOT NULL DEFAULT false,
    caption            text,
    transcript         text,
    parent_segment_id  bigint,
    processing_status  text NOT NULL DEFAULT 'pending'
                       CHECK (processing_status IN ('pending', 'complete', 'failed')),
    visual_status      text NOT NULL DEFAULT 'none'
                       CHECK (visual_status IN ('none', 'pending', 'complete', 'failed')),
    error              text,
    attempts           integer NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    -- provenance: where the inputs came from and which models / prompts produced the text
    source_topic       text,
    source_partition   integer,
    source_offset_first bigint,
    source_offset_last bigint,
    model_versions     jsonb NOT NULL DEFAULT '{}'::jsonb,
    prompt_versions    jsonb NOT NULL DEFAULT '{}'::jsonb,
    created_at         timestamptz NOT NULL DEFAULT now(),
    updated_at         timestamptz NOT NULL DEFAULT now(),
    CHECK (window_end > window_start),
    CONSTRAINT segments_window_key UNIQUE (user_id, scale_seconds, window_start),
    -- composite keys let every reference carry the user, so the database itself refuses a
    -- row that points into another user's memory
    CONSTRAINT segments_user_id_key UNIQUE (user_id, id),
    CONSTRAINT segments_parent_fk FOREIGN KEY (user_id, parent_segment_id)
        REFERENCES segments (user_id, id) ON DELETE SET NULL (parent_segment_id)
);
-- time-range reads and as_of filters (a segment exists at T when window_end <= T)
CREATE INDEX segments_user_end_idx ON segments (user_id, window_end);
CREATE INDEX segments_user_scale_end_idx ON segments (user_id, scale_seconds, window_end);
CREATE INDEX segments_parent_idx ON segments (parent_segment_id);
-- retry sweeps look only at unfinished rows
CREATE INDEX segments_needing_work_idx ON segments (user_id, window_start)
    WHERE processing_status <> 'complete' OR visual_status IN ('pending', 'failed');

CREATE TABLE frames (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    user_id       text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    session_id    text,
    captured_at   timestamptz NOT NULL,
    seq           bigint,
    blob_key      text NOT NULL,
    content_type  text NOT NULL DEFAULT 'image/jpeg',
    -- arrived after its window closed (kept for timestamp retrieval, not in the caption)
    late          boolean NOT NULL DEFAULT false,
    created_at    timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT frames_blob_key UNIQUE (user_id, blob_key)
);
CREATE INDEX frames_user_time_idx ON frames (user_id, captured_at);

CREATE TABLE audio_chunks (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    user_id       text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    session_id    text,
    started_at    timestamptz NOT NULL,
    duration_ms   integer NOT NULL CHECK (duration_ms >= 0),
    sample_rate   integer,
    codec         text NOT NULL DEFAULT 'wav',
    blob_key      text NOT NULL,
    late          boolean NOT NULL DEFAULT false,
    created_at    timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT audio_chunks_blob_key UNIQUE (user_id, blob_key)
);
CREATE INDEX audio_chunks_user_time_idx ON audio_chunks (user_id, started_at);
