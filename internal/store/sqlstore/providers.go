package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"github.com/rolter/rolter/internal/store"
)

const providerCols = `id, org_id, slug, name, kind, base_url, metadata_source, context_limit, models, settings, created_at, updated_at, deleted_at`

func scanProvider(sc interface{ Scan(...any) error }) (store.Provider, error) {
	var (
		p        store.Provider
		models   string
		settings string
		deleted  sql.NullTime
	)
	err := sc.Scan(&p.ID, &p.OrgID, &p.Slug, &p.Name, &p.Kind, &p.BaseURL, &p.MetadataSource,
		&p.ContextLimit, &models, &settings, &p.CreatedAt, &p.UpdatedAt, &deleted)
	if err != nil {
		return p, err
	}
	p.CreatedAt, p.UpdatedAt = p.CreatedAt.UTC(), p.UpdatedAt.UTC()
	p.DeletedAt = nullTime(deleted)
	// The empty list and object, the columns of most providers, decode
	// without the JSON decoder, to what it would give.
	if models == emptyList {
		p.Models = []string{}
	} else if err := json.Unmarshal([]byte(models), &p.Models); err != nil {
		return p, fmt.Errorf("store: provider %d: models column: %w", p.ID, err)
	}
	if settings != emptyObject {
		if err := json.Unmarshal([]byte(settings), &p.Settings); err != nil {
			return p, fmt.Errorf("store: provider %d: settings column: %w", p.ID, err)
		}
	}
	return p, nil
}

// emptyList and emptyObject are how jsonText writes an empty list and a
// struct whose fields are all omitted: JSON that decodes to a zero value
// (an empty list to an empty slice).
const (
	emptyList   = "[]"
	emptyObject = "{}"
)

func nullTime(t sql.NullTime) *time.Time {
	if !t.Valid {
		return nil
	}
	v := t.Time.UTC()
	return &v
}

func jsonText(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only plain structs and string slices reach here
	}
	return string(b)
}

func stringList(v []string) string {
	if v == nil {
		v = []string{}
	}
	return jsonText(v)
}

// SlugTaken implements store.Store.
func (s *DB) SlugTaken(ctx context.Context, orgID int64, slug string) (bool, error) {
	var n int
	err := s.qr.QueryRowContext(ctx, s.q(`SELECT COUNT(*) FROM slugs WHERE org_id = ? AND slug = ?`), orgID, slug).Scan(&n)
	return n > 0, s.classify(err, "")
}

// SlugHolder implements store.Store.
func (s *DB) SlugHolder(ctx context.Context, orgID int64, slug string) (store.SlugHolder, error) {
	var h store.SlugHolder
	err := s.qr.QueryRowContext(ctx, s.q(`SELECT c.owner_kind,
		CASE WHEN p.deleted_at IS NOT NULL OR g.deleted_at IS NOT NULL THEN 1 ELSE 0 END
		FROM slugs c
		LEFT JOIN providers p ON c.owner_kind = 'provider' AND p.org_id = c.org_id AND p.slug = c.slug
		LEFT JOIN provider_groups g ON c.owner_kind = 'group' AND g.org_id = c.org_id AND g.slug = c.slug
		WHERE c.org_id = ? AND c.slug = ?`), orgID, slug).Scan(&h.Kind, &h.Deleted)
	if err != nil {
		return h, s.classify(err, "")
	}
	return h, nil
}

