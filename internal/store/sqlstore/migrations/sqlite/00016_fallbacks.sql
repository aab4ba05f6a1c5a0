-- +goose Up
-- Fallbacks (issue 19): a target's priority tier inside its route (lower
-- is preferred), a route's ordered fallback routes (names in the same
-- project, a JSON array) and its context-window fallback route, and in
-- usage records the tier and the fallback route that served a request.
ALTER TABLE route_targets ADD COLUMN priority INTEGER NOT NULL DEFAULT 0;
ALTER TABLE routes ADD COLUMN fallbacks TEXT NOT NULL DEFAULT '[]';
ALTER TABLE routes ADD COLUMN context_fallback TEXT NOT NULL DEFAULT '';
ALTER TABLE usage_records ADD COLUMN tier INTEGER NOT NULL DEFAULT 0;
ALTER TABLE usage_records ADD COLUMN fallback TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE usage_records DROP COLUMN fallback;
ALTER TABLE usage_records DROP COLUMN tier;
ALTER TABLE routes DROP COLUMN context_fallback;
ALTER TABLE routes DROP COLUMN fallbacks;
ALTER TABLE route_targets DROP COLUMN priority;
