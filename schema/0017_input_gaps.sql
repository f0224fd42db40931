-- 0017: lost input, per wearer and time span (dataflows/input_gaps.py).
--
-- When the broker no longer holds records the worker's position says it would read (or had
-- read), their offsets are known but not whose they were nor when they were captured. The
-- records beside the gap give a span of capture time, and the partition gives the wearers
-- whose records go there: every such wearer gets a row here. A window of that wearer that
-- overlaps the span "may be missing input"; readers (the API's segments, the browser) join on
-- overlap, so windows built after the gap was found are marked as well as those before.
-- span_start NULL = nothing known before the gap (unbounded).
CREATE TABLE input_gaps (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    user_id       text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    topic         text NOT NULL,
    partition     integer NOT NULL CHECK (partition >= 0),
    first_offset  bigint NOT NULL CHECK (first_offset >= 0),
    end_offset    bigint NOT NULL,
    reason        text NOT NULL,
    span_start    timestamptz,
    span_end      timestamptz NOT NULL,
    detected_at   timestamptz NOT NULL DEFAULT now(),
    CHECK (end_offset > first_offset),
    CHECK (span_start IS NULL OR span_end >= span_start),
    UNIQUE (user_id, topic, partition, first_offset, end_offset)
);
CREATE INDEX input_gaps_user_span ON input_gaps (user_id, span_end);
