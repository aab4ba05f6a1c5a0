package backup

import (
	"bytes"
	"compress/gzip"
	"context"
	"database/sql"
	"errors"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/pressly/goose/v3"

	"github.com/rolter/rolter/internal/secret"
	"github.com/rolter/rolter/internal/store"
	"github.com/rolter/rolter/internal/store/sqlstore"
	"github.com/rolter/rolter/internal/store/storetest"
)

const (
	masterKey   = "da27c28fc9bcb82dbb5ed4b2e80443c320a5bc388ee7668046a99f2644191539" // 32 random bytes in hex
	providerKey = "sk-backup-test-provider-key"
)

// when is the fixed time backups are named after.
var when = time.Date(2026, 11, 29, 19, 48, 0, 0, time.FixedZone("MSK", 3*3600))

// each runs fn as a subtest on every dialect.
func each(t *testing.T, fn func(t *testing.T, dialect string)) {
	storetest.Each(t, func(t *testing.T, d string) {
		if d == dialectPostgres {
			needTools(t, "pg_dump", "pg_restore", "psql")
		}
		fn(t, d)
	})
}

// needTools fails under CI=true, and skips elsewhere, when a PostgreSQL
// client program is missing.
func needTools(t *testing.T, names ...string) {
	t.Helper()
	for _, n := range names {
		if _, err := exec.LookPath(n); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("%s is required under CI=true but not on PATH", n)
			}
			t.Skipf("skipping PostgreSQL: %s not on PATH; install the PostgreSQL client tools", n)
		}
	}
}

