-- 0024: the recalled segments, indexed apart.
--
-- Every episodic search reads the ranking priors of its lanes' candidates (about 300
-- segments) after the lanes answer: a primary-key lookup per candidate, 3-4 ms in a row with
-- nothing else running beside it (docs/benchmarks/query.md). The priors are a segment's
-- importance and its recall count. Importance weighs 0 by default (cross-validated), and few
-- segments were ever recalled. So the default search reads only the recalled ones among its
-- candidates: probes into this small index, which holds what the read returns.
CREATE INDEX segments_recalled_idx ON segments (user_id, id)
    INCLUDE (recall_count) WHERE recall_count > 0;
