package sqlstore

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/rolter/rolter/internal/store"
)

// Bulk route inserts (issue 21: an import of 10,000 routes). CreateRoute
// takes a statement per route and per target; CreateRoutes takes one per
// bulkRows rows of each table, every statement bound to at most
// bulkRows×columns parameters (under SQLite's 32,766 and PostgreSQL's
// 65,535).
const bulkRows = 500

// CreateRoutes inserts rs and their targets in one transaction (a
// savepoint of a bound DB's), as CreateRoute inserts each, and sets their
// ids and times: a model taken in its project (by another route or by
// another of rs) fails the whole call, with CreateRoute's error, and
// writes nothing. Each route's project must exist.
func (s *DB) CreateRoutes(ctx context.Context, rs []*store.Route) error {
	t := now()
	return s.tx(ctx, func(tx querier) error {
		type key struct {
			project int64
			model   string
		}
		byKey := make(map[key]*store.Route, len(rs))
		for _, r := range rs {
			byKey[key{r.ProjectID, text(r.Model)}] = r
		}
		for chunk := range slices.Chunk(rs, bulkRows) {
			args := make([]any, 0, 10*len(chunk))
			for _, r := range chunk {
				args = append(args, r.ProjectID, r.Model, r.Strategy, jsonText(r.Policy), r.RPMLimit, r.TPMLimit,
					stringList(r.Fallbacks), r.ContextFallback, t, t)
			}
			err := s.queryEach(ctx, tx, "route model",
				`INSERT INTO routes (project_id, model, strategy, policy, rpm_limit, tpm_limit, fallbacks, context_fallback, created_at, updated_at)
				 VALUES `+placeholders(len(chunk), 10)+` RETURNING id, project_id, model`, args,
				func(sc func(...any) error) error {
					var (
						id int64
						k  key
					)
					if err := sc(&id, &k.project, &k.model); err != nil {
						return err
					}
					r := byKey[k]
					if r == nil {
						return fmt.Errorf("store: inserted route %d (project %d, model %q) is none of the batch's", id, k.project, k.model)
					}
					r.ID, r.CreatedAt, r.UpdatedAt = id, t, t
					return nil
				})
			if err != nil {
				return err
			}
		}
		return s.insertTargetsOf(ctx, tx, rs)
	})
}

// insertTargetsOf inserts the targets of rs, whose ids are set, and sets
// the targets' ids.
func (s *DB) insertTargetsOf(ctx context.Context, tx querier, rs []*store.Route) error {
	type key struct {
		route    int64
		position int
	}
	var all []key
	byKey := map[key]*store.Target{}
	for _, r := range rs {
		for i := range r.Targets {
			k := key{r.ID, i}
			all = append(all, k)
			byKey[k] = &r.Targets[i]
		}
	}
	for chunk := range slices.Chunk(all, bulkRows) {
		args := make([]any, 0, 9*len(chunk))
		for _, k := range chunk {
			tg := byKey[k]
			args = append(args, k.route, tg.ProviderID, tg.UpstreamModel, tg.Weight, tg.Priority, k.position, tg.ContextLimit,
				priceArg(tg.Prices, false), priceArg(tg.Prices, true))
		}
		err := s.queryEach(ctx, tx, "route target",
			`INSERT INTO route_targets (route_id, provider_id, upstream_model, weight, priority, position, context_limit, input_price, output_price)
			 VALUES `+placeholders(len(chunk), 9)+` RETURNING id, route_id, position`, args,
			func(sc func(...any) error) error {
				var (
					id int64
					k  key
				)
				if err := sc(&id, &k.route, &k.position); err != nil {
					return err
				}
				tg := byKey[k]
				if tg == nil {
					return fmt.Errorf("store: inserted target %d (route %d, position %d) is none of the batch's", id, k.route, k.position)
				}
				tg.ID = id
				return nil
			})
		if err != nil {
			return err
		}
	}
	return nil
}

// queryEach runs a statement that answers rows (an INSERT ... RETURNING)
// and hands each row's Scan to fn. String arguments are stored through
// text; what names the unique rule the statement can break (classify).
func (s *DB) queryEach(ctx context.Context, qr querier, what, query string, args []any, fn func(scan func(...any) error) error) error {
	rows, err := qr.QueryContext(ctx, s.q(query), textArgs(args)...)
	if err != nil {
		return s.classify(err, what)
	}
	defer rows.Close()
	for rows.Next() {
		if err := fn(rows.Scan); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return s.classify(err, what)
	}
	return nil
}

// placeholders is n parenthesized groups of cols "?" each, comma-separated.
func placeholders(n, cols int) string {
	return placeholdersWith(n, strings.TrimSuffix(strings.Repeat("?, ", cols), ", "))
}

// placeholdersWith is n copies of "(row)", comma-separated.
func placeholdersWith(n int, row string) string {
	group := "(" + row + ")"
	var b strings.Builder
	b.Grow(n * (len(group) + 2))
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(group)
	}
	return b.String()
}
