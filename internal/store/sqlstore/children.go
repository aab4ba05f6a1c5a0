package sqlstore

import (
	"context"
	"strings"
)

// Providers carry their keys and routes their targets: rows of a child
// table read with one query for a page of parents. These helpers hold what
// the two have in common.

// attachFunc fills the children of every parent in ps; all reads every
// child row (for Load) rather than those of ps.
type attachFunc[T any] func(ctx context.Context, qr querier, ps []T, all bool) error

// getWith reads the one parent query selects, with its children.
func getWith[T any](ctx context.Context, s *DB, scan func(interface{ Scan(...any) error }) (T, error), attach attachFunc[T], query string, args ...any) (*T, error) {
	p, err := scan(s.db.QueryRowContext(ctx, s.q(query), args...))
	if err != nil {
		return nil, s.classify(err, "")
	}
	ps := []T{p}
	if err := attach(ctx, s.db, ps, false); err != nil {
		return nil, err
	}
	return &ps[0], nil
}

// listWith reads the parents query selects, with their children.
func listWith[T any](ctx context.Context, s *DB, scan func(interface{ Scan(...any) error }) (T, error), attach attachFunc[T], query string, args ...any) ([]T, error) {
	ps, err := list(ctx, s, s.db, scan, query, args...)
	if err != nil {
		return nil, err
	}
	return ps, attach(ctx, s.db, ps, false)
}

// byParent indexes ps by id and resets each one's children with reset. It
// returns the index and, unless all, the " WHERE col IN (?, ...)" clause
// that selects the children of ps, with its arguments.
func byParent[T any](ps []T, all bool, col string, id func(*T) int64, reset func(*T)) (map[int64]*T, string, []any) {
	var where string
	var args []any
	if !all {
		marks := make([]string, len(ps))
		for i := range ps {
			marks[i] = "?"
			args = append(args, id(&ps[i]))
		}
		where = ` WHERE ` + col + ` IN (` + strings.Join(marks, ",") + `)`
	}
	byID := make(map[int64]*T, len(ps))
	for i := range ps {
		byID[id(&ps[i])] = &ps[i]
		reset(&ps[i])
	}
	return byID, where, args
}
