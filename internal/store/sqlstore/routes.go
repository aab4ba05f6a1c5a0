package sqlstore

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/rolter/rolter/internal/money"
	"github.com/rolter/rolter/internal/secret"
	"github.com/rolter/rolter/internal/store"
)

// routeCols are the columns scanRoute reads; the timestamps are read as
// text on SQLite (timeText).
func (s *DB) routeCols() string {
	return `id, project_id, model, strategy, policy, rpm_limit, tpm_limit, fallbacks, context_fallback, ` +
		s.timeText("created_at") + `, ` + s.timeText("updated_at")
}

func scanRoute(sc interface{ Scan(...any) error }) (store.Route, error) { return routeScanner()(sc) }

// routeScanner returns a scan of route rows that reuses its destinations
// from row to row (a catalog load reads 100,000 routes at start-up): use
// one for the rows of one query.
func routeScanner() func(sc interface{ Scan(...any) error }) (store.Route, error) {
	var (
		r         store.Route
		policy    string
		fallbacks string
	)
	dest := []any{&r.ID, &r.ProjectID, &r.Model, &r.Strategy, &policy, &r.RPMLimit, &r.TPMLimit, &fallbacks, &r.ContextFallback,
		(*scanTime)(&r.CreatedAt), (*scanTime)(&r.UpdatedAt)}
	return func(sc interface{ Scan(...any) error }) (store.Route, error) {
		r = store.Route{}
		if err := sc.Scan(dest...); err != nil {
			return r, err
		}
		// Most routes have neither fallbacks nor a policy: their columns
		// decode to the zero values without the JSON decoder.
		if fallbacks != emptyList {
			if err := json.Unmarshal([]byte(fallbacks), &r.Fallbacks); err != nil {
				return r, fmt.Errorf("store: route %d: fallbacks column: %w", r.ID, err)
			}
		}
		if len(r.Fallbacks) == 0 {
			r.Fallbacks = nil
		}
		if policy != emptyObject {
			if err := json.Unmarshal([]byte(policy), &r.Policy); err != nil {
				return r, fmt.Errorf("store: route %d: policy column: %w", r.ID, err)
			}
		}
		return r, nil
	}
}

