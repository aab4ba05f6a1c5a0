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
		// A key is known by its provider and its place among the
		// provider's keys: ids are drawn in the order of the rows.
		for chunk := range slices.Chunk(keys, bulkRows) {
			args := make([]any, 0, 5*len(chunk))
			for _, k := range chunk {
				args = append(args, k.ProviderID, s.sealer.Seal(k.Secret), k.Weight, k.Ref, t)
			}
			var ids []int64
			err := s.queryEach(ctx, tx, "provider key",
				`INSERT INTO provider_keys (provider_id, secret, weight, ref, created_at) VALUES `+placeholders(len(chunk), 5)+` RETURNING id`, args,
				func(sc func(...any) error) error {
					var id int64
					if err := sc(&id); err != nil {
						return err
					}
					ids = append(ids, id)
					return nil
				})
			if err != nil {
				return err
			}
			if len(ids) != len(chunk) {
				return fmt.Errorf("store: %d provider keys inserted, %d ids returned", len(chunk), len(ids))
			}
			slices.Sort(ids)
			for i, k := range chunk {
				k.ID, k.CreatedAt = ids[i], t
			}
		}
		return nil
	})
}
