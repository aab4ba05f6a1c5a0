package sqlstore

import (
	"context"
	"time"

	"github.com/rolter/rolter/internal/store"
)

// now is the timestamp for writes, truncated to what PostgreSQL keeps so a
// value reads back equal on both dialects.
func now() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }

func limitOf(p store.Page) int {
	if p.Limit <= 0 {
		return 100
	}
	return p.Limit
}

// CreateOrg implements store.Store.
func (s *DB) CreateOrg(ctx context.Context, o *store.Org) error {
	t := now()
	id, err := s.insert(ctx, s.qr, "org name",
		`INSERT INTO orgs (name, description, created_at, updated_at) VALUES (?, ?, ?, ?)`,
		o.Name, o.Description, t, t)
	if err != nil {
		return err
	}
	o.ID, o.CreatedAt, o.UpdatedAt = id, t, t
	return nil
}

const orgCols = `id, name, description, created_at, updated_at`

func scanOrg(sc interface{ Scan(...any) error }) (store.Org, error) {
	var o store.Org
	err := sc.Scan(&o.ID, &o.Name, &o.Description, &o.CreatedAt, &o.UpdatedAt)
	o.CreatedAt, o.UpdatedAt = o.CreatedAt.UTC(), o.UpdatedAt.UTC()
	return o, err
}

// GetOrg implements store.Store.
func (s *DB) GetOrg(ctx context.Context, name string) (*store.Org, error) {
	o, err := scanOrg(s.qr.QueryRowContext(ctx, s.q(`SELECT `+orgCols+` FROM orgs WHERE name = ?`), name))
	if err != nil {
		return nil, s.classify(err, "")
	}
	return &o, nil
}

// ListOrgs implements store.Store.
func (s *DB) ListOrgs(ctx context.Context, p store.Page) ([]store.Org, error) {
	return list(ctx, s, s.qr, scanOrg,
		`SELECT `+orgCols+` FROM orgs WHERE id > ? ORDER BY id LIMIT ?`, p.After, limitOf(p))
}

// UpdateOrg implements store.Store.
func (s *DB) UpdateOrg(ctx context.Context, o *store.Org) error {
	t := now()
	if err := s.exec(ctx, s.qr, "org name",
		`UPDATE orgs SET name = ?, description = ?, updated_at = ? WHERE id = ?`,
		o.Name, o.Description, t, o.ID); err != nil {
		return err
	}
	o.UpdatedAt = t
	return nil
}

// DeleteOrg implements store.Store. An org that still owns projects,
// groups, providers, slugs or live admin tokens is refused: deleting a
// tenant is never a cascade.
func (s *DB) DeleteOrg(ctx context.Context, id int64) error {
	return s.tx(ctx, func(tx querier) error {
		for _, c := range []struct{ what, query string }{
			{"projects", `SELECT COUNT(*) FROM projects WHERE org_id = ?`},
			{"groups", `SELECT COUNT(*) FROM provider_groups WHERE org_id = ?`},
			{"providers", `SELECT COUNT(*) FROM slugs WHERE org_id = ?`},
			{"admin tokens", `SELECT COUNT(*) FROM admin_tokens WHERE org_id = ? AND revoked_at IS NULL`},
		} {
			var n int
			if err := tx.QueryRowContext(ctx, s.q(c.query), id).Scan(&n); err != nil {
				return s.classify(err, "")
			}
			if n > 0 {
				return &store.InUseError{What: c.what}
			}
		}
		// Revoked tokens scoped to the org go with it: their scope is gone.
		if _, err := tx.ExecContext(ctx, s.q(`DELETE FROM admin_tokens WHERE org_id = ?`), id); err != nil {
			return s.classify(err, "")
		}
		return s.exec(ctx, tx, "", `DELETE FROM orgs WHERE id = ?`, id)
	})
}

