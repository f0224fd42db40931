-- 0006: the graph fingerprint (row count, highest id, soft-deleted count of a user's triples
-- of one type and scale) kept by triggers, so checking a cached graph is one primary-key read
-- instead of an index-only scan over every row of that scale (0003), which grew with the
-- memory: 92 ms of a 170 ms episodic search over one week with the graph lane on.
--
-- Each counter row changes in the same transaction as the triples it counts, so any snapshot
-- sees the two agree. Writers of the same user, type and scale queue on the counter row from
-- their triples statement to their commit (a window writes only its own segment's embedding
-- rows after its triples, so the wait is short and cannot deadlock); statements that touch
-- several counter rows take them in key order.
-- `top_id` only grows: after a delete it may be above the highest remaining id, which readers
-- treat like any change that is not a pure append (they rebuild).
CREATE TABLE triple_counts (
    user_id        text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    memory_type    text NOT NULL CHECK (memory_type IN ('episodic', 'semantic')),
    -- 0 for rows without a scale (semantic facts)
    scale_seconds  integer NOT NULL,
    n              bigint NOT NULL,
    top_id         bigint NOT NULL,
    invalidated    bigint NOT NULL,
    PRIMARY KEY (user_id, memory_type, scale_seconds)
);

INSERT INTO triple_counts
SELECT user_id, memory_type, COALESCE(scale_seconds, 0), count(*), max(id), count(invalidated_at)
FROM triples GROUP BY 1, 2, 3;

CREATE FUNCTION triple_counts_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO triple_counts AS c
    SELECT user_id, memory_type, COALESCE(scale_seconds, 0), count(*), max(id),
           count(invalidated_at)
    FROM new_rows GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
    ON CONFLICT (user_id, memory_type, scale_seconds) DO UPDATE SET
        n = c.n + EXCLUDED.n,
        top_id = GREATEST(c.top_id, EXCLUDED.top_id),
        invalidated = c.invalidated + EXCLUDED.invalidated;
    RETURN NULL;
END $$;

-- An update can soft-delete (invalidated_at set) or, in principle, move a row between keys;
-- the delta of each key is what it gained minus what it lost. A user's rows can only be
-- updated once they exist, so their counter rows exist too.
CREATE FUNCTION triple_counts_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE triple_counts AS c SET
        n = c.n + d.n,
        top_id = GREATEST(c.top_id, d.top_id),
        invalidated = c.invalidated + d.invalidated
    FROM (
        SELECT user_id, memory_type, scale, sum(n) AS n, max(top_id) AS top_id,
               sum(invalidated) AS invalidated
        FROM (
            SELECT user_id, memory_type, COALESCE(scale_seconds, 0) AS scale, 1 AS n,
                   id AS top_id, (invalidated_at IS NOT NULL)::int AS invalidated
            FROM new_rows
            UNION ALL
            SELECT user_id, memory_type, COALESCE(scale_seconds, 0), -1, 0,
                   -(invalidated_at IS NOT NULL)::int
            FROM old_rows
        ) AS change
        GROUP BY 1, 2, 3
        ORDER BY 1, 2, 3
    ) AS d
    WHERE c.user_id = d.user_id AND c.memory_type = d.memory_type
      AND c.scale_seconds = d.scale
      AND (d.n <> 0 OR d.invalidated <> 0 OR d.top_id > c.top_id);
    RETURN NULL;
END $$;

-- Only UPDATE here, never INSERT: when a user is deleted, the cascade removes their counter
-- rows and triples together, and an insert would then break the foreign key.
CREATE FUNCTION triple_counts_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE triple_counts AS c SET
        n = c.n - d.n,
        invalidated = c.invalidated - d.invalidated
    FROM (
        SELECT user_id, memory_type, COALESCE(scale_seconds, 0) AS scale, count(*) AS n,
               count(invalidated_at) AS invalidated
        FROM old_rows GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
    ) AS d
    WHERE c.user_id = d.user_id AND c.memory_type = d.memory_type
      AND c.scale_seconds = d.scale;
    RETURN NULL;
END $$;

CREATE TRIGGER triple_counts_insert AFTER INSERT ON triples
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION triple_counts_insert();
CREATE TRIGGER triple_counts_update AFTER UPDATE ON triples
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION triple_counts_update();
CREATE TRIGGER triple_counts_delete AFTER DELETE ON triples
    REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION triple_counts_delete();
