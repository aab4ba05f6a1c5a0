package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
)

// A running gateway marks the store it serves, so that `rolter restore`
// can tell that replacing the store under it would leave it serving its
// old routing state (issue 22):
//
//   - PostgreSQL: each gateway holds a shared session advisory lock, scoped
//     by the store's schema, on a dedicated connection. A restore asks for
//     the same lock exclusively: it gets it only when no gateway holds it.
//     A gateway that dies loses the lock with its session.
//   - SQLite: each gateway holds a shared OS file lock (flock) on the file
//     "<database>.serving" beside the database; a restore asks for it
//     exclusively. The kernel drops the lock when the process exits, so a
//     crashed gateway never leaves a stale mark. Where the platform has no
//     flock (serving_other.go) nothing is detected.
//
// The marks are separate from the fleet controller's Lease: every replica
// holds one, not one elected replica.

// ErrServing is returned by HoldRestore when a gateway serves the store.
var ErrServing = errors.New("a running gateway is serving this store")

// servingKeySQL is the advisory lock's key: "rolter-serving:<schema>",
// hashed as Lease's keys are, in its own name space.
const servingKeySQL = `hashtext('rolter-serving:' || current_schema())`

// ServingFile is the lock file beside a SQLite database at path.
func ServingFile(path string) string { return path + ".serving" }

// HoldServing marks the store, opened from spec and dataDir, as served by
// this process until release is called. A failure to mark is returned;
// the caller may serve anyway (restore then cannot see it).
func (s *DB) HoldServing(ctx context.Context, spec, dataDir string) (release func(), err error) {
	if s.dialect == dialectPostgres {
		conn, err := s.db.Conn(ctx)
		if err != nil {
			return nil, err
		}
		if _, err := conn.ExecContext(ctx, `SELECT pg_advisory_lock_shared(`+servingKeySQL+`)`); err != nil {
			conn.Close()
			return nil, fmt.Errorf("store: mark the store as served: %w", err)
		}
		return func() { discard(conn) }, nil // closing the session releases the lock
	}
	path, ok := sqlitePath(spec, dataDir)
	if !ok {
		return func() {}, nil
	}
	return flockFile(ServingFile(path), false)
}

// HoldRestore takes the store named by spec and dataDir for a restore:
// it returns ErrServing while any gateway serves it, else a release to call
// once the restore is over (gateways that start meanwhile do not mark it).
// It does not migrate or otherwise touch the store.
func HoldRestore(ctx context.Context, spec, dataDir string) (release func(), err error) {
	if path, ok := sqlitePath(spec, dataDir); ok {
		if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
			return func() {}, nil // nothing to serve yet
		}
		release, err := flockFile(ServingFile(path), true)
		if errors.Is(err, errLocked) {
			return nil, ErrServing
		}
		return release, err
	}
	db, err := sql.Open("pgx", spec)
	if err != nil {
		return nil, fmt.Errorf("store: open: %w", err)
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("store: connect to %s: %w", redactURL(spec), err)
	}
	var got bool
	if err := conn.QueryRowContext(ctx, `SELECT pg_try_advisory_lock(`+servingKeySQL+`)`).Scan(&got); err != nil || !got {
		conn.Close()
		db.Close()
		if err != nil {
			return nil, fmt.Errorf("store: check for a running gateway: %w", err)
		}
		return nil, ErrServing
	}
	return func() { discard(conn); db.Close() }, nil
}

// errLocked is flockFile's answer when another holder conflicts.
var errLocked = errors.New("locked")
