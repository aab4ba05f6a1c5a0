-- +goose Up
-- Groups get the providers' lifecycle (design 000 §3, "Deletion &
-- reclaim"): a deleted group keeps its row and its slug claim, so that a
-- key whose allowlist names "group/*" never silently authorises whatever
-- claims the slug next; an explicit purge removes the row and frees it.
ALTER TABLE provider_groups ADD COLUMN deleted_at TIMESTAMPTZ NULL;

-- +goose Down
ALTER TABLE provider_groups DROP COLUMN deleted_at;
