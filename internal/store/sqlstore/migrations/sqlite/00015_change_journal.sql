-- +goose Up
-- The change journal (issue 21): every write to a table the routing
-- snapshot reads adds (kind, ref), the kind of entity and its id (the
-- parent's for keys, targets and members), so that a replica re-reads
-- only the entities that changed since it last looked instead of the
-- whole catalog. Triggers write it, so that every writer (the admin
-- service, the fleet controller, an import, another replica) is journaled
-- alike. Rows older than an hour are pruned; change_floor records the
-- highest position pruned, and a replica that last looked before it
-- reads everything again.
CREATE TABLE change_journal (
    seq  INTEGER PRIMARY KEY AUTOINCREMENT,
    kind TEXT    NOT NULL,
    ref  INTEGER NOT NULL,
    at   TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP
);
CREATE TABLE change_floor (
    id  INTEGER PRIMARY KEY CHECK (id = 1),
    pos INTEGER NOT NULL
);
INSERT INTO change_floor (id, pos) VALUES (1, 0);
-- +goose StatementBegin
CREATE TRIGGER journal_orgs_insert AFTER INSERT ON orgs BEGIN
    INSERT INTO change_journal (kind, ref) VALUES ('org', NEW.id);
END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER journal_orgs_update AFTER UPDATE ON orgs BEGIN
    INSERT INTO change_journal (kind, ref) VALUES ('org', NEW.id);
END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER journal_orgs_delete AFTER DELETE ON orgs BEGIN
    INSERT INTO change_journal (kind, ref) VALUES ('org', OLD.id);
END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER journal_projects_insert AFTER INSERT ON projects BEGIN
    INSERT INTO change_journal (kind, ref) VALUES ('project', NEW.id);
END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER journal_projects_update AFTER UPDATE ON projects BEGIN
    INSERT INTO change_journal (kind, ref) VALUES ('project', NEW.id);
END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER journal_projects_delete AFTER DELETE ON projects BEGIN
    INSERT INTO change_journal (kind, ref) VALUES ('project', OLD.id);
END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER journal_providers_insert AFTER INSERT ON providers BEGIN
    INSERT INTO change_journal (kind, ref) VALUES ('provider', NEW.id);
END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER journal_providers_update AFTER UPDATE ON providers BEGIN
    INSERT INTO change_journal (kind, ref) VALUES ('provider', NEW.id);
END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER journal_providers_delete AFTER DELETE ON providers BEGIN
    INSERT INTO change_journal (kind, ref) VALUES ('provider', OLD.id);
END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER journal_provider_keys_insert AFTER INSERT ON provider_keys BEGIN
    INSERT INTO change_journal (kind, ref) VALUES ('provider', NEW.provider_id);
END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER journal_provider_keys_update AFTER UPDATE ON provider_keys BEGIN
    INSERT INTO change_journal (kind, ref) VALUES ('provider', NEW.provider_id);
    INSERT INTO change_journal (kind, ref) SELECT 'provider', OLD.provider_id WHERE OLD.provider_id <> NEW.provider_id;
END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER journal_provider_keys_delete AFTER DELETE ON provider_keys BEGIN
    INSERT INTO change_journal (kind, ref) VALUES ('provider', OLD.provider_id);
END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER journal_routes_insert AFTER INSERT ON routes BEGIN
    INSERT INTO change_journal (kind, ref) VALUES ('route', NEW.id);
END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER journal_routes_update AFTER UPDATE ON routes BEGIN
    INSERT INTO change_journal (kind, ref) VALUES ('route', NEW.id);
END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER journal_routes_delete AFTER DELETE ON routes BEGIN
    INSERT INTO change_journal (kind, ref) VALUES ('route', OLD.id);
END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER journal_route_targets_insert AFTER INSERT ON route_targets BEGIN
    INSERT INTO change_journal (kind, ref) VALUES ('route', NEW.route_id);
END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER journal_route_targets_update AFTER UPDATE ON route_targets BEGIN
    INSERT INTO change_journal (kind, ref) VALUES ('route', NEW.route_id);
    INSERT INTO change_journal (kind, ref) SELECT 'route', OLD.route_id WHERE OLD.route_id <> NEW.route_id;
END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER journal_route_targets_delete AFTER DELETE ON route_targets BEGIN
    INSERT INTO change_journal (kind, ref) VALUES ('route', OLD.route_id);
END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER journal_provider_groups_insert AFTER INSERT ON provider_groups BEGIN
    INSERT INTO change_journal (kind, ref) VALUES ('group', NEW.id);
END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER journal_provider_groups_update AFTER UPDATE ON provider_groups BEGIN
    INSERT INTO change_journal (kind, ref) VALUES ('group', NEW.id);
END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER journal_provider_groups_delete AFTER DELETE ON provider_groups BEGIN
    INSERT INTO change_journal (kind, ref) VALUES ('group', OLD.id);
END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER journal_group_members_insert AFTER INSERT ON group_members BEGIN
    INSERT INTO change_journal (kind, ref) VALUES ('group', NEW.group_id);
END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER journal_group_members_update AFTER UPDATE ON group_members BEGIN
    INSERT INTO change_journal (kind, ref) VALUES ('group', NEW.group_id);
    INSERT INTO change_journal (kind, ref) SELECT 'group', OLD.group_id WHERE OLD.group_id <> NEW.group_id;
END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER journal_group_members_delete AFTER DELETE ON group_members BEGIN
    INSERT INTO change_journal (kind, ref) VALUES ('group', OLD.group_id);
END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER journal_virtual_keys_insert AFTER INSERT ON virtual_keys BEGIN
    INSERT INTO change_journal (kind, ref) VALUES ('vkey', NEW.id);
END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER journal_virtual_keys_update AFTER UPDATE ON virtual_keys BEGIN
    INSERT INTO change_journal (kind, ref) VALUES ('vkey', NEW.id);
END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER journal_virtual_keys_delete AFTER DELETE ON virtual_keys BEGIN
    INSERT INTO change_journal (kind, ref) VALUES ('vkey', OLD.id);
END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER journal_admin_tokens_insert AFTER INSERT ON admin_tokens BEGIN
    INSERT INTO change_journal (kind, ref) VALUES ('token', NEW.id);
END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER journal_admin_tokens_update AFTER UPDATE ON admin_tokens BEGIN
    INSERT INTO change_journal (kind, ref) VALUES ('token', NEW.id);
END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER journal_admin_tokens_delete AFTER DELETE ON admin_tokens BEGIN
    INSERT INTO change_journal (kind, ref) VALUES ('token', OLD.id);
END;
-- +goose StatementEnd

-- +goose Down
DROP TRIGGER journal_orgs_insert;
DROP TRIGGER journal_orgs_update;
DROP TRIGGER journal_orgs_delete;
DROP TRIGGER journal_projects_insert;
DROP TRIGGER journal_projects_update;
DROP TRIGGER journal_projects_delete;
DROP TRIGGER journal_providers_insert;
DROP TRIGGER journal_providers_update;
DROP TRIGGER journal_providers_delete;
DROP TRIGGER journal_provider_keys_insert;
DROP TRIGGER journal_provider_keys_update;
DROP TRIGGER journal_provider_keys_delete;
DROP TRIGGER journal_routes_insert;
DROP TRIGGER journal_routes_update;
DROP TRIGGER journal_routes_delete;
DROP TRIGGER journal_route_targets_insert;
DROP TRIGGER journal_route_targets_update;
DROP TRIGGER journal_route_targets_delete;
DROP TRIGGER journal_provider_groups_insert;
DROP TRIGGER journal_provider_groups_update;
DROP TRIGGER journal_provider_groups_delete;
DROP TRIGGER journal_group_members_insert;
DROP TRIGGER journal_group_members_update;
DROP TRIGGER journal_group_members_delete;
DROP TRIGGER journal_virtual_keys_insert;
DROP TRIGGER journal_virtual_keys_update;
DROP TRIGGER journal_virtual_keys_delete;
DROP TRIGGER journal_admin_tokens_insert;
DROP TRIGGER journal_admin_tokens_update;
DROP TRIGGER journal_admin_tokens_delete;
DROP TABLE change_floor;
DROP TABLE change_journal;
