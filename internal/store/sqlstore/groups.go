package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"github.com/rolter/rolter/internal/store"
)

const groupCols = `id, org_id, slug, name, strategy, policy, created_at, updated_at, deleted_at`

func scanGroup(sc interface{ Scan(...any) error }) (store.Group, error) {
	var (
		g       store.Group
		policy  string
		deleted sql.NullTime
	)
	if err := sc.Scan(&g.ID, &g.OrgID, &g.Slug, &g.Name, &g.Strategy, &policy, &g.CreatedAt, &g.UpdatedAt, &deleted); err != nil {
		return g, err
	}
	g.CreatedAt, g.UpdatedAt, g.DeletedAt = g.CreatedAt.UTC(), g.UpdatedAt.UTC(), nullTime(deleted)
	if err := json.Unmarshal([]byte(policy), &g.Policy); err != nil {
		return g, fmt.Errorf("store: group %d: policy column: %w", g.ID, err)
	}
	return g, nil
}

func modelMap(m map[string]string) string {
	if m == nil {
		m = map[string]string{}
	}
	return jsonText(m)
}

// CreateGroup implements store.Store.
func (s *DB) CreateGroup(ctx context.Context, g *store.Group) error {
	t := now()
	return s.tx(ctx, func(tx querier) error {
		if _, err := tx.ExecContext(ctx, s.q(`INSERT INTO slugs (org_id, slug, owner_kind) VALUES (?, ?, 'group')`), g.OrgID, text(g.Slug)); err != nil {
			return s.classify(err, "slug")
		}
		id, err := s.insert(ctx, tx, "slug",
			`INSERT INTO provider_groups (org_id, slug, name, strategy, policy, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)`,
			g.OrgID, g.Slug, g.Name, g.Strategy, jsonText(g.Policy), t, t)
		if err != nil {
			return err
		}
		g.ID, g.CreatedAt, g.UpdatedAt = id, t, t
		return s.insertMembers(ctx, tx, g.ID, g.OrgID, g.Members)
	})
}

// insertMembers writes members in order. A member must be a provider of the
// group's org: the insert selects it by id and org, so a caller's mistake
// can never route one tenant's group to another tenant's credentials.
func (s *DB) insertMembers(ctx context.Context, tx querier, groupID, orgID int64, ms []store.GroupMember) error {
	for i, m := range ms {
		res, err := tx.ExecContext(ctx, s.q(`INSERT INTO group_members (group_id, provider_id, weight, model_map, position)
			SELECT ?, id, ?, ?, ? FROM providers WHERE id = ? AND org_id = ?`),
			groupID, m.Weight, modelMap(m.ModelMap), i, m.ProviderID, orgID)
		if err != nil {
			return s.classify(err, "group member")
		}
		if n, err := res.RowsAffected(); err == nil && n == 0 {
			return fmt.Errorf("%w: member provider %d is not a provider of org %d", store.ErrNotFound, m.ProviderID, orgID)
		}
	}
	return nil
}

// GetGroup implements store.Store.
func (s *DB) GetGroup(ctx context.Context, orgID int64, slug string) (*store.Group, error) {
	return getWith(ctx, s, scanGroup, s.attachMembers,
		`SELECT `+groupCols+` FROM provider_groups WHERE org_id = ? AND slug = ?`, orgID, slug)
}

// ListGroups implements store.Store.
func (s *DB) ListGroups(ctx context.Context, orgID int64, p store.Page) ([]store.Group, error) {
	return listWith(ctx, s, scanGroup, s.attachMembers,
		`SELECT `+groupCols+` FROM provider_groups WHERE org_id = ? AND id > ? ORDER BY id LIMIT ?`, orgID, p.After, limitOf(p))
}

// groupMembers are the children attachMembers reads, in the group's order.
var groupMembers = childTable[store.Group, store.GroupMember]{
	selectFrom: `SELECT m.group_id, m.provider_id, p.slug, m.weight, m.model_map
		FROM group_members m JOIN providers p ON p.id = m.provider_id`,
	parentCol: "m.group_id",
	orderBy:   ` ORDER BY m.group_id, m.position`,
	id:        func(g *store.Group) int64 { return g.ID },
	children:  func(g *store.Group) *[]store.GroupMember { return &g.Members },
}

