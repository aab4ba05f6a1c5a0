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
-- On PostgreSQL a position is the writing transaction's id: transactions
-- commit out of id order, so a reader re-reads every row at or above the
-- oldest transaction still running when it last looked (xmin).
CREATE TABLE change_journal (
    pos  BIGINT      NOT NULL DEFAULT (pg_current_xact_id()::text::bigint),
    kind TEXT        NOT NULL,
    ref  BIGINT      NOT NULL,
    at   TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX change_journal_pos ON change_journal (pos);
CREATE TABLE change_floor (
    id  INTEGER PRIMARY KEY CHECK (id = 1),
    pos BIGINT  NOT NULL
);
INSERT INTO change_floor (id, pos) VALUES (1, 0);
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION journal_change() RETURNS trigger AS $$
DECLARE
    col text := TG_ARGV[1];
    n bigint;
    o bigint;
BEGIN
    IF TG_OP <> 'DELETE' THEN
        n := (to_jsonb(NEW) ->> col)::bigint;
        INSERT INTO change_journal (kind, ref) VALUES (TG_ARGV[0], n);
    END IF;
    IF TG_OP <> 'INSERT' THEN
        o := (to_jsonb(OLD) ->> col)::bigint;
        IF n IS NULL OR o <> n THEN
            INSERT INTO change_journal (kind, ref) VALUES (TG_ARGV[0], o);
        END IF;
    END IF;
    RETURN NULL;
END;
$$ LANGUAGE plpgsql;
-- +goose StatementEnd
CREATE TRIGGER journal_orgs AFTER INSERT OR UPDATE OR DELETE ON orgs FOR EACH ROW EXECUTE FUNCTION journal_change('org', 'id');
CREATE TRIGGER journal_projects AFTER INSERT OR UPDATE OR DELETE ON projects FOR EACH ROW EXECUTE FUNCTION journal_change('project', 'id');
CREATE TRIGGER journal_providers AFTER INSERT OR UPDATE OR DELETE ON providers FOR EACH ROW EXECUTE FUNCTION journal_change('provider', 'id');
CREATE TRIGGER journal_provider_keys AFTER INSERT OR UPDATE OR DELETE ON provider_keys FOR EACH ROW EXECUTE FUNCTION journal_change('provider', 'provider_id');
CREATE TRIGGER journal_routes AFTER INSERT OR UPDATE OR DELETE ON routes FOR EACH ROW EXECUTE FUNCTION journal_change('route', 'id');
CREATE TRIGGER journal_route_targets AFTER INSERT OR UPDATE OR DELETE ON route_targets FOR EACH ROW EXECUTE FUNCTION journal_change('route', 'route_id');
CREATE TRIGGER journal_provider_groups AFTER INSERT OR UPDATE OR DELETE ON provider_groups FOR EACH ROW EXECUTE FUNCTION journal_change('group', 'id');
CREATE TRIGGER journal_group_members AFTER INSERT OR UPDATE OR DELETE ON group_members FOR EACH ROW EXECUTE FUNCTION journal_change('group', 'group_id');
CREATE TRIGGER journal_virtual_keys AFTER INSERT OR UPDATE OR DELETE ON virtual_keys FOR EACH ROW EXECUTE FUNCTION journal_change('vkey', 'id');
CREATE TRIGGER journal_admin_tokens AFTER INSERT OR UPDATE OR DELETE ON admin_tokens FOR EACH ROW EXECUTE FUNCTION journal_change('token', 'id');

-- +goose Down
DROP TRIGGER journal_orgs ON orgs;
DROP TRIGGER journal_projects ON projects;
DROP TRIGGER journal_providers ON providers;
DROP TRIGGER journal_provider_keys ON provider_keys;
DROP TRIGGER journal_routes ON routes;
DROP TRIGGER journal_route_targets ON route_targets;
DROP TRIGGER journal_provider_groups ON provider_groups;
DROP TRIGGER journal_group_members ON group_members;
DROP TRIGGER journal_virtual_keys ON virtual_keys;
DROP TRIGGER journal_admin_tokens ON admin_tokens;
DROP FUNCTION journal_change();
DROP TABLE change_floor;
DROP TABLE change_journal;
