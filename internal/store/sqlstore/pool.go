package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
)

// The PostgreSQL connection pool. A session costs the database a process
// fork, authentication and catalog cache warm-up, and costs each
// connection its prepared statements (pgx caches them per connection, so a
// steady connection parses each hot query once). The pool therefore keeps
// every connection it opened until it has been idle for MaxConnIdleTime or
// open for MaxConnLifetime: database/sql's default keeps only 2 idle
// connections and closes every other one as it is put back, so a burst of
// 8 concurrent queries used to open 6 sessions, every burst (issue 24).
//
// The lease (advisory lock) and the change listener each hold one of the
// pool's connections for as long as they run; queries share the rest.

// Pool defaults (docs/performance.md, "PostgreSQL sessions").
const (
	DefaultPoolMaxConns        = 16
	DefaultPoolMaxConnLifetime = time.Hour
	DefaultPoolMaxConnIdleTime = 30 * time.Minute
	// maxPoolConns caps pool_max_conns: PostgreSQL's own default
	// max_connections is 100, shared by every replica.
	maxPoolConns = 1000
	// DefaultApplicationName names rolter's sessions in pg_stat_activity
	// unless the URL (application_name) or PGAPPNAME says otherwise.
	DefaultApplicationName = "rolter"
)

// poolSettings are the pool's limits. They are set with query parameters
// of the --store URL, named as pgxpool names them, and removed from the
// URL before it reaches the driver (PostgreSQL would refuse them as
// unknown run-time parameters).
type poolSettings struct {
	maxConns        int           // pool_max_conns (default 16)
	maxConnLifetime time.Duration // pool_max_conn_lifetime (default 1h; 0: no limit)
	maxConnIdleTime time.Duration // pool_max_conn_idle_time (default 30m; 0: no limit)
}

// poolParams are the pool_ query parameters Open understands.
var poolParams = map[string]func(p *poolSettings, v string) error{
	"pool_max_conns": func(p *poolSettings, v string) error {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxPoolConns {
			return fmt.Errorf("want a whole number from 1 to %d", maxPoolConns)
		}
		p.maxConns = n
		return nil
	},
	"pool_max_conn_lifetime": func(p *poolSettings, v string) error {
		return parsePoolDuration(v, &p.maxConnLifetime)
	},
	"pool_max_conn_idle_time": func(p *poolSettings, v string) error {
		return parsePoolDuration(v, &p.maxConnIdleTime)
	},
}

func parsePoolDuration(v string, d *time.Duration) error {
	x, err := time.ParseDuration(v)
	if err != nil || x < 0 {
		return fmt.Errorf("want a duration such as 30m, or 0 for no limit")
	}
	*d = x
	return nil
}

// splitPoolParams removes the pool_ parameters from a postgres:// URL and
// returns the settings they make, defaults filled in. Unknown pool_
// parameters are errors, so that a typo does not pass for a setting.
func splitPoolParams(spec string) (string, poolSettings, error) {
	p := poolSettings{
		maxConns:        DefaultPoolMaxConns,
		maxConnLifetime: DefaultPoolMaxConnLifetime,
		maxConnIdleTime: DefaultPoolMaxConnIdleTime,
	}
	u, err := url.Parse(spec)
	if err != nil {
		// The driver reports a malformed URL without its password.
		return spec, p, nil
	}
	q := u.Query()
	found := false
	for k, vs := range q {
		if !strings.HasPrefix(k, "pool_") {
			continue
		}
		set, ok := poolParams[k]
		if !ok {
			return "", p, fmt.Errorf("unknown --store parameter %q: want one of %s", k, strings.Join(poolParamNames(), ", "))
		}
		if err := set(&p, vs[len(vs)-1]); err != nil {
			return "", p, fmt.Errorf("--store parameter %s=%q: %v", k, vs[len(vs)-1], err)
		}
		q.Del(k)
		found = true
	}
	if !found {
		return spec, p, nil
	}
	u.RawQuery = q.Encode()
	return u.String(), p, nil
}

func poolParamNames() []string {
	names := make([]string, 0, len(poolParams))
	for k := range poolParams {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}

// StripPoolParams returns a postgres:// URL without the pool_ parameters
// Open understands, for tools that connect with the same --store value
// (backups): PostgreSQL would refuse them.
func StripPoolParams(spec string) string {
	u, err := url.Parse(spec)
	if err != nil {
		return spec
	}
	q := u.Query()
	for k := range poolParams {
		q.Del(k)
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// openPostgres opens the pool for a postgres:// URL with the settings its
// pool_ parameters give. Every session it opens is counted in s.sessions.
func (s *DB) openPostgres(spec string) (*sql.DB, error) {
	spec, ps, err := splitPoolParams(spec)
	if err != nil {
		return nil, err
	}
	cfg, err := pgx.ParseConfig(spec)
	if err != nil {
		return nil, err
	}
	if cfg.RuntimeParams["application_name"] == "" {
		cfg.RuntimeParams["application_name"] = DefaultApplicationName
	}
	db := stdlib.OpenDB(*cfg, stdlib.OptionAfterConnect(func(context.Context, *pgx.Conn) error {
		s.sessions.Add(1)
		return nil
	}))
	db.SetMaxOpenConns(ps.maxConns)
	db.SetMaxIdleConns(ps.maxConns)
	db.SetConnMaxLifetime(ps.maxConnLifetime)
	db.SetConnMaxIdleTime(ps.maxConnIdleTime)
	return db, nil
}

// SessionsOpened returns how many PostgreSQL sessions this store has opened
// since Open; 0 on SQLite. At a steady load it stays flat: a rising count
// means connections are being discarded (see the pool comment above).
func (s *DB) SessionsOpened() int64 { return s.sessions.Load() }
