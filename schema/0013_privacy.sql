-- 0013: privacy (docs/privacy.md): per-user media retention and face-blur opt-out, privacy
-- pauses, and segments that say a window was paused.
--
-- retention_days NULL = the deployment's default (WORLDMM_MEDIA_RETENTION_DAYS); frames and
-- audio older than that are deleted by `worldmm retention run` and answer 410 when asked for.
-- face_blur false = the wearer opted out of bystander face blurring (recorded here, so the
-- choice is the wearer's and is exported with the rest of their data).
ALTER TABLE users
    ADD COLUMN retention_days integer CHECK (retention_days IS NULL OR retention_days >= 1),
    ADD COLUMN face_blur      boolean NOT NULL DEFAULT true;

-- A pause the wearer asked for: captures between started_at and ended_at were dropped
-- unstored (ended_at NULL: not resumed yet; a session end closes it).
CREATE TABLE privacy_pauses (
    user_id     text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    session_id  text NOT NULL,
    started_at  timestamptz NOT NULL,
    ended_at    timestamptz,
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (user_id, started_at),
    CHECK (ended_at IS NULL OR ended_at >= started_at)
);

-- A window inside a pause is stored as a segment with status 'paused' (no caption, no
-- transcript): the day view shows a gap with its reason instead of missing data.
ALTER TABLE segments DROP CONSTRAINT segments_processing_status_check;
ALTER TABLE segments ADD CONSTRAINT segments_processing_status_check
    CHECK (processing_status IN ('pending', 'complete', 'failed', 'paused'));
