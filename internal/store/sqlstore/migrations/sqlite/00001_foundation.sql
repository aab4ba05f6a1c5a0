-- +goose Up
CREATE TABLE orgs (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    name        TEXT NOT NULL UNIQUE,
    description TEXT NOT NULL DEFAULT '',
    created_at  TIMESTAMP NOT NULL,
    updated_at  TIMESTAMP NOT NULL
);

CREATE TABLE projects (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    org_id      INTEGER NOT NULL REFERENCES orgs(id),
    name        TEXT NOT NULL,
    description TEXT NOT NULL DEFAULT '',
    created_at  TIMESTAMP NOT NULL,
    updated_at  TIMESTAMP NOT NULL,
    UNIQUE (org_id, name)
);

-- One slug namespace per org, shared by providers and (later) provider
-- groups: the primary key makes a slug unique across both kinds.
CREATE TABLE slugs (
    org_id     INTEGER NOT NULL REFERENCES orgs(id),
    slug       TEXT NOT NULL,
    owner_kind TEXT NOT NULL CHECK (owner_kind IN ('provider', 'group')),
    PRIMARY KEY (org_id, slug)
);

CREATE TABLE providers (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    org_id          INTEGER NOT NULL REFERENCES orgs(id),
    slug            TEXT NOT NULL,
    name            TEXT NOT NULL,
    kind            TEXT NOT NULL,
    base_url        TEXT NOT NULL,
    metadata_source TEXT NOT NULL DEFAULT 'configured',
    context_limit   INTEGER NOT NULL DEFAULT 0,
    models          TEXT NOT NULL DEFAULT '[]',
    settings        TEXT NOT NULL DEFAULT '{}',
    created_at      TIMESTAMP NOT NULL,
    updated_at      TIMESTAMP NOT NULL,
    deleted_at      TIMESTAMP NULL,
    UNIQUE (org_id, slug)
);

CREATE TABLE provider_keys (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    provider_id INTEGER NOT NULL REFERENCES providers(id) ON DELETE CASCADE,
    secret      TEXT NOT NULL,
    weight      INTEGER NOT NULL,
    created_at  TIMESTAMP NOT NULL
);
CREATE INDEX provider_keys_provider ON provider_keys(provider_id);

CREATE TABLE routes (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    project_id INTEGER NOT NULL REFERENCES projects(id),
    model      TEXT NOT NULL,
    strategy   TEXT NOT NULL,
    policy     TEXT NOT NULL DEFAULT '{}',
    created_at TIMESTAMP NOT NULL,
    updated_at TIMESTAMP NOT NULL,
    UNIQUE (project_id, model)
);

CREATE TABLE route_targets (
    id             INTEGER PRIMARY KEY AUTOINCREMENT,
    route_id       INTEGER NOT NULL REFERENCES routes(id) ON DELETE CASCADE,
    provider_id    INTEGER NOT NULL REFERENCES providers(id),
    upstream_model TEXT NOT NULL DEFAULT '',
    weight         INTEGER NOT NULL,
    position       INTEGER NOT NULL
);
CREATE INDEX route_targets_route ON route_targets(route_id);
CREATE INDEX route_targets_provider ON route_targets(provider_id);

CREATE TABLE virtual_keys (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    project_id INTEGER NOT NULL REFERENCES projects(id),
    name       TEXT NOT NULL,
    lookup     TEXT NOT NULL UNIQUE,
    hash       TEXT NOT NULL,
    models     TEXT NOT NULL DEFAULT '[]',
    rpm_limit  INTEGER NOT NULL DEFAULT 0,
    tpm_limit  INTEGER NOT NULL DEFAULT 0,
    expires_at TIMESTAMP NULL,
    revoked_at TIMESTAMP NULL,
    created_at TIMESTAMP NOT NULL
);
CREATE INDEX virtual_keys_project ON virtual_keys(project_id);

CREATE TABLE admin_tokens (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    name       TEXT NOT NULL,
    hash       TEXT NOT NULL UNIQUE,
    created_at TIMESTAMP NOT NULL
);

-- +goose Down
DROP TABLE admin_tokens;
DROP TABLE virtual_keys;
DROP TABLE route_targets;
DROP TABLE routes;
DROP TABLE provider_keys;
DROP TABLE providers;
DROP TABLE slugs;
DROP TABLE projects;
DROP TABLE orgs;
