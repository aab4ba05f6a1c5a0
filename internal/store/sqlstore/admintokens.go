package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/rolter/rolter/internal/secret"
	"github.com/rolter/rolter/internal/store"
)

// adminTokenCols and adminTokenFrom read a token with its org's name.
const (
	//nolint:gosec // G101: a column list, not a credential
	adminTokenCols = `t.id, t.name, t.hash, COALESCE(t.org_id, 0), COALESCE(o.name, ''), t.lookup, t.source,
		t.expires_at, t.revoked_at, t.created_at`
	//nolint:gosec // G101: a table name, not a credential
	adminTokenFrom = `admin_tokens t LEFT JOIN orgs o ON o.id = t.org_id`
)

func scanAdminToken(sc interface{ Scan(...any) error }) (store.AdminToken, error) {
	var (
		a                store.AdminToken
		hash             string
		expires, revoked sql.NullTime
	)
	if err := sc.Scan(&a.ID, &a.Name, &hash, &a.OrgID, &a.OrgName, &a.Lookup, &a.Source,
		&expires, &revoked, &a.CreatedAt); err != nil {
		return a, err
	}
	a.CreatedAt = a.CreatedAt.UTC()
	a.ExpiresAt, a.RevokedAt = nullTime(expires), nullTime(revoked)
	var err error
	a.Hash, err = secret.ParseHash(hash)
	return a, err
}

// optID stores 0 as NULL, for nullable foreign keys.
func optID(id int64) any {
	if id == 0 {
		return nil
	}
	return id
}

// CreateAdminToken implements store.Store.
func (s *DB) CreateAdminToken(ctx context.Context, a *store.AdminToken) error {
	return s.createAdminToken(ctx, s.qr, a)
}

func (s *DB) createAdminToken(ctx context.Context, qr querier, a *store.AdminToken) error {
	t := now()
	if a.Source == "" {
		a.Source = store.AdminTokenAPI
	}
	id, err := s.insert(ctx, qr, "admin token",
		`INSERT INTO admin_tokens (name, hash, org_id, lookup, source, expires_at, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)`,
		a.Name, a.Hash.Hex(), optID(a.OrgID), a.Lookup, a.Source, optTime(a.ExpiresAt), t)
	if err != nil {
		return err
	}
	a.ID, a.CreatedAt = id, t
	if a.ExpiresAt != nil {
		v := a.ExpiresAt.UTC().Truncate(time.Microsecond)
		a.ExpiresAt = &v
	}
	return nil
}

// CountAdminTokens implements store.Store.
func (s *DB) CountAdminTokens(ctx context.Context) (int, error) {
	var n int
	err := s.qr.QueryRowContext(ctx, `SELECT COUNT(*) FROM admin_tokens`).Scan(&n)
	return n, s.classify(err, "")
}

// GetAdminToken implements store.Store.
func (s *DB) GetAdminToken(ctx context.Context, id int64) (*store.AdminToken, error) {
	a, err := scanAdminToken(s.qr.QueryRowContext(ctx,
		s.q(`SELECT `+adminTokenCols+` FROM `+adminTokenFrom+` WHERE t.id = ?`), id))
	if err != nil {
		return nil, s.classify(err, "")
	}
	return &a, nil
}

// ListAdminTokens implements store.Store.
func (s *DB) ListAdminTokens(ctx context.Context, p store.Page) ([]store.AdminToken, error) {
	return list(ctx, s, s.qr, scanAdminToken,
		`SELECT `+adminTokenCols+` FROM `+adminTokenFrom+` WHERE t.id > ? ORDER BY t.id LIMIT ?`, p.After, limitOf(p))
}

// RevokeAdminToken implements store.Store. On PostgreSQL the live global
// tokens are locked in id order first (all of them, so that two revocations
// cannot deadlock), so two concurrent revocations of the last two serialise
// and the second sees the first one's result; SQLite serialises every
// transaction on its one connection.
func (s *DB) RevokeAdminToken(ctx context.Context, id int64, at time.Time) error {
	at = at.UTC().Truncate(time.Microsecond)
	return s.tx(ctx, func(tx querier) error {
		var (
			org     sql.NullInt64
			revoked sql.NullTime
		)
		err := tx.QueryRowContext(ctx, s.q(`SELECT org_id, revoked_at FROM admin_tokens WHERE id = ?`), id).Scan(&org, &revoked)
		if err != nil {
			return s.classify(err, "")
		}
		if revoked.Valid {
			return nil // already revoked: keep the first time
		}
		if !org.Valid {
			lock := ""
			if s.dialect == dialectPostgres {
				lock = ` FOR UPDATE`
			}
			type row struct {
				id      int64
				expires sql.NullTime
			}
			// Every live global row, this one included, locked in id order:
			// a concurrent revocation waits here, then sees this one's.
			live, err := list(ctx, s, tx, func(sc interface{ Scan(...any) error }) (row, error) {
				var r row
				return r, sc.Scan(&r.id, &r.expires)
			}, `SELECT id, expires_at FROM admin_tokens WHERE org_id IS NULL AND revoked_at IS NULL ORDER BY id`+lock)
			if err != nil {
				return err
			}
			others := 0
			for _, r := range live {
				if r.id != id && (!r.expires.Valid || r.expires.Time.After(at)) {
					others++
				}
			}
			if others == 0 {
				return store.ErrLastAdminToken
			}
		}
		return s.exec(ctx, tx, "", `UPDATE admin_tokens SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL`, at, id)
	})
}

// SetEnvAdminToken implements store.Store.
func (s *DB) SetEnvAdminToken(ctx context.Context, hash *secret.Hash, at time.Time) error {
	at = at.UTC().Truncate(time.Microsecond)
	keep := ""
	if hash != nil {
		keep = hash.Hex()
	}
	return s.tx(ctx, func(tx querier) error {
		if _, err := tx.ExecContext(ctx, s.q(`UPDATE admin_tokens SET revoked_at = ?
			WHERE source = ? AND revoked_at IS NULL AND hash <> ?`), at, store.AdminTokenEnv, keep); err != nil {
			return s.classify(err, "")
		}
		if hash == nil {
			return nil
		}
		var (
			id     int64
			source string
		)
		err := tx.QueryRowContext(ctx, s.q(`SELECT id, source FROM admin_tokens WHERE hash = ?`), keep).Scan(&id, &source)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			return s.createAdminToken(ctx, tx, &store.AdminToken{Name: "ROLTER_ADMIN_TOKEN", Hash: *hash, Source: store.AdminTokenEnv})
		case err != nil:
			return s.classify(err, "")
		case source != store.AdminTokenEnv:
			return &store.ConflictError{What: "admin token"}
		}
		_, err = tx.ExecContext(ctx, s.q(`UPDATE admin_tokens SET revoked_at = NULL WHERE id = ?`), id)
		return s.classify(err, "")
	})
}
