-- 0018: the episodic triples lose their HNSW index; their entity indexes gain time order.
--
-- triples_episodic_hnsw was read by the PageRank graph lane alone (its episodic fact seeds),
-- a lane that ships with weight 0, yet every 30 s window paid for it: updating it was most of
-- the window's PostgreSQL time (52 + 26 ms of statement time for the two triple inserts on a
-- quiet machine), and rebuilding it was 719 s of a four-week bulk load. The graph lane now
-- scores the triples of a few candidate windows exactly (read by segment id), so no index over
-- all of a wearer's episodic triples is needed. Semantic facts keep theirs (semantic search
-- and consolidation read it).
--
-- The entity indexes become (user, entity, type, time): the entity lane reads an entity's
-- windows newest first up to a cap and counts them at ``as_of`` through them, instead of
-- every triple that names a common entity (1,000-2,500 a week for a housemate). They replace
-- the one-column indexes, which only served the foreign keys' cascades; those look up (user,
-- entity) and use the new ones. The included scale and segment let both reads stay in the
-- index.
DROP INDEX triples_episodic_hnsw;
DROP INDEX triples_subject_idx;
DROP INDEX triples_object_idx;
CREATE INDEX triples_subject_time_idx
    ON triples (user_id, subject_entity_id, memory_type, valid_from)
    INCLUDE (scale_seconds, segment_id);
CREATE INDEX triples_object_time_idx
    ON triples (user_id, object_entity_id, memory_type, valid_from)
    INCLUDE (scale_seconds, segment_id);

-- Two indexes only semantic facts use stop taking a row per episodic triple: the facts that
-- replaced others (replaced_by is never set on an episodic triple) and the evidence that
-- forgetting a range looks facts up by (an episodic triple's evidence is its own segment,
-- which its segment_id index finds).
DROP INDEX triples_replaced_by_idx;
CREATE INDEX triples_replaced_by_idx ON triples (replaced_by) WHERE replaced_by IS NOT NULL;
DROP INDEX triples_evidence_idx;
CREATE INDEX triples_evidence_idx ON triples USING gin (evidence_segment_ids)
    WHERE memory_type = 'semantic';
