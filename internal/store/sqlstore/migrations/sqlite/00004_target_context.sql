-- +goose Up
-- A configured target may state its own context limit (SPEC §5); 0 = not set.
ALTER TABLE route_targets ADD COLUMN context_limit INTEGER NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE route_targets DROP COLUMN context_limit;
