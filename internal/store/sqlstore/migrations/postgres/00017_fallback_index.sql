-- +goose Up
-- The routes that name a fallback or a context fallback (issue 21): the
-- checks of an admin write to fallbacks, or of a route's rename or
-- delete, read only these (store.Store.FallbackRoutes), not every route
-- of the project. Most routes have none, so the index is small.
CREATE INDEX routes_with_fallbacks ON routes (project_id) WHERE fallbacks <> '[]' OR context_fallback <> '';

-- +goose Down
DROP INDEX routes_with_fallbacks;