// CreateProject implements store.Store.
func (s *DB) CreateProject(ctx context.Context, p *store.Project) error {
	t := now()
	id, err := s.insert(ctx, s.qr, "project name",
		`INSERT INTO projects (org_id, name, description, rpm_limit, tpm_limit, created_at, updated_at, budget_nano, budget_period) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		p.OrgID, p.Name, p.Description, p.RPMLimit, p.TPMLimit, t, t, int64(p.Budget.Amount), p.Budget.Period)
	if err != nil {
		return err
	}
	p.ID, p.CreatedAt, p.UpdatedAt = id, t, t
	return nil
}

const projectCols = `id, org_id, name, description, rpm_limit, tpm_limit, created_at, updated_at, budget_nano, budget_period`

func scanProject(sc interface{ Scan(...any) error }) (store.Project, error) {
	var p store.Project
	err := sc.Scan(&p.ID, &p.OrgID, &p.Name, &p.Description, &p.RPMLimit, &p.TPMLimit, &p.CreatedAt, &p.UpdatedAt, &p.Budget.Amount, &p.Budget.Period)
	p.CreatedAt, p.UpdatedAt = p.CreatedAt.UTC(), p.UpdatedAt.UTC()
	return p, err
}

// GetProject implements store.Store.
func (s *DB) GetProject(ctx context.Context, orgID int64, name string) (*store.Project, error) {
	p, err := scanProject(s.qr.QueryRowContext(ctx,
		s.q(`SELECT `+projectCols+` FROM projects WHERE org_id = ? AND name = ?`), orgID, name))
	if err != nil {
		return nil, s.classify(err, "")
	}
	return &p, nil
}

// ListProjects implements store.Store.
func (s *DB) ListProjects(ctx context.Context, orgID int64, p store.Page) ([]store.Project, error) {
	return list(ctx, s, s.qr, scanProject,
		`SELECT `+projectCols+` FROM projects WHERE org_id = ? AND id > ? ORDER BY id LIMIT ?`, orgID, p.After, limitOf(p))
}

// UpdateProject implements store.Store.
func (s *DB) UpdateProject(ctx context.Context, p *store.Project) error {
	t := now()
	if err := s.exec(ctx, s.qr, "project name",
		`UPDATE projects SET name = ?, description = ?, rpm_limit = ?, tpm_limit = ?, updated_at = ?, budget_nano = ?, budget_period = ? WHERE id = ?`,
		p.Name, p.Description, p.RPMLimit, p.TPMLimit, t, int64(p.Budget.Amount), p.Budget.Period, p.ID); err != nil {
		return err
	}
	p.UpdatedAt = t
	return nil
}

// DeleteProject implements store.Store. A project with routes or keys
// (revoked ones included, for the audit trail) is refused.
func (s *DB) DeleteProject(ctx context.Context, id int64) error {
	return s.tx(ctx, func(tx querier) error {
		for _, c := range []struct{ what, query string }{
			{"routes", `SELECT COUNT(*) FROM routes WHERE project_id = ?`},
			{"virtual keys", `SELECT COUNT(*) FROM virtual_keys WHERE project_id = ?`},
		} {
			var n int
			if err := tx.QueryRowContext(ctx, s.q(c.query), id).Scan(&n); err != nil {
				return s.classify(err, "")
			}
			if n > 0 {
				return &store.InUseError{What: c.what}
			}
		}
		return s.exec(ctx, tx, "", `DELETE FROM projects WHERE id = ?`, id)
	})
}

// list runs a SELECT and scans every row.
func list[T any](ctx context.Context, s *DB, qr querier, scan func(interface{ Scan(...any) error }) (T, error), query string, args ...any) ([]T, error) {
	return listCap(ctx, s, qr, scan, 0, query, args...)
}

// listCap is list into a slice of capacity n, for n rows expected: a
// full load's 100,000 routes are not copied as the slice grows.
func listCap[T any](ctx context.Context, s *DB, qr querier, scan func(interface{ Scan(...any) error }) (T, error), n int, query string, args ...any) ([]T, error) {
	rows, err := qr.QueryContext(ctx, s.q(query), args...)
	if err != nil {
		return nil, s.classify(err, "")
	}
	defer rows.Close()
	var out []T
	if n > 0 {
		out = make([]T, 0, n)
	}
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, s.classify(err, "")
		}
		out = append(out, v)
	}
	return out, s.classify(rows.Err(), "")
}
