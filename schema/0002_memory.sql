-- 0002: the memories built from segments: entities, triples (episodic + semantic), visual
-- clip embeddings, and the audit trail of semantic consolidation.

-- Canonical entities have canonical_entity_id NULL and a canonical_name; aliases point at
-- their canonical row. Surface forms are unique per user, case-insensitively, so resolving
-- the same name twice (a replayed window) finds the existing row.
CREATE TABLE entities (
    id                   bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    user_id              text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    canonical_entity_id  bigint,
    surface_form         text NOT NULL CHECK (length(surface_form) > 0),
    canonical_name       text,
    embedding            {text_vec}({text_dim}) NOT NULL,
    created_at           timestamptz NOT NULL DEFAULT now(),
    CHECK ((canonical_entity_id IS NULL) = (canonical_name IS NOT NULL)),
    CHECK (canonical_entity_id IS DISTINCT FROM id),
    -- references carry the user (see segments_user_id_key)
    CONSTRAINT entities_user_id_key UNIQUE (user_id, id),
    CONSTRAINT entities_canonical_fk FOREIGN KEY (user_id, canonical_entity_id)
        REFERENCES entities (user_id, id) ON DELETE CASCADE
);
CREATE UNIQUE INDEX entities_user_surface_key ON entities (user_id, lower(surface_form));
CREATE INDEX entities_canonical_idx ON entities (canonical_entity_id);
CREATE INDEX entities_canonical_hnsw ON entities
    USING hnsw (embedding {text_vec}_cosine_ops) WHERE canonical_entity_id IS NULL;

-- A triple's subject (and object, unless the object is a literal leaf such as "2:30 PM")
-- point at canonical entities. valid_from / invalidated_at are EVENT times: for episodic
-- triples valid_from is the window end of their segment; for semantic triples it is the
-- window end of the evidence, and invalidated_at the window end of the summary whose
-- consolidation replaced it (soft delete; replaced_by says by what).
CREATE TABLE triples (
    id                    bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    user_id               text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    memory_type           text NOT NULL CHECK (memory_type IN ('episodic', 'semantic')),
    segment_id            bigint,
    -- copied from the segment so per-scale vector search needs no join
    scale_seconds         integer,
    subject_entity_id     bigint NOT NULL,
    predicate             text NOT NULL CHECK (length(predicate) > 0),
    object_entity_id      bigint,
    object_literal        text,
    embedding             {text_vec}({text_dim}) NOT NULL,
    valid_from            timestamptz NOT NULL,
    invalidated_at        timestamptz,
    replaced_by           bigint,
    evidence_segment_ids  bigint[] NOT NULL DEFAULT '{}',
    -- extracted (from a segment), consolidated (output of consolidation), remembered (explicit)
    origin                text NOT NULL DEFAULT 'extracted'
                          CHECK (origin IN ('extracted', 'consolidated', 'remembered')),
    -- identity of the fact within its segment: a replayed window hits the same key
    natural_key           text GENERATED ALWAYS AS (md5(
                              memory_type || '|' || coalesce(segment_id::text, '') || '|'
                              || subject_entity_id::text || '|' || lower(predicate) || '|'
                              || coalesce(object_entity_id::text, '') || '|'
                              || coalesce(lower(object_literal), ''))) STORED,
    created_at            timestamptz NOT NULL DEFAULT now(),
    CHECK ((object_entity_id IS NULL) <> (object_literal IS NULL)),
    CHECK (memory_type = 'semantic' OR invalidated_at IS NULL),
    CHECK (invalidated_at IS NULL OR invalidated_at >= valid_from),
    CONSTRAINT triples_natural_key UNIQUE (user_id, natural_key),
    CONSTRAINT triples_user_id_key UNIQUE (user_id, id),
    CONSTRAINT triples_segment_fk FOREIGN KEY (user_id, segment_id)
        REFERENCES segments (user_id, id) ON DELETE CASCADE,
    CONSTRAINT triples_subject_fk FOREIGN KEY (user_id, subject_entity_id)
        REFERENCES entities (user_id, id) ON DELETE CASCADE,
    CONSTRAINT triples_object_fk FOREIGN KEY (user_id, object_entity_id)
        REFERENCES entities (user_id, id) ON DELETE CASCADE,
    CONSTRAINT triples_replaced_by_fk FOREIGN KEY (user_id, replaced_by)
        REFERENCES triples (user_id, id) ON DELETE SET NULL (replaced_by)
);
CREATE INDEX triples_user_type_valid_idx ON triples (user_id, memory_type, valid_from);
CREATE INDEX triples_segment_idx ON triples (segment_id);
CREATE INDEX triples_subject_idx ON triples (subject_entity_id);
CREATE INDEX triples_object_idx ON triples (object_entity_id);
CREATE INDEX triples_replaced_by_idx ON triples (replaced_by);
CREATE INDEX triples_evidence_idx ON triples USING gin (evidence_segment_ids);
CREATE INDEX triples_episodic_hnsw ON triples
    USING hnsw (embedding {text_vec}_cosine_ops) WHERE memory_type = 'episodic';
CREATE INDEX triples_semantic_hnsw ON triples
    USING hnsw (embedding {text_vec}_cosine_ops) WHERE memory_type = 'semantic';

-- One clip embedding per segment (30 s windows). The window is copied from the segment so
-- as_of filtering needs no join.
CREATE TABLE visual_embeddings (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    user_id       text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    segment_id    bigint NOT NULL,
    window_start  timestamptz NOT NULL,
    window_end    timestamptz NOT NULL,
    embedding     {visual_vec}({visual_dim}) NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT visual_embeddings_segment_key UNIQUE (segment_id),
    CONSTRAINT visual_embeddings_segment_fk FOREIGN KEY (user_id, segment_id)
        REFERENCES segments (user_id, id) ON DELETE CASCADE
);
CREATE INDEX visual_embeddings_user_end_idx ON visual_embeddings (user_id, window_end);
CREATE INDEX visual_embeddings_hnsw ON visual_embeddings
    USING hnsw (embedding {visual_vec}_cosine_ops);

-- What consolidation saw, what it decided and what it wrote: facts keep their provenance
-- even when the LLM merges or removes them.
CREATE TABLE consolidation_audit (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    user_id      text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    segment_id   bigint,
    inputs       jsonb NOT NULL,
    decision     text NOT NULL,
    outputs      jsonb NOT NULL DEFAULT '{}'::jsonb,
    created_at   timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT consolidation_audit_segment_fk FOREIGN KEY (user_id, segment_id)
        REFERENCES segments (user_id, id) ON DELETE CASCADE
);
CREATE INDEX consolidation_audit_user_idx ON consolidation_audit (user_id, created_at);
CREATE INDEX consolidation_audit_segment_idx ON consolidation_audit (segment_id);
