-- 0019: one schema for single-node PostgreSQL and for a Citus cluster (docs/citus.md).
--
-- On Citus every per-wearer table is distributed by user_id and colocated with users (worldmm
-- db migrate distributes them after the migrations, worldmm/store/distribute.py), which asks
-- three things of the schema, made true here for both kinds of server:
-- 1. every unique key carries the wearer: the keys on id alone give way to (user_id, id),
--    which every reference already uses; tables that had both keep the composite one as their
--    replica identity (what an online shard move replicates by);
-- 2. no foreign key that includes user_id sets columns to NULL on delete (Citus refuses it):
--    a summary's children and a fact's successor pointer are detached by the code that deletes
--    them (worldmm/store/purge.py), in the same transaction, before the delete;
-- 3. the triple counters' triggers write beside the table they fire on: on a Citus shard of
--    triples that is the colocated shard of triple_counts (same hash range, same node), so the
--    statement stays local with its transition table.
-- Global rows are not per-wearer: api_keys (the index from a key to its wearer, looked up by
-- key on every request) and admin_audit become reference tables; usage made for no wearer (a
-- model check) moves to llm_usage_unattributed, since a distribution column cannot be NULL.

-- 1. keys that carry the wearer --------------------------------------------------------------
ALTER TABLE segments DROP CONSTRAINT segments_pkey;
ALTER TABLE segments REPLICA IDENTITY USING INDEX segments_user_id_key;
ALTER TABLE entities DROP CONSTRAINT entities_pkey;
ALTER TABLE entities REPLICA IDENTITY USING INDEX entities_user_id_key;
ALTER TABLE triples DROP CONSTRAINT triples_pkey;
ALTER TABLE triples REPLICA IDENTITY USING INDEX triples_user_id_key;
ALTER TABLE frames DROP CONSTRAINT frames_pkey, ADD PRIMARY KEY (user_id, id);
ALTER TABLE audio_chunks DROP CONSTRAINT audio_chunks_pkey, ADD PRIMARY KEY (user_id, id);
ALTER TABLE consolidation_audit
    DROP CONSTRAINT consolidation_audit_pkey, ADD PRIMARY KEY (user_id, id);
ALTER TABLE input_gaps DROP CONSTRAINT input_gaps_pkey, ADD PRIMARY KEY (user_id, id);

-- 2. pointers detached by the code that deletes their target ---------------------------------
ALTER TABLE segments DROP CONSTRAINT segments_parent_fk,
    ADD CONSTRAINT segments_parent_fk FOREIGN KEY (user_id, parent_segment_id)
        REFERENCES segments (user_id, id);
ALTER TABLE triples DROP CONSTRAINT triples_replaced_by_fk,
    ADD CONSTRAINT triples_replaced_by_fk FOREIGN KEY (user_id, replaced_by)
        REFERENCES triples (user_id, id);

-- global tables -------------------------------------------------------------------------------
-- a reference table cannot point into a distributed one: a purge deletes the wearer's keys
ALTER TABLE api_keys DROP CONSTRAINT api_keys_user_id_fkey;

CREATE TABLE llm_usage_unattributed (
    minute             timestamptz NOT NULL,
    role               text NOT NULL,
    model              text NOT NULL,
    provider           text NOT NULL,
    dispatch           text NOT NULL,
    calls              integer NOT NULL CHECK (calls > 0),
    prompt_tokens      bigint NOT NULL CHECK (prompt_tokens >= 0),
    completion_tokens  bigint NOT NULL CHECK (completion_tokens >= 0),
    cached_tokens      bigint NOT NULL CHECK (cached_tokens >= 0),
    CONSTRAINT llm_usage_unattributed_key PRIMARY KEY (minute, role, model, provider, dispatch)
);
INSERT INTO llm_usage_unattributed
SELECT minute, role, model, provider, dispatch, sum(calls), sum(prompt_tokens),
       sum(completion_tokens), sum(cached_tokens)
FROM llm_usage WHERE user_id IS NULL GROUP BY 1, 2, 3, 4, 5;
DELETE FROM llm_usage WHERE user_id IS NULL;
ALTER TABLE llm_usage
    ALTER COLUMN user_id SET NOT NULL,
    DROP CONSTRAINT llm_usage_key,
    ADD CONSTRAINT llm_usage_key PRIMARY KEY (user_id, minute, role, model, provider, dispatch);
DROP INDEX llm_usage_user_minute_idx;  -- the key's own index leads with (user_id, minute)

-- 3. triple counters written beside the triples they count ----------------------------------
CREATE FUNCTION triple_counts_beside(tbl text) RETURNS text LANGUAGE plpgsql STABLE AS $$
DECLARE
    target text;
BEGIN
    IF tbl = 'triples' THEN
        RETURN 'triple_counts';
    END IF;
    -- a Citus shard, named triples_<shardid>: its colocated counter shard
    EXECUTE 'SELECT format(''triple_counts_%s'', c.shardid)
             FROM pg_dist_shard t JOIN pg_dist_shard c
               ON c.logicalrelid = ''triple_counts''::regclass
              AND c.shardminvalue = t.shardminvalue
             WHERE t.shardid = $1'
        INTO STRICT target USING substring(tbl FROM '_(\d+)$')::bigint;
    RETURN target;
END $$;

CREATE OR REPLACE FUNCTION triple_counts_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE format('
        INSERT INTO %I AS c
        SELECT user_id, memory_type, COALESCE(scale_seconds, 0), count(*), max(id),
               count(invalidated_at)
        FROM new_rows GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
        ON CONFLICT (user_id, memory_type, scale_seconds) DO UPDATE SET
            n = c.n + EXCLUDED.n,
            top_id = GREATEST(c.top_id, EXCLUDED.top_id),
            invalidated = c.invalidated + EXCLUDED.invalidated',
        triple_counts_beside(TG_TABLE_NAME));
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION triple_counts_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE format('
        UPDATE %I AS c SET
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
          AND (d.n <> 0 OR d.invalidated <> 0 OR d.top_id > c.top_id)',
        triple_counts_beside(TG_TABLE_NAME));
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION triple_counts_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE format('
        UPDATE %I AS c SET
            n = c.n - d.n,
            invalidated = c.invalidated - d.invalidated
        FROM (
            SELECT user_id, memory_type, COALESCE(scale_seconds, 0) AS scale, count(*) AS n,
                   count(invalidated_at) AS invalidated
            FROM old_rows GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
        ) AS d
        WHERE c.user_id = d.user_id AND c.memory_type = d.memory_type
          AND c.scale_seconds = d.scale',
        triple_counts_beside(TG_TABLE_NAME));
    RETURN NULL;
END $$;