// CreateRoute implements store.Store.
func (s *DB) CreateRoute(ctx context.Context, r *store.Route) error {
	t := now()
	return s.tx(ctx, func(tx querier) error {
		id, err := s.insert(ctx, tx, "route model",
			`INSERT INTO routes (project_id, model, strategy, policy, rpm_limit, tpm_limit, fallbacks, context_fallback, created_at, updated_at)
			 VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			r.ProjectID, r.Model, r.Strategy, jsonText(r.Policy), r.RPMLimit, r.TPMLimit, stringList(r.Fallbacks), r.ContextFallback, t, t)
		if err != nil {
			return err
		}
		r.ID, r.CreatedAt, r.UpdatedAt = id, t, t
		return s.insertTargets(ctx, tx, r)
	})
}

func (s *DB) insertTargets(ctx context.Context, tx querier, r *store.Route) error {
	for i := range r.Targets {
		tg := &r.Targets[i]
		id, err := s.insert(ctx, tx, "route target",
			`INSERT INTO route_targets (route_id, provider_id, upstream_model, weight, priority, position, context_limit, input_price, output_price)
			 VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			r.ID, tg.ProviderID, tg.UpstreamModel, tg.Weight, tg.Priority, i, tg.ContextLimit, priceArg(tg.Prices, false), priceArg(tg.Prices, true))
		if err != nil {
			return err
		}
		tg.ID = id
	}
	return nil
}

// GetRoute implements store.Store.
func (s *DB) GetRoute(ctx context.Context, projectID int64, model string) (*store.Route, error) {
	return getWith(ctx, s, scanRoute, s.attachTargets,
		`SELECT `+s.routeCols()+` FROM routes WHERE project_id = ? AND model = ?`, projectID, model)
}

// ListRoutes implements store.Store.
func (s *DB) ListRoutes(ctx context.Context, projectID int64, p store.Page) ([]store.Route, error) {
	return listWith(ctx, s, scanRoute, s.attachTargets,
		`SELECT `+s.routeCols()+` FROM routes WHERE project_id = ? AND id > ? ORDER BY id LIMIT ?`, projectID, p.After, limitOf(p))
}

// withFallbacks selects a project's routes that name a fallback or a
// context fallback. Its second term is the condition of the partial index
// routes_with_fallbacks (migration 00017) word for word, as SQLite needs
// to use the index.
const withFallbacks = `project_id = ? AND (fallbacks <> '[]' OR context_fallback <> '')`

// FallbackRoutes implements store.Store.
func (s *DB) FallbackRoutes(ctx context.Context, projectID int64, models []string) ([]store.Route, error) {
	rs, err := list(ctx, s, s.qr, routeScanner(), `SELECT `+s.routeCols()+` FROM routes WHERE `+withFallbacks+` ORDER BY id`, projectID)
	if err != nil || len(models) == 0 {
		return rs, err
	}
	args := make([]any, 0, 1+len(models))
	args = append(args, projectID)
	for _, m := range models {
		args = append(args, m)
	}
	named, err := list(ctx, s, s.qr, routeScanner(),
		`SELECT `+s.routeCols()+` FROM routes WHERE project_id = ? AND model IN (?`+strings.Repeat(", ?", len(models)-1)+`)`, args...)
	if err != nil {
		return nil, err
	}
	for _, r := range named {
		if !slices.ContainsFunc(rs, func(o store.Route) bool { return o.ID == r.ID }) {
			rs = append(rs, r)
		}
	}
	slices.SortFunc(rs, func(a, b store.Route) int { return cmp.Compare(a.ID, b.ID) })
	return rs, nil
}

// routeTargets are the children attachTargets reads, in the route's order.
var routeTargets = childTable[store.Route, store.Target]{
	selectFrom: `SELECT t.id, t.route_id, t.provider_id, p.slug, t.upstream_model, t.weight, t.priority, t.context_limit, t.input_price, t.output_price
		FROM route_targets t JOIN providers p ON p.id = t.provider_id`,
	parentCol: "t.route_id",
	orderBy:   ` ORDER BY t.route_id, t.position`,
	id:        func(r *store.Route) int64 { return r.ID },
	children:  func(r *store.Route) *[]store.Target { return &r.Targets },
}

// attachTargets fills Targets for rs; all reads every target (for Load).
func (s *DB) attachTargets(ctx context.Context, qr querier, rs []store.Route, all bool) error {
	var (
		tg      store.Target
		route   int64
		in, out sql.NullInt64
	)
	// The destinations are reused from row to row (a catalog load reads
	// a target or more for each of 100,000 routes).
	dest := []any{&tg.ID, &route, &tg.ProviderID, &tg.ProviderSlug, &tg.UpstreamModel, &tg.Weight, &tg.Priority, &tg.ContextLimit, &in, &out}
	return attachChildren(ctx, s, qr, rs, all, routeTargets, func(sc interface{ Scan(...any) error }) (int64, store.Target, error) {
		tg = store.Target{}
		if err := sc.Scan(dest...); err != nil {
			return 0, tg, err
		}
		if in.Valid && out.Valid {
			tg.Prices = &store.Prices{Input: money.Price(in.Int64), Output: money.Price(out.Int64)}
		}
		return route, tg, nil
	})
}

// UpdateRoute implements store.Store.
func (s *DB) UpdateRoute(ctx context.Context, r *store.Route) error {
	t := now()
	return s.tx(ctx, func(tx querier) error {
		if err := s.exec(ctx, tx, "route model",
			`UPDATE routes SET model = ?, strategy = ?, policy = ?, rpm_limit = ?, tpm_limit = ?, fallbacks = ?, context_fallback = ?, updated_at = ? WHERE id = ?`,
			r.Model, r.Strategy, jsonText(r.Policy), r.RPMLimit, r.TPMLimit, stringList(r.Fallbacks), r.ContextFallback, t, r.ID); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, s.q(`DELETE FROM route_targets WHERE route_id = ?`), r.ID); err != nil {
			return s.classify(err, "")
		}
		r.UpdatedAt = t
		return s.insertTargets(ctx, tx, r)
	})
}

// DeleteRoute implements store.Store.
func (s *DB) DeleteRoute(ctx context.Context, id int64) error {
	return s.tx(ctx, func(tx querier) error {
		if _, err := tx.ExecContext(ctx, s.q(`DELETE FROM route_targets WHERE route_id = ?`), id); err != nil {
			return s.classify(err, "")
		}
		return s.exec(ctx, tx, "", `DELETE FROM routes WHERE id = ?`, id)
	})
}

const vkeyCols = `id, project_id, name, lookup, hash, models, rpm_limit, tpm_limit, expires_at, revoked_at, created_at, budget_nano, budget_period`

func scanVirtualKey(sc interface{ Scan(...any) error }) (store.VirtualKey, error) {
	var (
		k                store.VirtualKey
		hash, models     string
		expires, revoked sql.NullTime
	)
	if err := sc.Scan(&k.ID, &k.ProjectID, &k.Name, &k.Lookup, &hash, &models, &k.RPMLimit, &k.TPMLimit,
		&expires, &revoked, &k.CreatedAt, &k.Budget.Amount, &k.Budget.Period); err != nil {
		return k, err
	}
	k.CreatedAt = k.CreatedAt.UTC()
	k.ExpiresAt, k.RevokedAt = nullTime(expires), nullTime(revoked)
	var err error
	if k.Hash, err = secret.ParseHash(hash); err != nil {
		return k, fmt.Errorf("store: virtual key %d: %w", k.ID, err)
	}
	if err := json.Unmarshal([]byte(models), &k.Models); err != nil {
		return k, fmt.Errorf("store: virtual key %d: models column: %w", k.ID, err)
	}
	return k, nil
}

func optTime(t *time.Time) any {
	if t == nil {
		return nil
	}
	return t.UTC().Truncate(time.Microsecond)
}