func sealer(t *testing.T, key string) *secret.Sealer {
	t.Helper()
	s, err := secret.NewSealer(secret.New(key))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func open(t *testing.T, spec, dir string, s *secret.Sealer) *sqlstore.DB {
	t.Helper()
	db, err := sqlstore.Open(context.Background(), spec, dir, s)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// fixture is what the tests put in a store.
type fixture struct {
	route *store.Route
	token secret.Secret // the virtual key as a client holds it
}

func populate(t *testing.T, db store.Store) fixture {
	t.Helper()
	ctx := context.Background()
	o := &store.Org{Name: "acme", Description: "the org"}
	must(t, db.CreateOrg(ctx, o))
	pj := &store.Project{OrgID: o.ID, Name: "web"}
	must(t, db.CreateProject(ctx, pj))
	pv := &store.Provider{OrgID: o.ID, Slug: "vllm-a", Name: "vLLM A", Kind: "vllm",
		BaseURL: "http://127.0.0.1:1/v1", MetadataSource: "configured", ContextLimit: 32768,
		Models:   []string{"Qwen/Qwen3-8B"},
		Settings: store.ProviderSettings{FirstByteTimeout: store.Duration(30 * time.Second)},
		Keys:     []store.ProviderKey{{Secret: secret.New(providerKey), Weight: 2}}}
	must(t, db.CreateProvider(ctx, pv))
	r := &store.Route{ProjectID: pj.ID, Model: "qwen3", Strategy: "weighted",
		Policy:  store.Policy{MaxOutputTokens: 4096},
		Targets: []store.Target{{ProviderID: pv.ID, UpstreamModel: "Qwen/Qwen3-8B", Weight: 3}}}
	must(t, db.CreateRoute(ctx, r))
	tok, lookup := secret.Mint(secret.PrefixVirtualKey)
	exp := time.Now().Add(24 * time.Hour)
	must(t, db.CreateVirtualKey(ctx, &store.VirtualKey{ProjectID: pj.ID, Name: "ci", Lookup: lookup,
		Hash: secret.HashOf(tok.Reveal()), Models: []string{"qwen3"}, RPMLimit: 60, ExpiresAt: &exp}))
	must(t, db.CreateAdminToken(ctx, &store.AdminToken{Name: "bootstrap", Hash: secret.HashOf("ra-backup-test")}))
	must(t, db.InsertUsage(ctx, []store.UsageRecord{{OrgID: o.ID, ProjectID: pj.ID, AddressKind: "route",
		Address: "qwen3", Route: "qwen3", ProviderID: pv.ID, ProviderSlug: "vllm-a", Status: 200,
		Attempts: 1, Latency: 120 * time.Millisecond, PromptTokens: 10, CompletionTokens: 20}}))
	return fixture{route: r, token: tok}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// snapshot is everything the tests compare before and after.
type snapshot struct {
	State *store.State
	Usage []store.UsageRecord
}

func take(t *testing.T, db store.Store) snapshot {
	t.Helper()
	ctx := context.Background()
	st, err := db.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s := snapshot{State: st}
	for _, o := range st.Orgs {
		u, err := db.ListUsage(ctx, store.UsageFilter{OrgID: o.ID}, store.Page{Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		s.Usage = append(s.Usage, u...)
	}
	return s
}

func sameSnapshot(t *testing.T, what string, got, want snapshot) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s: the store differs\n got: %+v\nwant: %+v", what, *got.State, *want.State)
	}
}

// hasTable reports whether the store's schema has the table.
func hasTable(t *testing.T, db *sqlstore.DB, name string) bool {
	t.Helper()
	q := `SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?`
	if db.Dialect() == dialectPostgres {
		q = `SELECT count(*) FROM pg_tables WHERE schemaname = current_schema() AND tablename = $1`
	}
	var n int
	must(t, db.SQL().QueryRow(q, name).Scan(&n))
	return n > 0
}

func TestRoundTrip(t *testing.T) {
	each(t, func(t *testing.T, d string) {
		ctx := context.Background()
		spec, dir := storetest.Spec(t, d)
		db := open(t, spec, dir, sealer(t, masterKey))
		fx := populate(t, db)
		before := take(t, db)
		if n := len(before.State.Providers[0].Keys); n != 1 || len(before.Usage) != 1 {
			t.Fatalf("fixture: %d keys, %d usage records", n, len(before.Usage))
		}

		out := filepath.Join(t.TempDir(), "backups")
		path, err := Backup(ctx, spec, dir, out, when)
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]string{dialectSQLite: "rolter-sqlite-20261129T164800Z.db.gz", dialectPostgres: "rolter-postgres-20261129T164800Z.dump"}[d]
		if filepath.Base(path) != want || filepath.Dir(path) != out {
			t.Errorf("backup path %s, want %s in %s", path, want, out)
		}
		checkArtifact(t, path)

		// Change the store after the backup, including a table a newer
		// rolter might have added.
		must(t, db.DeleteRoute(ctx, fx.route.ID))
		must(t, db.CreateOrg(ctx, &store.Org{Name: "after-backup"}))
		_, err = db.SQL().ExecContext(ctx, `CREATE TABLE extra_after_backup (id INTEGER PRIMARY KEY)`)
		must(t, err)
		if reflect.DeepEqual(take(t, db), before) {
			t.Fatal("the change after the backup changed nothing")
		}
		must(t, db.Close()) // the gateway is stopped for a restore

		if err := Restore(ctx, spec, dir, path); err != nil {
			t.Fatal(err)
		}
		db = open(t, spec, dir, sealer(t, masterKey))
		sameSnapshot(t, "after restore", take(t, db), before)
		if hasTable(t, db, "extra_after_backup") {
			t.Error("a table created after the backup survived the restore")
		}
		st, err := db.Load(ctx)
		must(t, err)
		if k := st.Providers[0].Keys[0].Secret.Reveal(); k != providerKey {
			t.Errorf("provider key after restore: %q", k)
		}
		if !st.VirtualKeys[0].Hash.Equal(secret.HashOf(fx.token.Reveal())) {
			t.Error("the virtual key minted before the backup no longer matches")
		}
		// The store stays writable after the restore (sequences, ids).
		must(t, db.CreateOrg(ctx, &store.Org{Name: "after-restore"}))

		// Provider keys are sealed: another master key cannot read them.
		other := open(t, spec, dir, sealer(t, "ed75b79a4f5a71e7f0f7032263f4f120f4d60f300f5db5ac96ec5707b7605626"))
		if _, err := other.Load(ctx); !errors.Is(err, secret.ErrWrongMasterKey) {
			t.Errorf("Load with another master key: %v, want ErrWrongMasterKey", err)
		}
	})
}

// checkArtifact checks the mode of a backup file and that it is what its
// name says.
func checkArtifact(t *testing.T, path string) {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("%s has mode %v, want 0600", path, st.Mode().Perm())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(b, []byte(providerKey)) {
		t.Errorf("%s holds the provider key in plain text", path)
	}
	if strings.HasSuffix(path, ".db.gz") {
		zr, err := gzip.NewReader(bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		head := make([]byte, 16)
		if _, err := zr.Read(head); err != nil || string(head) != "SQLite format 3\x00" {
			t.Errorf("%s does not unpack to a SQLite database: %q %v", path, head, err)
		}
	} else if !bytes.HasPrefix(b, []byte("PGDMP")) {
		t.Errorf("%s is not a pg_dump custom archive", path)
	}
}

// TestRestoreOlderBackup restores a backup taken at the first schema
// version into a store a newer rolter has migrated: the newer tables go,
// and the store is migrated forward again.
func TestRestoreOlderBackup(t *testing.T) {
	each(t, func(t *testing.T, d string) {
		ctx := context.Background()
		spec, dir := storetest.Spec(t, d)
		driver, dsn, gd := "sqlite", "file:"+filepath.Join(dir, sqlstore.SQLiteFile)+"?_pragma=journal_mode(WAL)", goose.DialectSQLite3
		if d == dialectPostgres {
			driver, dsn, gd = "pgx", spec, goose.DialectPostgres
		}
		raw, err := sql.Open(driver, dsn)
		must(t, err)
		p, err := goose.NewProvider(gd, raw, os.DirFS(filepath.Join("..", "store", "sqlstore", "migrations", d)))
		must(t, err)
		_, err = p.UpTo(ctx, 1)
		must(t, err)
		_, err = raw.ExecContext(ctx, `INSERT INTO orgs (name, created_at, updated_at) VALUES ('old', CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)`)
		must(t, err)
		must(t, raw.Close())
		path, err := Backup(ctx, spec, dir, t.TempDir(), when)
		must(t, err)

		db := open(t, spec, dir, nil) // migrates to the newest version
		must(t, db.CreateOrg(ctx, &store.Org{Name: "new"}))
		must(t, db.Close())

		must(t, Restore(ctx, spec, dir, path))
		db = open(t, spec, dir, nil)
		st, err := db.Load(ctx)
		must(t, err)
		if len(st.Orgs) != 1 || st.Orgs[0].Name != "old" {
			t.Errorf("orgs after restoring the old backup: %+v", st.Orgs)
		}
		var version int64
		must(t, db.SQL().QueryRowContext(ctx, `SELECT max(version_id) FROM goose_db_version`).Scan(&version))
		if version <= 1 {
			t.Errorf("schema version %d after restore: not migrated forward", version)
		}
	})
}

func TestRefusedRestoreChangesNothing(t *testing.T) {
	each(t, func(t *testing.T, d string) {
		ctx := context.Background()
		spec, dir := storetest.Spec(t, d)
		db := open(t, spec, dir, nil)
		populate(t, db)
		good, err := Backup(ctx, spec, dir, t.TempDir(), when)
		must(t, err)
		must(t, db.CreateOrg(ctx, &store.Org{Name: "after-backup"}))
		before := take(t, db)

		files := t.TempDir()
		write := func(name string, b []byte) string {
			p := filepath.Join(files, name)
			must(t, os.WriteFile(p, b, 0o600))
			return p
		}
		artifact, err := os.ReadFile(good)
		must(t, err)
		cases := []struct {
			name, file, want string
		}{
			{"empty", write("empty", nil), "not a rolter backup"},
			{"garbage", write("garbage", []byte("hello, this is not a backup\n")), "not a rolter backup"},
			{"truncated", write("truncated", artifact[:len(artifact)/2]), "truncated or corrupt"},
			{"last byte cut", write("cut", artifact[:len(artifact)-1]), "truncated or corrupt"},
			{"missing", filepath.Join(files, "nope"), "no such file"},
		}
		if d == dialectSQLite {
			cases = append(cases,
				struct{ name, file, want string }{"gzipped garbage", write("gz", gz(t, bytes.Repeat([]byte("junk"), 2000))), "not a readable SQLite database"},
				struct{ name, file, want string }{"foreign SQLite", write("foreign", gz(t, foreignSQLite(t))), "not rolter's"},
			)
		} else {
			cases = append(cases,
				struct{ name, file, want string }{"PGDMP garbage", write("pgdmp", []byte("PGDMP and then nothing useful")), "truncated or corrupt"},
			)
		}
		for _, c := range cases {
			err := Restore(ctx, spec, dir, c.file)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%s: Restore = %v, want an error with %q", c.name, err, c.want)
			}
			sameSnapshot(t, c.name, take(t, db), before)
		}
		if d == dialectSQLite {
			if left, _ := filepath.Glob(filepath.Join(dir, ".rolter-restore-*")); len(left) > 0 {
				t.Errorf("refused restores left %v behind", left)
			}
		}
	})
}

func gz(t *testing.T, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	_, err := zw.Write(b)
	must(t, err)
	must(t, zw.Close())
	return buf.Bytes()
}

// foreignSQLite is an intact SQLite database that rolter never migrated.
func foreignSQLite(t *testing.T) []byte {
	t.Helper()
	p := filepath.Join(t.TempDir(), "other.db")
	db := open(t, "sqlite:"+p, "", nil)
	_, err := db.SQL().Exec(`DROP TABLE goose_db_version`)
	must(t, err)
	_, err = db.SQL().Exec(`PRAGMA wal_checkpoint(TRUNCATE)`)
	must(t, err)
	must(t, db.Close())
	b, err := os.ReadFile(p)
	must(t, err)
	return b
}

func TestCrossDialectRefused(t *testing.T) {
	needTools(t, "pg_dump", "pg_restore", "psql")
	ctx := context.Background()
	specs := map[string][2]string{}
	stores := map[string]*sqlstore.DB{}
	artifacts := map[string]string{}
	for _, d := range storetest.Dialects {
		spec, dir := storetest.Spec(t, d)
		specs[d] = [2]string{spec, dir}
		stores[d] = open(t, spec, dir, nil)
		populate(t, stores[d])
		p, err := Backup(ctx, spec, dir, t.TempDir(), when)
		must(t, err)
		artifacts[d] = p
	}
	for _, d := range storetest.Dialects {
		before := take(t, stores[d])
		for _, from := range storetest.Dialects {
			if from == d {
				continue
			}
			err := Restore(ctx, specs[d][0], specs[d][1], artifacts[from])
			want := "is a " + dialectName(from) + " backup but the store is " + dialectName(d)
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("%s artifact into %s store: %v, want %q", from, d, err, want)
			}
		}
		sameSnapshot(t, d+" after a refused cross-dialect restore", take(t, stores[d]), before)
	}
}

func TestBackupNeverOverwrites(t *testing.T) {
	ctx := context.Background()
	spec, dir := storetest.Spec(t, dialectSQLite)
	db := open(t, spec, dir, nil)
	populate(t, db)
	out := t.TempDir()
	var paths []string
	for range 3 {
		p, err := Backup(ctx, spec, dir, out, when)
		must(t, err)
		paths = append(paths, filepath.Base(p))
	}
	want := []string{
		"rolter-sqlite-20261129T164800Z.db.gz",
		"rolter-sqlite-20261129T164800Z-2.db.gz",
		"rolter-sqlite-20261129T164800Z-3.db.gz",
	}
	if !reflect.DeepEqual(paths, want) {
		t.Errorf("backups in the same second: %q, want %q", paths, want)
	}
	entries, err := os.ReadDir(out)
	must(t, err)
	if len(entries) != len(want) {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("the output directory holds %q, want only the backups", names)
	}
	// A later backup has a later name.
	p, err := Backup(ctx, spec, dir, out, when.Add(time.Second))
	must(t, err)
	if !regexp.MustCompile(`^rolter-sqlite-20261129T164801Z\.db\.gz$`).MatchString(filepath.Base(p)) {
		t.Errorf("next second: %s", p)
	}
}

func TestBackupErrors(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	if _, err := Backup(ctx, "sqlite", filepath.Join(dir, "nodata"), out, when); err == nil || !strings.Contains(err.Error(), "no SQLite store at") {
		t.Errorf("backup of a missing store: %v", err)
	}
	if left, _ := os.ReadDir(out); len(left) != 0 {
		t.Errorf("a failed backup left %d files", len(left))
	}
	if _, err := Backup(ctx, "mysql://x", dir, out, when); err == nil || !strings.Contains(err.Error(), "unknown --store") {
		t.Errorf("unknown store: %v", err)
	}
	if _, err := Backup(ctx, "sqlite", dir, "", when); err == nil {
		t.Error("backup without an output directory succeeded")
	}
}

func TestLibpqConn(t *testing.T) {
	c, err := libpqConn("postgres://rolter:s3cret%21@db.example:5433/rolter?sslmode=require&search_path=rolter&statement_cache_capacity=10&password=other&application_name=rolter")
	must(t, err)
	if strings.Contains(c.url, "s3cret") || strings.Contains(c.url, "other") {
		t.Errorf("the password is in the tools' argv: %s", c.url)
	}
	u, err := url.Parse(c.url)
	must(t, err)
	if u.User.String() != "rolter" || u.Host != "db.example:5433" || u.Path != "/rolter" {
		t.Errorf("url: %s", c.url)
	}
	if q := u.Query(); q.Get("sslmode") != "require" || q.Get("application_name") != "rolter" || q.Has("search_path") || q.Has("statement_cache_capacity") {
		t.Errorf("query: %s", u.RawQuery)
	}
	// The last PGPASSWORD wins in exec.Cmd.Env; the query parameter comes
	// after the user info, as in pgx.
	var pw string
	for _, e := range c.env {
		if v, ok := strings.CutPrefix(e, "PGPASSWORD="); ok {
			pw = v
		}
	}
	if pw != "other" {
		t.Errorf("PGPASSWORD = %q", pw)
	}
	if got := Describe("postgres://rolter:s3cret@db/rolter", ""); strings.Contains(got, "s3cret") {
		t.Errorf("Describe leaks the password: %s", got)
	}
	if got := Describe("sqlite", "/data"); got != "SQLite store /data/rolter.db" {
		t.Errorf("Describe(sqlite) = %q", got)
	}
}

func TestFirstSchema(t *testing.T) {
	for in, want := range map[string]string{
		`"$user", public`: "me",
		`rolter, public`:  "rolter",
		`"My Schema", x`:  "My Schema",
		`Rolter`:          "rolter",
		``:                "",
	} {
		if got := firstSchema(in, "me"); got != want {
			t.Errorf("firstSchema(%q) = %q, want %q", in, got, want)
		}
	}
}
