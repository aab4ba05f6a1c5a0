package sqlstore

import (
	"context"
	"database/sql"
	"slices"
	"strings"
	"time"

	"github.com/rolter/rolter/internal/store"
)

// The change journal (migration 00015): triggers on every table the
// routing state is read from add (kind, ref) rows, so that a snapshot is
// brought up to date by re-reading only the entities written since it was
// built (issue 21). A position is, on SQLite, the journal's sequence
// number (one writer at a time: sequence order is commit order); on
// PostgreSQL, a transaction id: a reader remembers the oldest transaction
// still running when it read (its snapshot's xmin), and next reads every
// row at or above it, since any transaction it could not see then has an
// id that high. Rows are read again at times; a re-read entity is the same.

// journalKeep is how long journal rows are kept; a replica that has not
// looked for longer reads the whole state.
const journalKeep = time.Hour

// LoadAt is Load, with the journal position the state is at.
func (s *DB) LoadAt(ctx context.Context) (*store.State, int64, error) {
	var (
		st  *store.State
		pos int64
	)
	err := s.readView(ctx, func(tx querier) error {
		var err error
		if pos, err = s.journalPos(ctx, tx); err != nil {
			return err
		}
		st, err = s.load(ctx, tx)
		return err
	})
	return st, pos, err
}

// readView runs fn in one consistent read-only view (Load's).
func (s *DB) readView(ctx context.Context, fn func(tx querier) error) error {
	if s.txn != nil {
		return fn(s.qr)
	}
	opts := &sql.TxOptions{ReadOnly: true}
	if s.dialect == dialectPostgres {
		opts.Isolation = sql.LevelRepeatableRead // one snapshot across the reads
	}
	tx, err := s.db.BeginTx(ctx, opts)
	if err != nil {
		return s.classify(err, "")
	}
	defer tx.Rollback() //nolint:errcheck // read-only
	return fn(tx)
}

// journalPos is the position of the view tx reads: the last sequence
// number on SQLite, the snapshot's xmin on PostgreSQL. It must be the
// view's first statement on PostgreSQL (the snapshot is taken by it).
func (s *DB) journalPos(ctx context.Context, tx querier) (int64, error) {
	q := `SELECT COALESCE(MAX(seq), 0) FROM change_journal`
	if s.dialect == dialectPostgres {
		q = `SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint`
	}
	var pos int64
	err := tx.QueryRowContext(ctx, q).Scan(&pos)
	return pos, s.classify(err, "")
}

// LoadChanges reads what changed since the journal position since: the
// ids written and their current rows, or, when the journal was pruned past
// since or more than limit entities changed, the whole state (Changes.Full).
func (s *DB) LoadChanges(ctx context.Context, since int64, limit int) (*store.Changes, error) {
	ch := &store.Changes{}
	err := s.readView(ctx, func(tx querier) error {
		var err error
		if ch.Pos, err = s.journalPos(ctx, tx); err != nil {
			return err
		}
		var floor int64
		if err := tx.QueryRowContext(ctx, `SELECT pos FROM change_floor WHERE id = 1`).Scan(&floor); err != nil {
			return s.classify(err, "")
		}
		full := since < floor || (s.dialect == dialectPostgres && since == floor && floor > 0)
		if !full {
			q := `SELECT kind, ref FROM change_journal WHERE seq > ?`
			if s.dialect == dialectPostgres {
				q = `SELECT kind, ref FROM change_journal WHERE pos >= ?`
			}
			ch.Pos = max(ch.Pos, since) // an emptied journal restarts its MAX at 0
			ids, err := s.journalSince(ctx, tx, q, since, limit)
			if err != nil {
				return err
			}
			if ids == nil {
				full = true
			} else {
				ch.IDs = *ids
			}
		}
		if full {
			ch.Full, err = s.load(ctx, tx)
			return err
		}
		return s.loadRows(ctx, tx, &ch.IDs, &ch.Rows)
	})
	if err != nil {
		return nil, err
	}
	s.maybePrune(ctx)
	return ch, nil
}

// journalSince reads the distinct (kind, ref) of the journal rows q
// selects; nil when there are more than limit.
func (s *DB) journalSince(ctx context.Context, tx querier, q string, since int64, limit int) (*store.ChangedIDs, error) {
	rows, err := tx.QueryContext(ctx, s.q(q), since)
	if err != nil {
		return nil, s.classify(err, "")
	}
	defer rows.Close()
	type key struct {
		kind string
		ref  int64
	}
	seen := map[key]bool{}
	ids := &store.ChangedIDs{}
	for rows.Next() {
		var k key
		if err := rows.Scan(&k.kind, &k.ref); err != nil {
			return nil, s.classify(err, "")
		}
		if seen[k] {
			continue
		}
		seen[k] = true
		if len(seen) > limit {
			return nil, rows.Close()
		}
		switch k.kind {
		case "org":
			ids.Orgs = append(ids.Orgs, k.ref)
		case "project":
			ids.Projects = append(ids.Projects, k.ref)
		case "provider":
			ids.Providers = append(ids.Providers, k.ref)
		case "route":
			ids.Routes = append(ids.Routes, k.ref)
		case "group":
			ids.Groups = append(ids.Groups, k.ref)
		case "vkey":
			ids.VirtualKeys = append(ids.VirtualKeys, k.ref)
		case "token":
			ids.AdminTokens = append(ids.AdminTokens, k.ref)
		}
	}
	return ids, s.classify(rows.Err(), "")
}