// CreateVirtualKey implements store.Store.
func (s *DB) CreateVirtualKey(ctx context.Context, k *store.VirtualKey) error {
	t := now()
	id, err := s.insert(ctx, s.qr, "virtual key",
		`INSERT INTO virtual_keys (project_id, name, lookup, hash, models, rpm_limit, tpm_limit, expires_at, created_at, budget_nano, budget_period)
		 VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		k.ProjectID, k.Name, k.Lookup, k.Hash.Hex(), stringList(k.Models), k.RPMLimit, k.TPMLimit, optTime(k.ExpiresAt), t,
		int64(k.Budget.Amount), k.Budget.Period)
	if err != nil {
		return err
	}
	k.ID, k.CreatedAt = id, t
	if k.ExpiresAt != nil {
		v := k.ExpiresAt.UTC().Truncate(time.Microsecond)
		k.ExpiresAt = &v
	}
	return nil
}

// GetVirtualKey implements store.Store.
func (s *DB) GetVirtualKey(ctx context.Context, projectID, id int64) (*store.VirtualKey, error) {
	k, err := scanVirtualKey(s.qr.QueryRowContext(ctx,
		s.q(`SELECT `+vkeyCols+` FROM virtual_keys WHERE project_id = ? AND id = ?`), projectID, id))
	if err != nil {
		return nil, s.classify(err, "")
	}
	return &k, nil
}

// ListVirtualKeys implements store.Store.
func (s *DB) ListVirtualKeys(ctx context.Context, projectID int64, p store.Page) ([]store.VirtualKey, error) {
	return list(ctx, s, s.qr, scanVirtualKey,
		`SELECT `+vkeyCols+` FROM virtual_keys WHERE project_id = ? AND id > ? ORDER BY id LIMIT ?`, projectID, p.After, limitOf(p))
}

// RevokeVirtualKey implements store.Store. Revoking twice keeps the first
// revocation time.
func (s *DB) RevokeVirtualKey(ctx context.Context, id int64, at time.Time) error {
	return s.exec(ctx, s.qr, "", `UPDATE virtual_keys SET revoked_at = COALESCE(revoked_at, ?) WHERE id = ?`,
		at.UTC().Truncate(time.Microsecond), id)
}

// Load implements store.Store.
func (s *DB) Load(ctx context.Context) (*store.State, error) {
	if s.txn != nil {
		return s.load(ctx, s.qr) // the caller's transaction is the one view
	}
	opts := &sql.TxOptions{ReadOnly: true}
	if s.dialect == dialectPostgres {
		opts.Isolation = sql.LevelRepeatableRead // one snapshot across the reads
	}
	tx, err := s.db.BeginTx(ctx, opts)
	if err != nil {
		return nil, s.classify(err, "")
	}
	defer tx.Rollback() //nolint:errcheck // read-only
	return s.load(ctx, tx)
}

// load reads the routing state through tx.
func (s *DB) load(ctx context.Context, tx querier) (*store.State, error) {
	st := &store.State{}
	var err error
	if st.Orgs, err = list(ctx, s, tx, scanOrg, `SELECT `+orgCols+` FROM orgs ORDER BY id`); err != nil {
		return nil, err
	}
	if st.Projects, err = list(ctx, s, tx, scanProject, `SELECT `+projectCols+` FROM projects ORDER BY id`); err != nil {
		return nil, err
	}
	if st.Providers, err = list(ctx, s, tx, scanProvider, `SELECT `+providerCols+` FROM providers ORDER BY id`); err != nil {
		return nil, err
	}
	if err := s.attachKeys(ctx, tx, st.Providers, true); err != nil {
		return nil, err
	}
	var n int // the routes' count, to read them into one allocation
	if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM routes`).Scan(&n); err != nil {
		return nil, s.classify(err, "")
	}
	if st.Routes, err = listCap(ctx, s, tx, routeScanner(), n, `SELECT `+s.routeCols()+` FROM routes ORDER BY id`); err != nil {
		return nil, err
	}
	if err := s.attachTargets(ctx, tx, st.Routes, true); err != nil {
		return nil, err
	}
	if st.Groups, err = list(ctx, s, tx, scanGroup, `SELECT `+groupCols+` FROM provider_groups ORDER BY id`); err != nil {
		return nil, err
	}
	if err := s.attachMembers(ctx, tx, st.Groups, true); err != nil {
		return nil, err
	}
	if st.VirtualKeys, err = list(ctx, s, tx, scanVirtualKey, `SELECT `+vkeyCols+` FROM virtual_keys ORDER BY id`); err != nil {
		return nil, err
	}
	if st.AdminTokens, err = list(ctx, s, tx, scanAdminToken, `SELECT `+adminTokenCols+` FROM `+adminTokenFrom+` ORDER BY t.id`); err != nil {
		return nil, err
	}
	shareStrings(st)
	return st, nil
}

// priceArg is a target's input (or output) price column: NULL when the
// target has no price of its own.
func priceArg(p *store.Prices, output bool) any {
	switch {
	case p == nil:
		return nil
	case output:
		return int64(p.Output)
	}
	return int64(p.Input)
}
