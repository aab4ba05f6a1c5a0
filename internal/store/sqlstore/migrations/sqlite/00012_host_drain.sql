-- +goose Up
-- Drain before restart (issue 18): a restart first takes the host out of
-- routing and waits for its in-flight requests, up to drain_timeout_s.
-- drain_started_at is set while a drain runs (the host shows as
-- "draining"); drained_at once the box may restart; all three clear when
-- probes show the new assignment serving. The state column keeps its
-- values, so its CHECK is unchanged.
ALTER TABLE hosts ADD COLUMN drain_timeout_s INTEGER NOT NULL DEFAULT 120;
ALTER TABLE hosts ADD COLUMN drain_started_at TIMESTAMP NULL;
ALTER TABLE hosts ADD COLUMN drain_deadline TIMESTAMP NULL;
ALTER TABLE hosts ADD COLUMN drained_at TIMESTAMP NULL;

-- +goose Down
ALTER TABLE hosts DROP COLUMN drained_at;
ALTER TABLE hosts DROP COLUMN drain_deadline;
ALTER TABLE hosts DROP COLUMN drain_started_at;
ALTER TABLE hosts DROP COLUMN drain_timeout_s;
