// Package sqlstore implements store.Store on SQLite (modernc.org/sqlite, pure
// Go) and PostgreSQL (pgx/v5 through database/sql).
//
// Both dialects share every query: they are written with "?" placeholders
// and rebound to "$n" for PostgreSQL. Only the migrations (embedded, one set
// per dialect, applied with goose) and error classification differ.
package sqlstore

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/pressly/goose/v3"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/rolter/rolter/internal/secret"
	"github.com/rolter/rolter/internal/store"
)

//go:embed migrations
var migrations embed.FS

const (
	dialectSQLite   = "sqlite"
	dialectPostgres = "postgres"
)

// SQLiteFile is the database file name inside the data directory.
const SQLiteFile = "rolter.db"

// DB implements store.Store.
type DB struct {
	db *sql.DB // the pool
	// qr runs the queries: the pool, or the transaction of a DB that Tx
	// handed to its function (then txn is set).
	qr      querier
	txn     *txn
	dialect string
	sealer  *secret.Sealer
	// instance names this opened store in change announcements.
	instance string
	// lastPrune is when the change journal was last pruned (unix nanos),
	// shared by the DBs bound to its transactions.
	lastPrune *atomic.Int64
	// sessions counts the PostgreSQL sessions the pool opened; shared by
	// the copies Tx makes.
	sessions *atomic.Int64
}

var _ store.Store = (*DB)(nil)

// Open connects to the store named by spec and applies pending migrations.
// spec is "sqlite" (the file rolter.db in dataDir), "sqlite:PATH", or a
// postgres:// / postgresql:// URL. sealer encrypts provider secrets at rest;
// nil stores them as plain text. A SQLite database it creates is 0600, and
// so are its -wal and -shm files (see CreateSQLiteFile).
func Open(ctx context.Context, spec, dataDir string, sealer *secret.Sealer) (*DB, error) {
	if sealer == nil {
		sealer = &secret.Sealer{}
	}
	var (
		s   = &DB{sealer: sealer, instance: newInstance(), sessions: new(atomic.Int64), lastPrune: new(atomic.Int64)}
		err error
	)
	switch {
	case spec == "" || spec == "sqlite" || strings.HasPrefix(spec, "sqlite:"):
		path := strings.TrimPrefix(strings.TrimPrefix(spec, "sqlite"), ":")
		if path == "" {
			if err := os.MkdirAll(dataDir, 0o700); err != nil {
				return nil, fmt.Errorf("store: create data dir: %w", err)
			}
			path = filepath.Join(dataDir, SQLiteFile)
		}
		if err := CreateSQLiteFile(path); err != nil {
			return nil, err
		}
		s.dialect = dialectSQLite
		// foreign_keys is per connection, so it goes in the DSN; WAL lets
		// readers (backups, a second CLI process) run beside the server.
		dsn := "file:" + path + "?_pragma=foreign_keys(1)&_pragma=journal_mode(WAL)&_pragma=busy_timeout(10000)&_time_format=sqlite"
		s.db, err = sql.Open("sqlite", dsn)
		if err == nil {
			// One connection serialises writers, which SQLite does anyway, and
			// avoids SQLITE_BUSY on lock upgrades inside transactions.
			s.db.SetMaxOpenConns(1)
		}
	case strings.HasPrefix(spec, "postgres://") || strings.HasPrefix(spec, "postgresql://"):
		s.dialect = dialectPostgres
		s.db, err = s.openPostgres(spec)
	default:
		return nil, fmt.Errorf("store: unknown --store %q: want \"sqlite\", \"sqlite:PATH\" or a postgres:// URL", redactURL(spec))
	}
	if err != nil {
		return nil, fmt.Errorf("store: open: %w", err)
	}
	s.qr = s.db
	if err := s.Ping(ctx); err != nil {
		s.db.Close()
		return nil, err
	}
	if err := s.Migrate(ctx); err != nil {
		s.db.Close()
		return nil, err
	}
	return s, nil
}

// redactURL drops the password from a database URL for error messages.
func redactURL(spec string) string {
	u, err := url.Parse(spec)
	if err != nil || u.User == nil {
		return spec
	}
	return u.Redacted()
}

// Dialect implements store.Store.
func (s *DB) Dialect() string { return s.dialect }

// SQL exposes the connection pool for tests and maintenance commands.
func (s *DB) SQL() *sql.DB { return s.db }

// Close implements store.Store. The store a Tx function gets is not
// closed: its transaction ends with the function.
func (s *DB) Close() error {
	if s.txn != nil {
		return errInTx
	}
	return s.db.Close()
}

// Ping implements store.Store.
func (s *DB) Ping(ctx context.Context) error {
	if err := s.db.PingContext(ctx); err != nil {
		return fmt.Errorf("%w: %v", store.ErrUnavailable, err)
	}
	return nil
}

