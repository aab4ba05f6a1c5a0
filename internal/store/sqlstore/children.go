package sqlstore

import (
	"context"
	"strings"
)

// Providers carry their keys, routes their targets and groups their
// members: rows of a child table read with one query for a page of
// parents. These helpers hold what the three have in common.

// attachFunc fills the children of every parent in ps; all reads every
// child row (for Load) rather than those of ps.
type attachFunc[T any] func(ctx context.Context, qr querier, ps []T, all bool) error

// getWith reads the one parent query selects, with its children.
func getWith[T any](ctx context.Context, s *DB, scan func(interface{ Scan(...any) error }) (T, error), attach attachFunc[T], query string, args ...any) (*T, error) {
	p, err := scan(s.qr.QueryRowContext(ctx, s.q(query), args...))
	if err != nil {
		return nil, s.classify(err, "")
	}
	ps := []T{p}
	if err := attach(ctx, s.qr, ps, false); err != nil {
		return nil, err
	}
	return &ps[0], nil
}

// listWith reads the parents query selects, with their children.
func listWith[T any](ctx context.Context, s *DB, scan func(interface{ Scan(...any) error }) (T, error), attach attachFunc[T], query string, args ...any) ([]T, error) {
	ps, err := list(ctx, s, s.qr, scan, query, args...)
	if err != nil {
		return nil, err
	}
	return ps, attach(ctx, s.qr, ps, false)
}

// childTable says where the children of a parent type P are stored and
// where they go on P.
type childTable[P, C any] struct {
	// selectFrom is the query without its WHERE and ORDER BY clauses;
	// parentCol is its column of the parent's id, and orderBy its
	// " ORDER BY ..." clause.
	selectFrom, parentCol, orderBy string
	id                             func(*P) int64 // the parent's id
	children                       func(*P) *[]C  // the parent's children
}

// attachChildren fills the children of every parent in ps with one query
// of table t, in t's order; all reads every child row (for Load) rather
// than those of ps. A parent without children gets an empty, non-nil
// slice. scan reads one row: the child and its parent's id; its errors
// are classified as list's are.
func attachChildren[P, C any](ctx context.Context, s *DB, qr querier, ps []P, all bool, t childTable[P, C],
	scan func(interface{ Scan(...any) error }) (parent int64, c C, err error)) error {
	if len(ps) == 0 {
		return nil
	}
	query := t.selectFrom
	var args []any
	if !all {
		marks := make([]string, len(ps))
		for i := range ps {
			marks[i] = "?"
			args = append(args, t.id(&ps[i]))
		}
		query += ` WHERE ` + t.parentCol + ` IN (` + strings.Join(marks, ",") + `)`
	}
	byID := make(map[int64]*P, len(ps))
	for i := range ps {
		byID[t.id(&ps[i])] = &ps[i]
		*t.children(&ps[i]) = []C{}
	}
	rows, err := qr.QueryContext(ctx, s.q(query+t.orderBy), args...)
	if err != nil {
		return s.classify(err, "")
	}
	defer rows.Close()
	for rows.Next() {
		parent, c, err := scan(rows)
		if err != nil {
			return s.classify(err, "")
		}
		if p := byID[parent]; p != nil {
			cs := t.children(p)
			*cs = append(*cs, c)
		}
	}
	return s.classify(rows.Err(), "")
}
