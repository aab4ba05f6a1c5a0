package sqlstore

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"sync"
)

// Lease elects one holder of a named role among the replicas sharing a
// store: on PostgreSQL it is a session advisory lock, scoped by the store's
// schema, held on a dedicated connection; on SQLite (one process) it is
// always held. The fleet controller runs only while its lease is held.
type Lease struct {
	db   *DB
	name string

	mu   sync.Mutex
	conn *sql.Conn
}

// NewLease returns an unheld lease named name.
func (s *DB) NewLease(name string) *Lease { return &Lease{db: s, name: name} }

// Held reports whether this process holds the lease, trying to take it
// when it does not. A lost connection loses the lease (PostgreSQL releases
// the lock with the session), and a later call may win it again.
func (l *Lease) Held(ctx context.Context) bool {
	if l.db.dialect != dialectPostgres {
		return true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.conn != nil {
		var one int
		if err := l.conn.QueryRowContext(ctx, `SELECT 1`).Scan(&one); err == nil {
			return true
		}
		discard(l.conn) // it may still hold the lock: never back into the pool
		l.conn = nil
	}
	conn, err := l.db.db.Conn(ctx)
	if err != nil {
		return false
	}
	var got bool
	err = conn.QueryRowContext(ctx, `SELECT pg_try_advisory_lock(hashtext('rolter:' || $1 || ':' || current_schema()))`, l.name).Scan(&got)
	if err != nil {
		// The server may have taken the lock before the answer was lost:
		// a session that might hold it never goes back into the pool.
		discard(conn)
		return false
	}
	if !got {
		conn.Close() // another replica holds it: this session holds nothing
		return false
	}
	l.conn = conn
	return true
}

// Release gives the lease up.
func (l *Lease) Release() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.conn == nil {
		return
	}
	_, err := l.conn.ExecContext(context.Background(), `SELECT pg_advisory_unlock(hashtext('rolter:' || $1 || ':' || current_schema()))`, l.name)
	if err != nil {
		discard(l.conn)
	} else {
		l.conn.Close()
	}
	l.conn = nil
}

// discard closes conn's session instead of returning it to the pool. Only
// a connection in an unknown state is discarded (one that may hold the
// lease's lock or LISTEN): every discard costs the database a new session.
func discard(conn *sql.Conn) {
	_ = conn.Raw(func(any) error { return driver.ErrBadConn })
	_ = conn.Close()
}
