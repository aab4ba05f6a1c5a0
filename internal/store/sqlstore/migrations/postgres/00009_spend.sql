-- +goose Up
-- Spend and budgets (issue 14, section 2). Money is integers, never floats:
-- prices are micro-USD per million tokens, costs and budgets nano-USD
-- (package money). Provider prices live in providers.settings (JSON) with
-- the provider's other knobs; a target's override needs columns because
-- targets have no JSON document.
ALTER TABLE route_targets ADD COLUMN input_price BIGINT NULL;   -- NULL: the provider's price
ALTER TABLE route_targets ADD COLUMN output_price BIGINT NULL;
-- NULL: served by a provider without a price (tokens counted, cost unknown);
-- 0 when no provider was reached.
ALTER TABLE usage_records ADD COLUMN cost_nano BIGINT NULL;
-- A budget is an amount per UTC calendar period ('day', 'week', 'month');
-- budget_period '' means none.
ALTER TABLE virtual_keys ADD COLUMN budget_nano BIGINT NOT NULL DEFAULT 0;
ALTER TABLE virtual_keys ADD COLUMN budget_period TEXT NOT NULL DEFAULT '';
ALTER TABLE projects ADD COLUMN budget_nano BIGINT NOT NULL DEFAULT 0;
ALTER TABLE projects ADD COLUMN budget_period TEXT NOT NULL DEFAULT '';
-- Budget checks sum a key's or a project's cost since the period start.
CREATE INDEX usage_records_key_created ON usage_records(key_id, created_at);
CREATE INDEX usage_records_project_created ON usage_records(project_id, created_at);

-- +goose Down
DROP INDEX usage_records_project_created;
DROP INDEX usage_records_key_created;
ALTER TABLE projects DROP COLUMN budget_period;
ALTER TABLE projects DROP COLUMN budget_nano;
ALTER TABLE virtual_keys DROP COLUMN budget_period;
ALTER TABLE virtual_keys DROP COLUMN budget_nano;
ALTER TABLE usage_records DROP COLUMN cost_nano;
ALTER TABLE route_targets DROP COLUMN output_price;
ALTER TABLE route_targets DROP COLUMN input_price;
