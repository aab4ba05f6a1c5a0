package sqlstore

import (
	"context"
	"database/sql"
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
	rows, err := qr.QueryContext(ctx, s.q(query+t.orderBy), args...)
	if err != nil {
		return s.classify(err, "")
	}
	defer rows.Close()
	// Rows ordered by parent first, for parents in order of id, join
	// without a map.
	if all && strings.HasPrefix(t.orderBy, " ORDER BY "+t.parentCol+",") && sortedByID(ps, t.id) {
		return mergeChildren(s, rows, ps, t, scan)
	}
	byID := make(map[int64]*P, len(ps))
	for i := range ps {
		byID[t.id(&ps[i])] = &ps[i]
		*t.children(&ps[i]) = []C{}
	}
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

// sortedByID reports whether ps are in ascending order of id, as Load
// reads them.
func sortedByID[P any](ps []P, id func(*P) int64) bool {
	for i := 1; i < len(ps); i++ {
		if id(&ps[i-1]) >= id(&ps[i]) {
			return false
		}
	}
	return true
}

// mergeChildren fills the children of ps, in ascending order of id, from
// rows in t's order (by parent first): a merge join, without a map of
// the parents (Load reads 100,000 routes at start-up, issue 21). The
// children share one array, each parent's slice capped at its end so
// that an append to one does not write over the next.
func mergeChildren[P, C any](s *DB, rows *sql.Rows, ps []P, t childTable[P, C], scan func(interface{ Scan(...any) error }) (parent int64, c C, err error)) error {
	var (
		cs   = make([]C, 0, len(ps))
		ends = make([]int, len(ps)) // ends[i]: the end in cs of ps[i]'s children
		j    int
	)
	for rows.Next() {
		parent, c, err := scan(rows)
		if err != nil {
			return s.classify(err, "")
		}
		for j < len(ps) && t.id(&ps[j]) < parent {
			ends[j] = len(cs)
			j++
		}
		if j < len(ps) && t.id(&ps[j]) == parent {
			cs = append(cs, c)
		}
	}
	if err := rows.Err(); err != nil {
		return s.classify(err, "")
	}
	for ; j < len(ps); j++ {
		ends[j] = len(cs)
	}
	start := 0
	for i := range ps {
		*t.children(&ps[i]) = cs[start:ends[i]:ends[i]]
		start = ends[i]
	}
	return nil
}
