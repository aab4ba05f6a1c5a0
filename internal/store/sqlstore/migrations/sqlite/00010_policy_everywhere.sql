-- +goose Up
-- Provider groups carry the same router-owned policy as routes (SPEC §6):
-- a JSON object {max_output_tokens, tools, media, max_concurrency}.
-- Providers keep theirs in their settings document.
ALTER TABLE provider_groups ADD COLUMN policy TEXT NOT NULL DEFAULT '{}';

-- +goose Down
ALTER TABLE provider_groups DROP COLUMN policy;
