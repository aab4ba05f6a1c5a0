-- +goose Up
-- Requests and tokens per minute on a project and on a route, beside the
-- virtual key's (00001); 0 = no limit. The gateway enforces all three
-- (internal/ratelimit, docs/limits.md).
ALTER TABLE projects ADD COLUMN rpm_limit INTEGER NOT NULL DEFAULT 0;
ALTER TABLE projects ADD COLUMN tpm_limit INTEGER NOT NULL DEFAULT 0;
ALTER TABLE routes ADD COLUMN rpm_limit INTEGER NOT NULL DEFAULT 0;
ALTER TABLE routes ADD COLUMN tpm_limit INTEGER NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE routes DROP COLUMN tpm_limit;
ALTER TABLE routes DROP COLUMN rpm_limit;
ALTER TABLE projects DROP COLUMN tpm_limit;
ALTER TABLE projects DROP COLUMN rpm_limit;
