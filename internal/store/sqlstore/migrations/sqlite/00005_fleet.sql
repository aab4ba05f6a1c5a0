-- +goose Up
-- vLLM fleet control plane (design 002, SPEC §7). A host is a GPU box
-- assignment; it is never deleted by default (retired keeps the record, so
-- "did this host ever exist" keeps its answer). provider_id is the vllm
-- provider the fleet controller registered for the host, NULL until the
-- first healthy probe.
CREATE TABLE hosts (
    id                INTEGER PRIMARY KEY AUTOINCREMENT,
    org_id            INTEGER NOT NULL REFERENCES orgs(id),
    project_id        INTEGER NOT NULL REFERENCES projects(id),
    ip                TEXT NOT NULL,
    port              INTEGER NOT NULL,
    model_name        TEXT NOT NULL,
    api_key           TEXT NOT NULL,             -- sealed like provider keys
    recipe            TEXT NOT NULL,             -- JSON {"vllm": {...}}
    notes             TEXT NOT NULL DEFAULT '',
    state             TEXT NOT NULL CHECK (state IN ('pending', 'serving', 'down', 'retired')),
    auto_apply        BOOLEAN NOT NULL DEFAULT FALSE,
    apply_requested   BOOLEAN NOT NULL DEFAULT FALSE,
    applied_revision  TEXT NOT NULL DEFAULT '',
    report            TEXT NOT NULL DEFAULT '{}', -- last POST /vllm/report for this host
    reported_at       TIMESTAMP NULL,
    last_config_fetch TIMESTAMP NULL,
    provider_id       INTEGER NULL REFERENCES providers(id),
    created_at        TIMESTAMP NOT NULL,
    updated_at        TIMESTAMP NOT NULL,
    retired_at        TIMESTAMP NULL
);
-- One live assignment per address; a retired host frees it (IPs recycle).
CREATE UNIQUE INDEX hosts_live_address ON hosts(org_id, ip, port) WHERE state <> 'retired';
CREATE INDEX hosts_ip ON hosts(ip);

-- Fleet keys authenticate GET /vllm/config. Only the hash is stored; two
-- may be active at once for rotation; revoked keys keep their row.
CREATE TABLE fleet_keys (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    org_id     INTEGER NOT NULL REFERENCES orgs(id),
    name       TEXT NOT NULL,
    lookup     TEXT NOT NULL UNIQUE,
    hash       TEXT NOT NULL,
    created_at TIMESTAMP NOT NULL,
    revoked_at TIMESTAMP NULL
);

-- +goose Down
DROP TABLE fleet_keys;
DROP TABLE hosts;
