-- 0011: model usage per user, as the provider reported it, for billing, caps and budgets.
--
-- One row per user, minute, role, model, provider and dispatch mode: the ledger in each
-- process (worldmm.llm.usage) adds its calls up in memory and adds them here in batches, so
-- a wearer-hour is a few hundred rows, not one per call. Usage of a purged user goes with the
-- user; calls made for no user (a model check) have user_id NULL.
CREATE TABLE llm_usage (
    user_id            text REFERENCES users (id) ON DELETE CASCADE,
    minute             timestamptz NOT NULL,
    role               text NOT NULL,
    model              text NOT NULL,
    provider           text NOT NULL,
    dispatch           text NOT NULL,
    calls              integer NOT NULL CHECK (calls > 0),
    prompt_tokens      bigint NOT NULL CHECK (prompt_tokens >= 0),
    completion_tokens  bigint NOT NULL CHECK (completion_tokens >= 0),
    -- of prompt_tokens, those the provider served from its prompt cache (billed lower)
    cached_tokens      bigint NOT NULL CHECK (cached_tokens >= 0),
    CONSTRAINT llm_usage_key UNIQUE NULLS NOT DISTINCT
        (user_id, minute, role, model, provider, dispatch)
);
CREATE INDEX llm_usage_user_minute_idx ON llm_usage (user_id, minute);
