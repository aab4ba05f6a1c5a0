package sqlstore

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/rolter/rolter/internal/store"
)

// purgeSlugOwner is the purge path shared by the rows that own a slug
// (providers, groups), in one transaction: it locks the row of table,
// runs check (nil: none), applies the allowlist rule (purgeAllowlist)
// and then remove, which deletes the row, what hangs on it and its slug
// claim. It returns the keys the allowlist rule changed.
func (s *DB) purgeSlugOwner(ctx context.Context, table string, id int64, force bool,
	check func(tx querier) error, remove func(tx querier, org int64, slug string) error) ([]store.AllowlistRef, error) {
	var refs []store.AllowlistRef
	err := s.tx(ctx, func(tx querier) error {
		var (
			org  int64
			slug string
		)
		if err := tx.QueryRowContext(ctx, s.q(`SELECT org_id, slug FROM `+table+` WHERE id = ?`+s.forUpdate()), id).Scan(&org, &slug); err != nil {
			return s.classify(err, "")
		}
		if check != nil {
			if err := check(tx); err != nil {
				return err
			}
		}
		var err error
		if refs, err = s.purgeAllowlist(ctx, tx, org, slug, force); err != nil {
			return err
		}
		return remove(tx, org, slug)
	})
	if err != nil {
		return nil, err
	}
	return refs, nil
}

// purgeAllowlist applies the allowlist rule of a purge (design 000 §3: a
// freed slug is never silently re-pointed) inside the purge's
// transaction. The live virtual keys of the org whose allowlist names slug
// ("slug/*", "slug/model") refuse the purge with an *AllowlistError;
// with force their entries naming it are removed, and a key left with
// none is revoked, since an empty allowlist would allow every model. It
// returns the keys it changed.
func (s *DB) purgeAllowlist(ctx context.Context, tx querier, orgID int64, slug string, force bool) ([]store.AllowlistRef, error) {
	// slug is [a-z0-9-]: nothing in it is special to LIKE. The pattern
	// only narrows the rows (SQLite's LIKE ignores case); the match is
	// exact below.
	rows, err := tx.QueryContext(ctx, s.q(`SELECT k.id, k.name, p.name, k.models FROM virtual_keys k JOIN projects p ON p.id = k.project_id
		WHERE p.org_id = ? AND k.revoked_at IS NULL AND k.models LIKE ? ORDER BY k.id`), orgID, `%"`+slug+`/%`)
	if err != nil {
		return nil, s.classify(err, "")
	}
	defer rows.Close()
	type hit struct {
		ref  store.AllowlistRef
		kept []string
	}
	var hits []hit
	for rows.Next() {
		var (
			h      hit
			models string
			all    []string
		)
		if err := rows.Scan(&h.ref.KeyID, &h.ref.Name, &h.ref.Project, &models); err != nil {
			return nil, s.classify(err, "")
		}
		if err := json.Unmarshal([]byte(models), &all); err != nil {
			return nil, fmt.Errorf("store: virtual key %d: models column: %w", h.ref.KeyID, err)
		}
		for _, m := range all {
			if strings.HasPrefix(m, slug+"/") {
				h.ref.Entries = append(h.ref.Entries, m)
			} else {
				h.kept = append(h.kept, m)
			}
		}
		if len(h.ref.Entries) > 0 {
			hits = append(hits, h)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, s.classify(err, "")
	}
	if err := rows.Close(); err != nil { // before the updates below, on the same connection
		return nil, s.classify(err, "")
	}
	refs := make([]store.AllowlistRef, 0, len(hits))
	for _, h := range hits {
		h.ref.Revoked = force && len(h.kept) == 0
		refs = append(refs, h.ref)
	}
	if len(refs) == 0 {
		return nil, nil
	}
	if !force {
		return nil, &store.AllowlistError{Slug: slug, Keys: refs}
	}
	t := now()
	for _, h := range hits {
		if len(h.kept) == 0 {
			err = s.exec(ctx, tx, "", `UPDATE virtual_keys SET revoked_at = ? WHERE id = ?`, t, h.ref.KeyID)
		} else {
			err = s.exec(ctx, tx, "", `UPDATE virtual_keys SET models = ? WHERE id = ?`, stringList(slices.Clip(h.kept)), h.ref.KeyID)
		}
		if err != nil {
			return nil, err
		}
	}
	return refs, nil
}
