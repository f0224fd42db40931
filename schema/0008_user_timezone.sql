-- 0008: every user has a time zone (an IANA name such as 'Asia/Tokyo'; default 'UTC').
--
-- Stored times stay UTC everywhere; the zone is applied where a person reads or says a time:
-- the question's "yesterday afternoon", the answers' clock times, the browser's days. The API
-- validates names against the zone database (zoneinfo) before they reach this column; the
-- check here only keeps the column to a name's shape.
ALTER TABLE users
    ADD COLUMN timezone text NOT NULL DEFAULT 'UTC'
        CHECK (timezone ~ '^[A-Za-z0-9_+/-]{1,64}$');
