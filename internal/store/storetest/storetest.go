// Package storetest opens real stores for tests: a SQLite file in a temp
// directory and a fresh schema in the PostgreSQL named by
// ROLTER_TEST_POSTGRES (default postgres://postgres@127.0.0.1:5432/test).
//
// Outside CI a test skips PostgreSQL when it cannot be reached, saying so;
// with CI=true an unreachable PostgreSQL fails the test.
package storetest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/rolter/rolter/internal/secret"
	"github.com/rolter/rolter/internal/store/sqlstore"
)

// DefaultPostgres is used when ROLTER_TEST_POSTGRES is unset.
const DefaultPostgres = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// Dialects are the store back ends every store-touching test runs on.
var Dialects = []string{"sqlite", "postgres"}

// Each runs fn as a subtest, named after the dialect, on every dialect in
// Dialects.
func Each(t *testing.T, fn func(t *testing.T, dialect string)) {
	t.Helper()
	for _, d := range Dialects {
		t.Run(d, func(t *testing.T) { fn(t, d) })
	}
}

// EachWith runs fn as a subtest on every dialect with what open builds on
// that dialect's store: a test harness, an environment.
func EachWith[H any](t *testing.T, open func(t *testing.T, dialect string) H, fn func(t *testing.T, h H)) {
	t.Helper()
	Each(t, func(t *testing.T, d string) { fn(t, open(t, d)) })
}

// Spec returns a --store value for dialect backed by fresh, empty storage
// that is removed when t ends, and the data dir to pass with it.
func Spec(t testing.TB, dialect string) (spec, dataDir string) {
	t.Helper()
	dataDir = t.TempDir()
	if dialect == "sqlite" {
		return "sqlite", dataDir
	}
	base := os.Getenv("ROLTER_TEST_POSTGRES")
	if base == "" {
		base = DefaultPostgres
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	admin, err := sql.Open("pgx", base)
	if err == nil {
		err = admin.PingContext(ctx)
	}
	if err != nil {
		if admin != nil {
			admin.Close()
		}
		if os.Getenv("CI") == "true" {
			t.Fatalf("PostgreSQL is required under CI=true but unreachable at %s: %v", base, err)
		}
		t.Skipf("skipping PostgreSQL: unreachable at %s (%v); set ROLTER_TEST_POSTGRES or start it", base, err)
	}
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	schema := "rolter_test_" + hex.EncodeToString(b)
	if _, err := admin.ExecContext(ctx, "CREATE SCHEMA "+schema); err != nil {
		admin.Close()
		t.Fatalf("create schema: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		// DROP SCHEMA ... CASCADE locks every table and the change
		// journal's triggers; a session of the test's server that is
		// still ending can deadlock with it, and the deadlock victim
		// may be the drop: it is tried again.
		var err error
		for range 5 {
			if _, err = admin.ExecContext(ctx, "DROP SCHEMA "+schema+" CASCADE"); err == nil || !strings.Contains(err.Error(), "40P01") {
				break
			}
		}
		if err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
		admin.Close()
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("ROLTER_TEST_POSTGRES: %v", err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String(), dataDir
}

// Open returns a migrated store for dialect, closed when t ends.
func Open(t testing.TB, dialect string, sealer *secret.Sealer) *sqlstore.DB {
	t.Helper()
	spec, dir := Spec(t, dialect)
	db, err := sqlstore.Open(context.Background(), spec, dir, sealer)
	if err != nil {
		t.Fatalf("open %s store: %v", dialect, err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// RefuseUsageStatus makes db refuse, as a constraint violation, every usage
// record whose status is at least limit: a real row-level failure, for
// tests of what happens to the rest of a batch. The schema has no such
// rule; SQLite gets it as a trigger (it cannot add a CHECK to a table),
// PostgreSQL as a CHECK constraint.
func RefuseUsageStatus(t testing.TB, db *sqlstore.DB, limit int) {
	t.Helper()
	var stmt string
	switch db.Dialect() {
	case "sqlite":
		stmt = fmt.Sprintf(`CREATE TRIGGER usage_status_limit BEFORE INSERT ON usage_records
			WHEN NEW.status >= %d BEGIN SELECT RAISE(ABORT, 'usage status out of range'); END`, limit)
	default:
		stmt = fmt.Sprintf(`ALTER TABLE usage_records ADD CONSTRAINT usage_status_limit CHECK (status < %d)`, limit)
	}
	if _, err := db.SQL().ExecContext(context.Background(), stmt); err != nil {
		t.Fatalf("add the usage status constraint: %v", err)
	}
}
