-- 0007: the lexical lane's full-text index keyed by user as well as by lexeme.
--
-- 0004 indexed search_tsv alone, so a search for a common word fetched every user's matching
-- segments from the heap and only then dropped the other users' rows: with three other
-- wearers' weeks in the table, one user's episodic search took 1.3 times as long as alone,
-- and the cost grows with every wearer. btree_gin lets one GIN index hold the user id next to
-- the lexemes, so the index scan itself keeps only this user's segments (a trusted extension:
-- managed PostgreSQL services allow it). Only complete segments are ever searched.
CREATE EXTENSION IF NOT EXISTS btree_gin;

CREATE INDEX segments_user_search_idx ON segments USING gin (user_id, search_tsv)
    WHERE processing_status = 'complete';

DROP INDEX segments_search_tsv_idx;
