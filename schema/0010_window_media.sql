-- 0010: a window's frames and audio are one stored object (worldmm/media/container.py).
--
-- Every capture keeps its row and its logical blob key (the API's frame key); a capture
-- stored inside a window container also records which object holds it and where, so one
-- frame is one ranged read. Rows written before this migration (and late captures, stored
-- alone) have no container: their bytes are the object named by blob_key, as before.
ALTER TABLE frames
    ADD COLUMN media_key    text,
    ADD COLUMN media_offset bigint,
    ADD COLUMN media_length integer,
    ADD CONSTRAINT frames_media_ref CHECK (
        (media_key IS NULL AND media_offset IS NULL AND media_length IS NULL)
        OR (media_key IS NOT NULL AND media_offset >= 0 AND media_length >= 0)
    );

ALTER TABLE audio_chunks
    ADD COLUMN media_key    text,
    ADD COLUMN media_offset bigint,
    ADD COLUMN media_length integer,
    ADD CONSTRAINT audio_chunks_media_ref CHECK (
        (media_key IS NULL AND media_offset IS NULL AND media_length IS NULL)
        OR (media_key IS NOT NULL AND media_offset >= 0 AND media_length >= 0)
    );
