-- 0015: what a memory weighs and how often it was recalled.
--
-- importance (0..1) is set when a segment is built: by the caption / merge model when the
-- provider returns it ('model'), else by the offline estimate ('estimate'); an explicit note
-- is 'note' (1.0). NULL for segments written before this migration (the ranking prior reads
-- NULL as the neutral 0.5).
--
-- recall_count / last_recalled_at go up when a segment or fact is evidence of an answer (one
-- per answer) or a "remember this" note repeats it (a strong recall, several counts). They
-- live on the row, so forgetting the row (a forgotten range, a purge) resets them with it,
-- and a replayed window (upsert) keeps them.
ALTER TABLE segments
    ADD COLUMN importance real CHECK (importance BETWEEN 0 AND 1),
    ADD COLUMN importance_source text CHECK (importance_source IN ('model', 'estimate', 'note')),
    ADD COLUMN recall_count integer NOT NULL DEFAULT 0 CHECK (recall_count >= 0),
    ADD COLUMN last_recalled_at timestamptz;

ALTER TABLE triples
    ADD COLUMN recall_count integer NOT NULL DEFAULT 0 CHECK (recall_count >= 0),
    ADD COLUMN last_recalled_at timestamptz;

-- A new note is compared with the user's recent notes (duplicate merge): notes are few, so
-- this index finds them without touching the user's other segments.
CREATE INDEX segments_user_notes_idx ON segments (user_id, window_end) WHERE source_topic = 'note';