// CreateProvider implements store.Store.
func (s *DB) CreateProvider(ctx context.Context, p *store.Provider) error {
	t := now()
	return s.tx(ctx, func(tx querier) error {
		if _, err := tx.ExecContext(ctx, s.q(`INSERT INTO slugs (org_id, slug, owner_kind) VALUES (?, ?, 'provider')`), p.OrgID, text(p.Slug)); err != nil {
			return s.classify(err, "slug")
		}
		id, err := s.insert(ctx, tx, "slug",
			`INSERT INTO providers (org_id, slug, name, kind, base_url, metadata_source, context_limit, models, settings, created_at, updated_at)
			 VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			p.OrgID, p.Slug, p.Name, p.Kind, p.BaseURL, p.MetadataSource, p.ContextLimit,
			stringList(p.Models), jsonText(p.Settings), t, t)
		if err != nil {
			return err
		}
		p.ID, p.CreatedAt, p.UpdatedAt = id, t, t
		for i := range p.Keys {
			p.Keys[i].ProviderID = id
			if err := s.addKey(ctx, tx, &p.Keys[i], t); err != nil {
				return err
			}
		}
		return nil
	})
}

func (s *DB) addKey(ctx context.Context, qr querier, k *store.ProviderKey, t time.Time) error {
	id, err := s.insert(ctx, qr, "provider key",
		`INSERT INTO provider_keys (provider_id, secret, weight, ref, created_at) VALUES (?, ?, ?, ?, ?)`,
		k.ProviderID, s.sealer.Seal(k.Secret), k.Weight, k.Ref, t)
	if err != nil {
		return err
	}
	k.ID, k.CreatedAt = id, t
	return nil
}

// GetProvider implements store.Store. Keys come without their secrets: only
// Load opens them, for the snapshot.
func (s *DB) GetProvider(ctx context.Context, orgID int64, slug string) (*store.Provider, error) {
	return getWith(ctx, s, scanProvider, s.attachKeys,
		`SELECT `+providerCols+` FROM providers WHERE org_id = ? AND slug = ?`, orgID, slug)
}

// ListProviders implements store.Store.
func (s *DB) ListProviders(ctx context.Context, orgID int64, p store.Page) ([]store.Provider, error) {
	return listWith(ctx, s, scanProvider, s.attachKeys,
		`SELECT `+providerCols+` FROM providers WHERE org_id = ? AND id > ? ORDER BY id LIMIT ?`, orgID, p.After, limitOf(p))
}

// providerKeys are the children attachKeys reads.
var providerKeys = childTable[store.Provider, store.ProviderKey]{
	selectFrom: `SELECT id, provider_id, secret, weight, ref, created_at FROM provider_keys`,
	parentCol:  "provider_id",
	orderBy:    ` ORDER BY id`,
	id:         func(p *store.Provider) int64 { return p.ID },
	children:   func(p *store.Provider) *[]store.ProviderKey { return &p.Keys },
}

// attachKeys fills Keys of every provider in ps with one query. open
// decrypts the secrets; without it Secret stays empty.
func (s *DB) attachKeys(ctx context.Context, qr querier, ps []store.Provider, open bool) error {
	return s.attachKeysOf(ctx, qr, ps, open, open)
}

// attachKeysOf fills the keys of ps: every key row read when all, those of
// ps otherwise; their secrets opened when open.
func (s *DB) attachKeysOf(ctx context.Context, qr querier, ps []store.Provider, all, open bool) error {
	return attachChildren(ctx, s, qr, ps, all, providerKeys, func(sc interface{ Scan(...any) error }) (int64, store.ProviderKey, error) {
		var (
			k      store.ProviderKey
			sealed string
		)
		if err := sc.Scan(&k.ID, &k.ProviderID, &sealed, &k.Weight, &k.Ref, &k.CreatedAt); err != nil {
			return 0, k, err
		}
		k.CreatedAt = k.CreatedAt.UTC()
		if open {
			var err error
			if k.Secret, err = s.sealer.Open(sealed); err != nil {
				return 0, k, fmt.Errorf("store: provider key %d: %w", k.ID, err)
			}
		}
		return k.ProviderID, k, nil
	})
}

// UpdateProvider implements store.Store.
func (s *DB) UpdateProvider(ctx context.Context, p *store.Provider) error {
	t := now()
	return s.tx(ctx, func(tx querier) error {
		var old string
		if err := tx.QueryRowContext(ctx, s.q(`SELECT slug FROM providers WHERE id = ?`), p.ID).Scan(&old); err != nil {
			return s.classify(err, "")
		}
		if old != p.Slug {
			if _, err := tx.ExecContext(ctx, s.q(`INSERT INTO slugs (org_id, slug, owner_kind) VALUES (?, ?, 'provider')`), p.OrgID, text(p.Slug)); err != nil {
				return s.classify(err, "slug")
			}
			if err := s.exec(ctx, tx, "", `DELETE FROM slugs WHERE org_id = ? AND slug = ?`, p.OrgID, old); err != nil {
				return err
			}
		}
		if err := s.exec(ctx, tx, "slug",
			`UPDATE providers SET slug = ?, name = ?, kind = ?, base_url = ?, metadata_source = ?, context_limit = ?, models = ?, settings = ?, updated_at = ?
			 WHERE id = ?`,
			p.Slug, p.Name, p.Kind, p.BaseURL, p.MetadataSource, p.ContextLimit,
			stringList(p.Models), jsonText(p.Settings), t, p.ID); err != nil {
			return err
		}
		p.UpdatedAt = t
		return nil
	})
}

// SoftDeleteProvider implements store.Store.
func (s *DB) SoftDeleteProvider(ctx context.Context, id int64, at time.Time) error {
	return s.exec(ctx, s.qr, "", `UPDATE providers SET deleted_at = ?, updated_at = ? WHERE id = ? AND deleted_at IS NULL`,
		at.UTC().Truncate(time.Microsecond), now(), id)
}

// PurgeProvider implements store.Store. It is refused while route targets
// or group members name the provider, and by the allowlist rule
// (purgeAllowlist).
func (s *DB) PurgeProvider(ctx context.Context, id int64, force bool) ([]store.AllowlistRef, error) {
	// Soft delete is always allowed (the snapshot drops the provider
	// from rotation); purge waits until nothing names it.
	// Membership of a soft-deleted group (which only holds its slug)
	// does not count, and goes with the provider.
	inUse := func(tx querier) error {
		for _, c := range []struct{ what, query string }{
			{"route targets", `SELECT COUNT(*) FROM route_targets WHERE provider_id = ?`},
			{"group members", `SELECT COUNT(*) FROM group_members m JOIN provider_groups g ON g.id = m.group_id WHERE m.provider_id = ? AND g.deleted_at IS NULL`},
		} {
			var n int
			if err := tx.QueryRowContext(ctx, s.q(c.query), id).Scan(&n); err != nil {
				return s.classify(err, "")
			}
			if n > 0 {
				return &store.InUseError{What: c.what}
			}
		}
		return nil
	}
	return s.purgeSlugOwner(ctx, "providers", id, force, inUse, func(tx querier, org int64, slug string) error {
		if _, err := tx.ExecContext(ctx, s.q(`DELETE FROM group_members WHERE provider_id = ?`), id); err != nil {
			return s.classify(err, "")
		}
		if err := s.exec(ctx, tx, "", `DELETE FROM provider_keys WHERE provider_id = ?`, id); err != nil && err != store.ErrNotFound {
			return err
		}
		if err := s.exec(ctx, tx, "", `DELETE FROM providers WHERE id = ?`, id); err != nil {
			return err
		}
		return s.exec(ctx, tx, "", `DELETE FROM slugs WHERE org_id = ? AND slug = ?`, org, slug)
	})
}

// AddProviderKey implements store.Store.
func (s *DB) AddProviderKey(ctx context.Context, k *store.ProviderKey) error {
	return s.addKey(ctx, s.qr, k, now())
}

// SetProviderKeyWeight implements store.Store.
func (s *DB) SetProviderKeyWeight(ctx context.Context, providerID, keyID int64, weight int) error {
	return s.exec(ctx, s.qr, "", `UPDATE provider_keys SET weight = ? WHERE id = ? AND provider_id = ?`, weight, keyID, providerID)
}

// SetProviderKeyRef implements store.Store.
func (s *DB) SetProviderKeyRef(ctx context.Context, providerID, keyID int64, ref string) error {
	return s.exec(ctx, s.qr, "", `UPDATE provider_keys SET ref = ? WHERE id = ? AND provider_id = ?`, ref, keyID, providerID)
}

// DeleteProviderKey implements store.Store.
func (s *DB) DeleteProviderKey(ctx context.Context, providerID, keyID int64) error {
	return s.exec(ctx, s.qr, "", `DELETE FROM provider_keys WHERE id = ? AND provider_id = ?`, keyID, providerID)
}
