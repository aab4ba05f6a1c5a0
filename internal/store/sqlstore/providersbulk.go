package sqlstore

import (
	"context"
	"fmt"
	"slices"

	"github.com/rolter/rolter/internal/store"
)

// CreateProviders claims the slugs of ps and inserts them and their keys
// in one transaction (a savepoint of a bound DB's), as CreateProvider does
// for each, a statement per bulkRows rows of each table, and sets their
// ids and times: a slug taken (by another provider or group, or by another
// of ps) fails the whole call, with CreateProvider's error, and writes
// nothing. The providers must all be of one org or have distinct slugs.
func (s *DB) CreateProviders(ctx context.Context, ps []*store.Provider) error {
	t := now()
	return s.tx(ctx, func(tx querier) error {
		type key struct {
			org  int64
			slug string
		}
		byKey := make(map[key]*store.Provider, len(ps))
		for _, p := range ps {
			byKey[key{p.OrgID, text(p.Slug)}] = p
		}
		for chunk := range slices.Chunk(ps, bulkRows) {
			args := make([]any, 0, 2*len(chunk))
			for _, p := range chunk {
				args = append(args, p.OrgID, p.Slug)
			}
			if _, err := tx.ExecContext(ctx, s.q(`INSERT INTO slugs (org_id, slug, owner_kind) VALUES `+
				placeholdersWith(len(chunk), "?, ?, 'provider'")), textArgs(args)...); err != nil {
				return s.classify(err, "slug")
			}
		}
		for chunk := range slices.Chunk(ps, bulkRows) {
			args := make([]any, 0, 11*len(chunk))
			for _, p := range chunk {
				args = append(args, p.OrgID, p.Slug, p.Name, p.Kind, p.BaseURL, p.MetadataSource, p.ContextLimit,
					stringList(p.Models), jsonText(p.Settings), t, t)
			}
			err := s.queryEach(ctx, tx, "slug",
				`INSERT INTO providers (org_id, slug, name, kind, base_url, metadata_source, context_limit, models, settings, created_at, updated_at)
				 VALUES `+placeholders(len(chunk), 11)+` RETURNING id, org_id, slug`, args,
				func(sc func(...any) error) error {
					var (
						id int64
						k  key
					)
					if err := sc(&id, &k.org, &k.slug); err != nil {
						return err
					}
					p := byKey[k]
					if p == nil {
						return fmt.Errorf("store: inserted provider %d (org %d, slug %q) is none of the batch's", id, k.org, k.slug)
					}
					p.ID, p.CreatedAt, p.UpdatedAt = id, t, t
					return nil
				})
			if err != nil {
				return err
			}
		}
		var keys []*store.ProviderKey
		for _, p := range ps {
			for i := range p.Keys {
				p.Keys[i].ProviderID = p.ID
				keys = append(keys, &p.Keys[i])
			}
		}
		// A key is known by what its row holds: its provider, sealed
		// secret, weight and ref, as RETURNING answers them. Keys alike
		// in all of these are interchangeable: each takes one of their
		// ids. Nothing is assumed of the order of the returned rows.
		type keyRow struct {
			provider int64
			sealed   string
			weight   int
			ref      string
		}
		for chunk := range slices.Chunk(keys, bulkRows) {
			args := make([]any, 0, 5*len(chunk))
			pending := make(map[keyRow][]*store.ProviderKey, len(chunk))
			for _, k := range chunk {
				sealed := s.sealer.Seal(k.Secret)
				args = append(args, k.ProviderID, sealed, k.Weight, k.Ref, t)
				r := keyRow{k.ProviderID, text(sealed), k.Weight, text(k.Ref)}
				pending[r] = append(pending[r], k)
			}
			n := 0
			err := s.queryEach(ctx, tx, "provider key",
				`INSERT INTO provider_keys (provider_id, secret, weight, ref, created_at) VALUES `+placeholders(len(chunk), 5)+
					` RETURNING id, provider_id, secret, weight, ref`, args,
				func(sc func(...any) error) error {
					var (
						id int64
						r  keyRow
					)
					if err := sc(&id, &r.provider, &r.sealed, &r.weight, &r.ref); err != nil {
						return err
					}
					ks := pending[r]
					if len(ks) == 0 {
						return fmt.Errorf("store: inserted provider key %d (provider %d) is none of the batch's", id, r.provider)
					}
					ks[0].ID, ks[0].CreatedAt = id, t
					pending[r] = ks[1:]
					n++
					return nil
				})
			if err != nil {
				return err
			}
			if n != len(chunk) {
				return fmt.Errorf("store: %d provider keys inserted, %d ids returned", len(chunk), n)
			}
		}
		return nil
	})
}
