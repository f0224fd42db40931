-- 0003: the graph cache checks a fingerprint (count, highest id, soft deletes) of the rows a
-- cached graph was built from before serving it. Without this index each check scanned the
-- whole triples table (about 1.1 s of a 2.3 s warm episodic query on a one-week memory);
-- covering the filter columns lets PostgreSQL answer from the index alone.
CREATE INDEX triples_graph_fingerprint_idx
    ON triples (user_id, memory_type, scale_seconds, id)
    INCLUDE (invalidated_at);
