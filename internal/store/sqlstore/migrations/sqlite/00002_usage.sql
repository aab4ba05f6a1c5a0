-- +goose Up
-- One row per gateway request (SPEC §4). No foreign keys: usage is an
-- append-only ledger that outlives purged providers and revoked keys, and a
-- batch insert must never fail because a referenced row went away meanwhile.
CREATE TABLE usage_records (
    id                INTEGER PRIMARY KEY AUTOINCREMENT,
    created_at        TIMESTAMP NOT NULL,           -- request start
    org_id            INTEGER NOT NULL,
    project_id        INTEGER NOT NULL,
    key_id            INTEGER NOT NULL,             -- virtual key
    address_kind      TEXT NOT NULL,                -- route, provider, group
    address           TEXT NOT NULL,                -- model string the client sent
    route             TEXT NOT NULL DEFAULT '',     -- route model, '' if none
    provider_id       INTEGER NOT NULL DEFAULT 0,   -- 0 if none
    provider_slug     TEXT NOT NULL DEFAULT '',
    upstream_model    TEXT NOT NULL DEFAULT '',
    status            INTEGER NOT NULL,             -- HTTP status sent; 499 client cancelled
    class             TEXT NOT NULL DEFAULT '',     -- failure class, '' on success
    attempts          INTEGER NOT NULL DEFAULT 0,
    latency_ms        INTEGER NOT NULL DEFAULT 0,
    ttft_ms           INTEGER NOT NULL DEFAULT 0,   -- 0 if not streamed or no first token
    prompt_tokens     INTEGER NOT NULL DEFAULT 0,
    completion_tokens INTEGER NOT NULL DEFAULT 0,
    stream            INTEGER NOT NULL DEFAULT 0    -- 0 or 1
);
CREATE INDEX usage_records_org_id ON usage_records(org_id, id);
CREATE INDEX usage_records_org_created ON usage_records(org_id, created_at);

-- +goose Down
DROP TABLE usage_records;
