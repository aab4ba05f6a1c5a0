-- +goose Up
-- What the box last reported running, when it was the then-current
-- assignment: {"revision", "port", "recipe"}. The fleet controller probes
-- and registers this, not the newest recipe, until the box applies it.
ALTER TABLE hosts ADD COLUMN applied_assignment TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE hosts DROP COLUMN applied_assignment;
