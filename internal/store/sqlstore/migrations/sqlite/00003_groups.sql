-- +goose Up
-- Provider groups (design 000, addendum): an org-scoped set of providers
-- addressed as "group-slug/model". A group claims its slug in the org's one
-- namespace (slugs, owner_kind 'group') exactly as a provider does, so the
-- left part of "X/model" is never ambiguous. Groups are deleted outright
-- (no soft delete): nothing outside the group refers to it.
CREATE TABLE provider_groups (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    org_id     INTEGER NOT NULL REFERENCES orgs(id),
    slug       TEXT NOT NULL,
    name       TEXT NOT NULL,
    strategy   TEXT NOT NULL,
    created_at TIMESTAMP NOT NULL,
    updated_at TIMESTAMP NOT NULL,
    UNIQUE (org_id, slug)
);

-- Membership is many-to-many (overlapping groups are the way to express
-- scopes), but a provider sits in one group at most once. provider_id has
-- no cascade: purging a provider that is still a member is refused.
CREATE TABLE group_members (
    group_id    INTEGER NOT NULL REFERENCES provider_groups(id) ON DELETE CASCADE,
    provider_id INTEGER NOT NULL REFERENCES providers(id),
    weight      INTEGER NOT NULL,
    model_map   TEXT NOT NULL DEFAULT '{}',  -- JSON object: client model -> upstream model
    position    INTEGER NOT NULL,
    PRIMARY KEY (group_id, provider_id)
);
CREATE INDEX group_members_provider ON group_members(provider_id);

-- +goose Down
DROP TABLE group_members;
DROP TABLE provider_groups;