// Migrate implements store.Store.
func (s *DB) Migrate(ctx context.Context) error {
	if s.txn != nil {
		return errInTx
	}
	dir, err := fs.Sub(migrations, "migrations/"+s.dialect)
	if err != nil {
		return err
	}
	d := goose.DialectSQLite3
	if s.dialect == dialectPostgres {
		d = goose.DialectPostgres
	}
	p, err := goose.NewProvider(d, s.db, dir)
	if err != nil {
		return fmt.Errorf("store: migrations: %w", err)
	}
	if _, err := p.Up(ctx); err != nil {
		return fmt.Errorf("store: migrate: %w", err)
	}
	return nil
}

// q rebinds a "?" query for the dialect. Queries are constants without
// string literals containing '?', so a plain scan is exact.
func (s *DB) q(query string) string {
	if s.dialect != dialectPostgres {
		return query
	}
	var b strings.Builder
	n := 0
	for i := 0; i < len(query); i++ {
		if query[i] == '?' {
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
			continue
		}
		b.WriteByte(query[i])
	}
	return b.String()
}

// querier is what *sql.DB and *sql.Tx share.
type querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// insert runs an INSERT ... RETURNING id. String arguments are stored
// through text.
func (s *DB) insert(ctx context.Context, qr querier, what, query string, args ...any) (int64, error) {
	var id int64
	if err := qr.QueryRowContext(ctx, s.q(query+" RETURNING id"), textArgs(args)...).Scan(&id); err != nil {
		return 0, s.classify(err, what)
	}
	return id, nil
}

// exec runs a write that must touch at least one row. String arguments are
// stored (and matched) through text.
func (s *DB) exec(ctx context.Context, qr querier, what, query string, args ...any) error {
	res, err := qr.ExecContext(ctx, s.q(query), textArgs(args)...)
	if err != nil {
		return s.classify(err, what)
	}
	if n, err := res.RowsAffected(); err == nil && n == 0 {
		return store.ErrNotFound
	}
	return nil
}

// classify maps driver errors to the store's error values. what names the
// unique rule the statement can break, for ConflictError.
func (s *DB) classify(err error, what string) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, sql.ErrNoRows) {
		return store.ErrNotFound
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case "23505":
			return &store.ConflictError{What: conflictWhat(what, pgErr.ConstraintName)}
		case "23503":
			return &store.InUseError{What: pgErr.TableName}
		}
		if pgErr.Code == "40P01" || pgErr.Code == "40001" { // deadlock_detected, serialization_failure
			return fmt.Errorf("%w: %v", store.ErrWriteConflict, err)
		}
		if pgUnavailable(pgErr.Code) {
			return fmt.Errorf("%w: %v", store.ErrUnavailable, err)
		}
		if pgRejected(pgErr.Code) {
			return fmt.Errorf("%w: %w", store.ErrRejected, err)
		}
		return err
	}
	var sqErr *sqlite.Error
	if errors.As(err, &sqErr) {
		switch sqErr.Code() {
		case sqlite3.SQLITE_CONSTRAINT_UNIQUE, sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY:
			return &store.ConflictError{What: conflictWhat(what, sqErr.Error())}
		case sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY:
			return &store.InUseError{What: "other rows"}
		}
		// The primary code is the low byte of the extended one.
		switch sqErr.Code() & 0xff {
		case sqlite3.SQLITE_CONSTRAINT, sqlite3.SQLITE_MISMATCH, sqlite3.SQLITE_TOOBIG:
			return fmt.Errorf("%w: %w", store.ErrRejected, err)
		}
		return err
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	var (
		connErr *pgconn.ConnectError
		netErr  net.Error
	)
	if errors.As(err, &connErr) || errors.Is(err, sql.ErrConnDone) || errors.Is(err, driver.ErrBadConn) ||
		errors.As(err, &netErr) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("%w: %v", store.ErrUnavailable, err)
	}
	return err
}

// pgUnavailable reports PostgreSQL errors that mean the database is not
// there to serve us rather than that the statement was wrong: the server is
// shutting down or refusing connections, the connection broke, or the
// schema rolter migrated at start is gone (renamed, dropped, restored
// elsewhere). They are retryable, so the admin API answers 503, not 500.
func pgUnavailable(code string) bool {
	switch code {
	case "57P01", "57P02", "57P03", // admin_shutdown, crash_shutdown, cannot_connect_now
		"53300",                   // too_many_connections
		"42P01", "3F000", "3D000": // undefined_table, invalid_schema_name, invalid_catalog_name
		return true
	}
	return strings.HasPrefix(code, "08") // connection_exception
}

// pgRejected reports PostgreSQL errors caused by the values a statement
// carries: a data exception (class 22: a number out of range, a bad
// encoding), an integrity constraint (class 23) other than the unique and
// foreign keys classify names, or a value too large to index (54000).
// The same values fail again; other rows would not.
func pgRejected(code string) bool {
	return strings.HasPrefix(code, "22") || strings.HasPrefix(code, "23") || code == "54000"
}

func conflictWhat(what, detail string) string {
	if what != "" {
		return what
	}
	return detail
}
