-- +goose Up
-- A pool key records the environment variable a declarative config file
-- (rolter apply) took its secret from, so that rolter export names it
-- again. Never the secret; '' when unknown.
ALTER TABLE provider_keys ADD COLUMN ref TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE provider_keys DROP COLUMN ref;
