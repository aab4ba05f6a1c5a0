package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"strconv"

	"github.com/rolter/rolter/internal/store"
)

// Transactions. Every write method that touches more than one row runs in
// s.tx; Tx hands a caller a whole DB bound to one transaction, so that
// several such methods commit or roll back together. On a bound DB both
// nest: they open a savepoint of the transaction instead of a transaction
// of their own, so a method that fails inside a caller's transaction undoes
// only its own writes, and leaves the transaction usable (PostgreSQL
// refuses every statement after a failed one until a rollback).

// txn is the transaction a bound DB runs in, shared by the savepoints
// opened on it.
type txn struct {
	tx *sql.Tx
	// savepoints counts the savepoints opened, for distinct names.
	savepoints int
}

// errInTx refuses what a bound DB cannot do (Close, Migrate).
var errInTx = errors.New("store: not allowed on the store of a transaction")

// Tx implements store.Store.
func (s *DB) Tx(ctx context.Context, fn func(store.Store) error) error {
	return s.within(ctx, func(in *DB) error { return fn(in) })
}

// tx runs fn in a transaction (a savepoint on a bound DB) and commits when
// fn returns nil.
func (s *DB) tx(ctx context.Context, fn func(tx querier) error) error {
	return s.within(ctx, func(in *DB) error { return fn(in.qr) })
}

// within runs fn with a DB bound to a transaction: a new one on the pool,
// or a savepoint of s's own when s is bound already.
func (s *DB) within(ctx context.Context, fn func(in *DB) error) error {
	if s.txn != nil {
		return s.savepoint(ctx, fn)
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return s.classify(err, "")
	}
	committed := false
	defer func() {
		if !committed {
			_ = tx.Rollback()
		}
	}()
	in := *s
	in.qr, in.txn = tx, &txn{tx: tx}
	if err := fn(&in); err != nil {
		return err
	}
	committed = true
	if err := tx.Commit(); err != nil {
		return s.classify(err, "")
	}
	return nil
}

// savepoint runs fn inside a savepoint of s's transaction: its writes are
// undone, and the transaction stays usable, when fn fails.
func (s *DB) savepoint(ctx context.Context, fn func(in *DB) error) error {
	s.txn.savepoints++
	name := "rolter_sp_" + strconv.Itoa(s.txn.savepoints)
	if _, err := s.txn.tx.ExecContext(ctx, "SAVEPOINT "+name); err != nil {
		return s.classify(err, "")
	}
	// Undoing must not depend on ctx: a canceled ctx is one reason fn
	// failed, and the caller's transaction may still be rolled back to a
	// consistent state by its own owner.
	undo := context.WithoutCancel(ctx)
	if err := fn(s); err != nil {
		if _, rerr := s.txn.tx.ExecContext(undo, "ROLLBACK TO SAVEPOINT "+name); rerr == nil {
			_, _ = s.txn.tx.ExecContext(undo, "RELEASE SAVEPOINT "+name)
		}
		return err
	}
	if _, err := s.txn.tx.ExecContext(ctx, "RELEASE SAVEPOINT "+name); err != nil {
		return s.classify(err, "")
	}
	return nil
}

var _ store.TxLocker = (*DB)(nil)

// LockTx implements store.TxLocker: on PostgreSQL a transaction-scoped
// advisory lock, scoped by the store's schema as Lease is (in a key space
// of its own: a lease named name is another lock).
func (s *DB) LockTx(ctx context.Context, name string) error {
	if s.txn == nil {
		return errors.New("store: LockTx outside a transaction")
	}
	if s.dialect != dialectPostgres {
		return nil
	}
	_, err := s.txn.tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock(hashtext('rolter-tx:' || $1 || ':' || current_schema()))`, name)
	return s.classify(err, "")
}
