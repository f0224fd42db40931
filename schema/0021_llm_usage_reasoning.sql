-- 0021: reasoning tokens apart from the rest of a call's completion.
--
-- A reasoning model bills the tokens it thinks in as output (completion) tokens; the provider
-- reports them as completion_tokens_details.reasoning_tokens. They are kept beside the
-- completion tokens they are part of (as cached_tokens is of prompt_tokens), so the usage API
-- shows what the reasoning effort of each role costs. Rows written before hold 0.
ALTER TABLE llm_usage
    ADD COLUMN reasoning_tokens bigint NOT NULL DEFAULT 0 CHECK (reasoning_tokens >= 0);
ALTER TABLE llm_usage_unattributed
    ADD COLUMN reasoning_tokens bigint NOT NULL DEFAULT 0 CHECK (reasoning_tokens >= 0);