// attachMembers fills Members (with ProviderSlug) for gs; all reads every
// member (for Load). Soft-deleted providers stay listed: the snapshot
// leaves them out of rotation.
func (s *DB) attachMembers(ctx context.Context, qr querier, gs []store.Group, all bool) error {
	return attachChildren(ctx, s, qr, gs, all, groupMembers, func(sc interface{ Scan(...any) error }) (int64, store.GroupMember, error) {
		var (
			m     store.GroupMember
			group int64
			mm    string
		)
		if err := sc.Scan(&group, &m.ProviderID, &m.ProviderSlug, &m.Weight, &mm); err != nil {
			return 0, m, err
		}
		if err := json.Unmarshal([]byte(mm), &m.ModelMap); err != nil {
			return 0, m, fmt.Errorf("store: group %d member %d: model_map column: %w", group, m.ProviderID, err)
		}
		return group, m, nil
	})
}

// UpdateGroup implements store.Store. The org comes from the stored row: a
// group never moves between orgs.
func (s *DB) UpdateGroup(ctx context.Context, g *store.Group) error {
	t := now()
	return s.tx(ctx, func(tx querier) error {
		var (
			org int64
			old string
		)
		if err := tx.QueryRowContext(ctx, s.q(`SELECT org_id, slug FROM provider_groups WHERE id = ?`), g.ID).Scan(&org, &old); err != nil {
			return s.classify(err, "")
		}
		if old != g.Slug {
			if _, err := tx.ExecContext(ctx, s.q(`INSERT INTO slugs (org_id, slug, owner_kind) VALUES (?, ?, 'group')`), org, text(g.Slug)); err != nil {
				return s.classify(err, "slug")
			}
			if err := s.exec(ctx, tx, "", `DELETE FROM slugs WHERE org_id = ? AND slug = ? AND owner_kind = 'group'`, org, old); err != nil {
				return err
			}
		}
		if err := s.exec(ctx, tx, "slug",
			`UPDATE provider_groups SET slug = ?, name = ?, strategy = ?, policy = ?, updated_at = ? WHERE id = ?`,
			g.Slug, g.Name, g.Strategy, jsonText(g.Policy), t, g.ID); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, s.q(`DELETE FROM group_members WHERE group_id = ?`), g.ID); err != nil {
			return s.classify(err, "")
		}
		if err := s.insertMembers(ctx, tx, g.ID, org, g.Members); err != nil {
			return err
		}
		g.OrgID, g.UpdatedAt = org, t
		return nil
	})
}

// SoftDeleteGroup implements store.Store. The row, its members and its
// slug claim stay; the snapshot leaves the group out of routing.
func (s *DB) SoftDeleteGroup(ctx context.Context, id int64, at time.Time) error {
	return s.exec(ctx, s.qr, "", `UPDATE provider_groups SET deleted_at = ?, updated_at = ? WHERE id = ? AND deleted_at IS NULL`,
		at.UTC().Truncate(time.Microsecond), now(), id)
}

// PurgeGroup implements store.Store: the group, its members and its slug
// claim go in one transaction, after the allowlist rule (purgeAllowlist).
func (s *DB) PurgeGroup(ctx context.Context, id int64, force bool) ([]store.AllowlistRef, error) {
	return s.purgeSlugOwner(ctx, "provider_groups", id, force, nil, func(tx querier, org int64, slug string) error {
		if _, err := tx.ExecContext(ctx, s.q(`DELETE FROM group_members WHERE group_id = ?`), id); err != nil {
			return s.classify(err, "")
		}
		if err := s.exec(ctx, tx, "", `DELETE FROM provider_groups WHERE id = ?`, id); err != nil {
			return err
		}
		return s.exec(ctx, tx, "", `DELETE FROM slugs WHERE org_id = ? AND slug = ? AND owner_kind = 'group'`, org, slug)
	})
}