// loadRows reads the current rows of ids into st. A provider's change
// also re-reads the routes and groups that name it (their targets and
// members carry its slug).
func (s *DB) loadRows(ctx context.Context, tx querier, ids *store.ChangedIDs, st *store.State) error {
	if len(ids.Providers) > 0 {
		in, args := inList(ids.Providers)
		more, err := s.ids(ctx, tx, `SELECT DISTINCT route_id FROM route_targets WHERE provider_id IN (`+in+`)`, args)
		if err != nil {
			return err
		}
		ids.Routes = union(ids.Routes, more)
		if more, err = s.ids(ctx, tx, `SELECT DISTINCT group_id FROM group_members WHERE provider_id IN (`+in+`)`, args); err != nil {
			return err
		}
		ids.Groups = union(ids.Groups, more)
	}
	var err error
	if st.Orgs, err = byIDs(ctx, s, tx, scanOrg, `SELECT `+orgCols+` FROM orgs WHERE id IN `, ids.Orgs, ` ORDER BY id`); err != nil {
		return err
	}
	if st.Projects, err = byIDs(ctx, s, tx, scanProject, `SELECT `+projectCols+` FROM projects WHERE id IN `, ids.Projects, ` ORDER BY id`); err != nil {
		return err
	}
	if st.Providers, err = byIDs(ctx, s, tx, scanProvider, `SELECT `+providerCols+` FROM providers WHERE id IN `, ids.Providers, ` ORDER BY id`); err != nil {
		return err
	}
	if err := s.attachKeysOf(ctx, tx, st.Providers, false, true); err != nil {
		return err
	}
	if st.Routes, err = byIDs(ctx, s, tx, scanRoute, `SELECT `+s.routeCols()+` FROM routes WHERE id IN `, ids.Routes, ` ORDER BY id`); err != nil {
		return err
	}
	if err := s.attachTargets(ctx, tx, st.Routes, false); err != nil {
		return err
	}
	if st.Groups, err = byIDs(ctx, s, tx, scanGroup, `SELECT `+groupCols+` FROM provider_groups WHERE id IN `, ids.Groups, ` ORDER BY id`); err != nil {
		return err
	}
	if err := s.attachMembers(ctx, tx, st.Groups, false); err != nil {
		return err
	}
	if st.VirtualKeys, err = byIDs(ctx, s, tx, scanVirtualKey, `SELECT `+vkeyCols+` FROM virtual_keys WHERE id IN `, ids.VirtualKeys, ` ORDER BY id`); err != nil {
		return err
	}
	st.AdminTokens, err = byIDs(ctx, s, tx, scanAdminToken, `SELECT `+adminTokenCols+` FROM `+adminTokenFrom+` WHERE t.id IN `, ids.AdminTokens, ` ORDER BY t.id`)
	return err
}

// byIDs lists the rows of query (which ends in "IN ") with ids.
func byIDs[T any](ctx context.Context, s *DB, tx querier, scan func(interface{ Scan(...any) error }) (T, error), query string, ids []int64, order string) ([]T, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	in, args := inList(ids)
	return list(ctx, s, tx, scan, query+`(`+in+`)`+order, args...)
}

func (s *DB) ids(ctx context.Context, tx querier, query string, args []any) ([]int64, error) {
	rows, err := tx.QueryContext(ctx, s.q(query), args...)
	if err != nil {
		return nil, s.classify(err, "")
	}
	defer rows.Close()
	var out []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, s.classify(err, "")
		}
		out = append(out, id)
	}
	return out, s.classify(rows.Err(), "")
}

func inList(ids []int64) (string, []any) {
	args := make([]any, len(ids))
	for i, id := range ids {
		args[i] = id
	}
	return strings.TrimSuffix(strings.Repeat("?,", len(ids)), ","), args
}

func union(a, b []int64) []int64 {
	for _, id := range b {
		if !slices.Contains(a, id) {
			a = append(a, id)
		}
	}
	return a
}

// maybePrune deletes journal rows older than journalKeep, at most once a
// minute per store, and raises the floor past them. Best effort: a
// failure leaves the rows for the next time.
func (s *DB) maybePrune(ctx context.Context) {
	now := time.Now()
	if last := s.lastPrune.Load(); last != 0 && now.UnixNano()-last < int64(time.Minute) {
		return
	}
	s.lastPrune.Store(now.UnixNano())
	if s.txn != nil {
		return
	}
	cut := now.Add(-journalKeep).UTC()
	col, at := "seq", any(cut.Format("2006-01-02 15:04:05"))
	if s.dialect == dialectPostgres {
		col, at = "pos", cut
	}
	_ = s.tx(ctx, func(tx querier) error {
		var top sql.NullInt64
		if err := tx.QueryRowContext(ctx, s.q(`SELECT MAX(`+col+`) FROM change_journal WHERE at < ?`), at).Scan(&top); err != nil || !top.Valid {
			return err
		}
		if _, err := tx.ExecContext(ctx, s.q(`DELETE FROM change_journal WHERE `+col+` <= ?`), top.Int64); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, s.q(`UPDATE change_floor SET pos = ? WHERE id = 1 AND pos < ?`), top.Int64, top.Int64)
		return err
	})
}
