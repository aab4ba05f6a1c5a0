package sqlstore_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rolter/rolter/internal/store"
	"github.com/rolter/rolter/internal/store/sqlstore"
	"github.com/rolter/rolter/internal/store/storetest"
)

// pgSpec returns a fresh PostgreSQL --store URL whose sessions carry an
// application_name of their own, so that pg_stat_activity tells them from
// those of the tests running beside this one, with params added.
func pgSpec(t testing.TB, params map[string]string) (spec, dir, app string) {
	t.Helper()
	spec, dir = storetest.Spec(t, "postgres")
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	app = "rolter_test_" + hex.EncodeToString(b)
	u, err := url.Parse(spec)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("application_name", app)
	for k, v := range params {
		q.Set(k, v)
	}
	u.RawQuery = q.Encode()
	return u.String(), dir, app
}

// backends lists the sessions PostgreSQL has for application_name app:
// pid and start time.
func backends(t testing.TB, mon *sql.DB, app string) map[int]time.Time {
	t.Helper()
	rows, err := mon.QueryContext(context.Background(), `SELECT pid, backend_start FROM pg_stat_activity WHERE application_name = $1`, app)
	if err != nil {
		t.Fatalf("pg_stat_activity: %v", err)
	}
	defer rows.Close()
	out := map[int]time.Time{}
	for rows.Next() {
		var (
			pid   int
			start time.Time
		)
		if err := rows.Scan(&pid, &start); err != nil {
			t.Fatal(err)
		}
		out[pid] = start
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// storeLoad is a steady mix of the store's hot calls: the fleet handler's
// key lookup and host list, usage writes (a transaction each), a budget
// read and an admin list.
type storeLoad struct {
	db      *sqlstore.DB
	org     int64
	project int64
}

func newStoreLoad(t testing.TB, db *sqlstore.DB) *storeLoad {
	o := &store.Org{Name: "acme"}
	if err := db.CreateOrg(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	p := &store.Project{OrgID: o.ID, Name: "p"}
	if err := db.CreateProject(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	return &storeLoad{db: db, org: o.ID, project: p.ID}
}

func (l *storeLoad) op(ctx context.Context, i int) error {
	var err error
	switch i % 5 {
	case 0:
		_, err = l.db.FleetKeyByLookup(ctx, "no-such-key")
		if errors.Is(err, store.ErrNotFound) {
			err = nil
		}
	case 1:
		_, err = l.db.ListHostsByIP(ctx, l.org, "10.0.0.1")
	case 2:
		err = l.db.InsertUsage(ctx, []store.UsageRecord{{OrgID: l.org, ProjectID: l.project, Address: "m", Status: 200}})
	case 3:
		_, err = l.db.SpentSince(ctx, 0, l.project, time.Now().Add(-time.Hour))
	case 4:
		_, err = l.db.ListProviders(ctx, l.org, store.Page{})
	}
	return err
}

// wave runs width operations at once and waits for them: the bursts a
// fleet polling on a schedule makes. during runs while they are in flight.
func (l *storeLoad) wave(t testing.TB, width int, during func()) {
	t.Helper()
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for i := range width {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := l.op(context.Background(), i); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}()
	}
	if during != nil {
		during()
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("%d operations failed, the first: %v", len(errs), errs[0])
	}
}

// TestPoolKeepsItsSessions runs thousands of store operations in bursts of
// 8 concurrent ones and checks that PostgreSQL sessions are opened only
// while the pool warms up. With database/sql's default of 2 idle
// connections each burst opened 6 new sessions (issue 24).
func TestPoolKeepsItsSessions(t *testing.T) {
	const (
		width = 8
		waves = 500 // 4,000 operations
	)
	spec, dir, app := pgSpec(t, nil)
	db, err := sqlstore.Open(context.Background(), spec, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	base := os.Getenv("ROLTER_TEST_POSTGRES")
	if base == "" {
		base = storetest.DefaultPostgres
	}
	mon, err := sql.Open("pgx", base)
	if err != nil {
		t.Fatal(err)
	}
	defer mon.Close()
	mon.SetMaxOpenConns(1)

	l := newStoreLoad(t, db)
	for range 3 { // warm-up
		l.wave(t, width, nil)
	}
	warm := db.SessionsOpened()
	if warm < 1 || warm > width+1 {
		t.Errorf("warm-up opened %d sessions; want 1..%d", warm, width+1)
	}
	warmBackends := backends(t, mon, app)
	if len(warmBackends) == 0 {
		t.Fatalf("no session with application_name %s in pg_stat_activity: the store does not name its sessions", app)
	}
	measured := time.Now()
	// PostgreSQL's view of the sessions, sampled while each wave is in
	// flight: a session opened and closed within the wave may be missed,
	// so the exact count is the store's own; this checks it.
	seen := map[int]bool{}
	for pid := range warmBackends {
		seen[pid] = true
	}
	for range waves {
		l.wave(t, width, func() {
			for pid := range backends(t, mon, app) {
				seen[pid] = true
			}
		})
	}
	opened := db.SessionsOpened() - warm
	t.Logf("%d operations in bursts of %d: %d sessions opened after warm-up (%d during it); PostgreSQL saw %d distinct sessions",
		width*waves, width, opened, warm, len(seen))
	if opened != 0 {
		t.Errorf("the store opened %d sessions after warm-up; want 0 (stats: %+v)", opened, db.SQL().Stats())
	}
	if len(seen) > sqlstore.DefaultPoolMaxConns {
		t.Errorf("PostgreSQL saw %d distinct sessions of %s; want at most the pool size %d", len(seen), app, sqlstore.DefaultPoolMaxConns)
	}
	for pid, start := range backends(t, mon, app) {
		if !start.Before(measured) {
			t.Errorf("session %d started at %v, after warm-up ended at %v", pid, start, measured)
		}
	}
}

// TestPreparedStatementsAreReused shows that pgx's statement cache parses
// a hot query once per session: on one connection, PostgreSQL holds one
// prepared statement for the key lookup, executed every time.
func TestPreparedStatementsAreReused(t *testing.T) {
	spec, dir, _ := pgSpec(t, map[string]string{"pool_max_conns": "1"})
	db, err := sqlstore.Open(context.Background(), spec, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	if got := db.SQL().Stats().MaxOpenConnections; got != 1 {
		t.Fatalf("pool_max_conns=1: MaxOpenConnections = %d", got)
	}
	const calls = 50
	for range calls {
		if _, err := db.FleetKeyByLookup(ctx, "no-such-key"); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("lookup: %v", err)
		}
	}
	// The pool has one connection, so this runs on the session above.
	var version int
	if err := db.SQL().QueryRowContext(ctx, `SELECT current_setting('server_version_num')::int`).Scan(&version); err != nil {
		t.Fatal(err)
	}
	var n, executions int
	plans := "0"
	if version >= 150000 { // generic_plans and custom_plans are new in 15
		plans = "COALESCE(SUM(generic_plans + custom_plans), 0)"
	}
	err = db.SQL().QueryRowContext(ctx, `SELECT COUNT(*), `+plans+` FROM pg_prepared_statements WHERE statement LIKE '%FROM fleet_keys WHERE lookup = $1%' AND statement NOT LIKE '%pg_prepared_statements%'`).Scan(&n, &executions)
	if err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Fatalf("%d prepared statements for the key lookup; want 1", n)
	}
	if version >= 150000 && executions != calls {
		t.Errorf("the prepared key lookup ran %d times; want %d", executions, calls)
	}
	if got := db.SessionsOpened(); got != 1 {
		t.Errorf("%d sessions opened; want 1", got)
	}
}

func TestPoolParameters(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct{ query, want string }{
		{"pool_max_conns=0", "pool_max_conns"},
		{"pool_max_conns=1001", "1 to 1000"},
		{"pool_max_conns=x", "pool_max_conns"},
		{"pool_max_conn_lifetime=-1s", "pool_max_conn_lifetime"},
		{"pool_max_conn_idle_time=soon", "pool_max_conn_idle_time"},
		{"pool_min_conns=2", `unknown --store parameter "pool_min_conns"`},
	} {
		// Nothing listens on port 1: a parameter error comes before any
		// connection is tried.
		_, err := sqlstore.Open(ctx, "postgres://rolter:hunter2secret@127.0.0.1:1/db?"+tc.query, t.TempDir(), nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want an error naming %q", tc.query, err, tc.want)
			continue
		}
		if strings.Contains(err.Error(), "hunter2secret") {
			t.Errorf("%s: the error quotes the password: %v", tc.query, err)
		}
	}

	spec, dir, app := pgSpec(t, map[string]string{"pool_max_conns": "3", "pool_max_conn_lifetime": "0", "pool_max_conn_idle_time": "5m"})
	db, err := sqlstore.Open(ctx, spec, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if got := db.SQL().Stats().MaxOpenConnections; got != 3 {
		t.Errorf("pool_max_conns=3: MaxOpenConnections = %d", got)
	}
	var name string
	if err := db.SQL().QueryRowContext(ctx, `SELECT current_setting('application_name')`).Scan(&name); err != nil || name != app {
		t.Errorf("application_name = %q, %v; want %q", name, err, app)
	}
	if got := sqlstore.StripPoolParams(spec); strings.Contains(got, "pool_") || !strings.Contains(got, "application_name="+app) {
		t.Errorf("StripPoolParams(%s) = %s", spec, got)
	}
}

func TestDefaultApplicationName(t *testing.T) {
	t.Setenv("PGAPPNAME", "")
	db := storetest.Open(t, "postgres", nil)
	var name string
	if err := db.SQL().QueryRowContext(context.Background(), `SELECT current_setting('application_name')`).Scan(&name); err != nil {
		t.Fatal(err)
	}
	if name != sqlstore.DefaultApplicationName {
		t.Errorf("application_name = %q; want %q", name, sqlstore.DefaultApplicationName)
	}
}
