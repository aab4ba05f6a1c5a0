-- +goose Up
-- Admin tokens become revocable and scoped (issue 14 §5).
--   org_id:     NULL for a global token, else the one org it may manage.
--   lookup:     public part of a minted token ("ra-<lookup>_..."), shown
--               as its prefix in listings; '' for ROLTER_ADMIN_TOKEN.
--   source:     'api' (POST /tokens), 'first_start' (generated and printed
--               on first start) or 'env' (the hash of ROLTER_ADMIN_TOKEN,
--               valid only while a start sets it to that value).
--   expires_at, revoked_at: as on virtual keys.
ALTER TABLE admin_tokens ADD COLUMN org_id BIGINT NULL REFERENCES orgs(id);
ALTER TABLE admin_tokens ADD COLUMN lookup TEXT NOT NULL DEFAULT '';
ALTER TABLE admin_tokens ADD COLUMN source TEXT NOT NULL DEFAULT 'api';
ALTER TABLE admin_tokens ADD COLUMN expires_at TIMESTAMPTZ NULL;
ALTER TABLE admin_tokens ADD COLUMN revoked_at TIMESTAMPTZ NULL;
-- Rows written before this migration came from bootstrap only.
UPDATE admin_tokens SET source = 'env' WHERE name = 'ROLTER_ADMIN_TOKEN';
UPDATE admin_tokens SET source = 'first_start' WHERE name = 'bootstrap';
CREATE INDEX admin_tokens_org ON admin_tokens(org_id);

-- +goose Down
-- Only live global tokens survive: the old schema would read an org token
-- or a revoked one as a valid global token.
DELETE FROM admin_tokens WHERE revoked_at IS NOT NULL OR org_id IS NOT NULL;
DROP INDEX admin_tokens_org;
ALTER TABLE admin_tokens DROP COLUMN revoked_at;
ALTER TABLE admin_tokens DROP COLUMN expires_at;
ALTER TABLE admin_tokens DROP COLUMN source;
ALTER TABLE admin_tokens DROP COLUMN lookup;
ALTER TABLE admin_tokens DROP COLUMN org_id;
