package backup

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" driver

	"github.com/rolter/rolter/internal/store/sqlstore"
)

// lockTimeout bounds how long a restore waits for the store's tables, so
// that a gateway left running makes it fail instead of hang.
const lockTimeout = "30s"

// libpqParams are the connection parameters libpq (pg_dump, pg_restore,
// psql) accepts in a URL. Anything else in a rolter URL is for pgx: client
// settings, or run-time parameters such as search_path, which the tools
// set themselves.
var libpqParams = map[string]bool{
	"host": true, "hostaddr": true, "port": true, "dbname": true, "user": true,
	"passfile": true, "channel_binding": true, "connect_timeout": true,
	"client_encoding": true, "options": true, "application_name": true,
	"fallback_application_name": true, "keepalives": true, "keepalives_idle": true,
	"keepalives_interval": true, "keepalives_count": true, "tcp_user_timeout": true,
	"sslmode": true, "requiressl": true, "sslcompression": true, "sslcert": true,
	"sslkey": true, "sslpassword": true, "sslrootcert": true, "sslcrl": true,
	"sslcrldir": true, "sslsni": true, "requirepeer": true, "ssl_min_protocol_version": true,
	"ssl_max_protocol_version": true, "gssencmode": true, "krbsrvname": true,
	"gsslib": true, "service": true, "target_session_attrs": true,
}

// pgConn is how the PostgreSQL tools reach the store: a URL without a
// password for their argv (which ps shows), and their environment, which
// carries the password as PGPASSWORD.
type pgConn struct {
	url string
	env []string
}

// libpqConn translates a rolter (pgx) URL for the PostgreSQL tools.
func libpqConn(spec string) (pgConn, error) {
	u, err := url.Parse(spec)
	if err != nil {
		return pgConn{}, fmt.Errorf("backup: the PostgreSQL URL does not parse: %v", redactErr(err, spec))
	}
	env := os.Environ()
	if u.User != nil {
		if pw, ok := u.User.Password(); ok {
			env = append(env, "PGPASSWORD="+pw)
		}
		u.User = url.User(u.User.Username())
	}
	q := url.Values{}
	for k, vs := range u.Query() {
		switch {
		case k == "password":
			env = append(env, "PGPASSWORD="+vs[len(vs)-1])
		case k == "database":
			q["dbname"] = vs
		case libpqParams[k]:
			q[k] = vs
		}
	}
	u.RawQuery = q.Encode()
	return pgConn{url: u.String(), env: env}, nil
}

// redactErr keeps a URL parse error from quoting the password.
func redactErr(err error, spec string) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err.Error()
	}
	return strings.ReplaceAll(err.Error(), spec, "(the URL)")
}

// pgTool finds a PostgreSQL client program on PATH.
func pgTool(name string) (string, error) {
	p, err := exec.LookPath(name)
	if err != nil {
		return "", fmt.Errorf("backup: %s not found on PATH: install the PostgreSQL client tools of your server's major version", name)
	}
	return p, nil
}

// schemaInfo is where the store lives in its database.
type schemaInfo struct {
	name   string
	exists bool // the schema exists
	store  bool // it holds rolter's tables (goose_db_version)
}

// connAndSchema returns the libpq connection settings of spec and the
// schema the store uses there.
func connAndSchema(ctx context.Context, spec string) (pgConn, schemaInfo, error) {
	conn, err := libpqConn(spec)
	if err != nil {
		return pgConn{}, schemaInfo{}, err
	}
	schema, err := storeSchema(ctx, spec)
	if err != nil {
		return pgConn{}, schemaInfo{}, err
	}
	return conn, schema, nil
}

// storeSchema connects as the gateway does and finds the schema its
// tables go to: the first existing schema of its search_path, or, when
// none exists yet, the first one named there.
func storeSchema(ctx context.Context, spec string) (schemaInfo, error) {
	db, err := sql.Open("pgx", sqlstore.StripPoolParams(spec)) // the pool_ settings are the gateway's
	if err != nil {
		return schemaInfo{}, fmt.Errorf("backup: connect to %s: %w", redactURL(spec), err)
	}
	defer db.Close()
	var (
		current        sql.NullString
		path, user     string
		info           schemaInfo
		goose, present bool
	)
	err = db.QueryRowContext(ctx, `SELECT current_schema(), current_setting('search_path'), current_user`).Scan(&current, &path, &user)
	if err != nil {
		return schemaInfo{}, fmt.Errorf("backup: connect to %s: %w", redactURL(spec), err)
	}
	info.name = current.String
	if !current.Valid {
		if info.name = firstSchema(path, user); info.name == "" {
			return schemaInfo{}, fmt.Errorf("backup: the search_path of %s names no schema", redactURL(spec))
		}
	}
	err = db.QueryRowContext(ctx, `SELECT
		EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1),
		to_regclass(format('%I.goose_db_version', $1::text)) IS NOT NULL`, info.name).Scan(&present, &goose)
	if err != nil {
		return schemaInfo{}, fmt.Errorf("backup: inspect schema %q: %w", info.name, err)
	}
	info.exists, info.store = present, goose
	return info, nil
}

// firstSchema is the first entry of a search_path setting, with "$user"
// resolved.
func firstSchema(path, user string) string {
	first, _, _ := strings.Cut(path, ",")
	first = strings.TrimSpace(first)
	if first == `"$user"` || first == "$user" {
		return user
	}
	if strings.HasPrefix(first, `"`) && strings.HasSuffix(first, `"`) && len(first) > 1 {
		return strings.ReplaceAll(first[1:len(first)-1], `""`, `"`)
	}
	return strings.ToLower(first)
}

// dumpPostgres writes the store's schema with pg_dump's custom format
// (compressed) to out.
func dumpPostgres(ctx context.Context, spec, out string) error {
	pgDump, err := pgTool("pg_dump")
	if err != nil {
		return err
	}
	conn, schema, err := connAndSchema(ctx, spec)
	if err != nil {
		return err
	}
	if !schema.store {
		return fmt.Errorf("backup: no rolter store in schema %q of %s (no goose_db_version table)", schema.name, redactURL(spec))
	}
	cmd := exec.CommandContext(ctx, pgDump,
		"--format=custom", "--no-owner", "--no-privileges",
		"--schema="+quotePattern(schema.name),
		"--file="+out, "--dbname="+conn.url)
	cmd.Env = conn.env
	return runTool(cmd, "pg_dump")
}

// quotePattern makes a schema name a pg_dump pattern that matches only
// itself.
func quotePattern(name string) string {
	return `"` + strings.ReplaceAll(name, `"`, `""`) + `"`
}

// runTool runs cmd and turns a failure into an error with its stderr.
func runTool(cmd *exec.Cmd, name string) error {
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("backup: %s: %v: %s", name, err, tail(stderr.Bytes()))
	}
	return nil
}

// restorePostgres replaces the store's schema with the archive's content.
// The archive is checked completely first (the schema it holds, and that
// every byte of it reads), and then, in one transaction fed to psql: every
// table, view and sequence in the schema is dropped (including any a newer
// rolter added since the backup), and pg_restore's script recreates the
// archive's objects and data. A failure anywhere rolls all of it back.
func restorePostgres(ctx context.Context, file, spec string) error {
	pgRestore, err := pgTool("pg_restore")
	if err != nil {
		return err
	}
	psql, err := pgTool("psql")
	if err != nil {
		return err
	}
	toc, err := readTOC(ctx, pgRestore, file)
	if err != nil {
		return err
	}
	// Reading the whole archive into nothing finds truncation and corruption
	// before the store is touched.
	if err := runTool(exec.CommandContext(ctx, pgRestore, "--file="+os.DevNull, file), "pg_restore"); err != nil {
		return fmt.Errorf("%w (is %s truncated or corrupt?)", err, file)
	}
	conn, schema, err := connAndSchema(ctx, spec)
	if err != nil {
		return err
	}
	if toc.schema != schema.name {
		return fmt.Errorf("backup: %s holds schema %q but the store uses schema %q: pg_restore cannot rename a schema; restore into a store whose search_path is %q",
			file, toc.schema, schema.name, toc.schema)
	}
	dir, err := os.MkdirTemp("", "rolter-restore-")
	if err != nil {
		return fmt.Errorf("backup: create temporary directory: %w", err)
	}
	defer os.RemoveAll(dir)
	list := filepath.Join(dir, "toc.list")
	if err := os.WriteFile(list, toc.list, 0o600); err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	script := exec.CommandContext(ctx, pgRestore,
		"--clean", "--if-exists", "--no-owner", "--no-privileges",
		"--use-list="+list, "--file=-", file)
	apply := exec.CommandContext(ctx, psql,
		"--no-psqlrc", "--quiet", "--set=ON_ERROR_STOP=1", "--dbname="+conn.url)
	apply.Env = conn.env
	return pipeInTransaction(script, apply, prelude(schema))
}

// toc is what restore needs from an archive's table of contents.
type toc struct {
	schema string // the one schema it holds
	list   []byte // the entries to restore: all but the schema's own
}

// readTOC lists the archive and checks that it is a rolter backup: one
// schema holding a goose_db_version table. The schema's own entries
// (CREATE SCHEMA, its comment) are left out of the list: restore keeps the
// existing schema, which the store's user may not own (public).
func readTOC(ctx context.Context, pgRestore, file string) (toc, error) {
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, pgRestore, "--list", file)
	cmd.Stdout = &out
	if err := runTool(cmd, "pg_restore"); err != nil {
		return toc{}, fmt.Errorf("%w (is %s truncated or corrupt?)", err, file)
	}
	var (
		t       toc
		schemas []string
		goose   bool
		list    bytes.Buffer
	)
	sc := bufio.NewScanner(&out)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		f := strings.Fields(line)
		switch {
		case len(f) >= 6 && f[3] == "SCHEMA" && f[4] == "-":
			schemas = append(schemas, f[5])
			continue
		case len(f) >= 7 && f[3] == "COMMENT" && f[4] == "-" && f[5] == "SCHEMA":
			continue
		case len(f) >= 6 && f[3] == "TABLE" && f[5] == "goose_db_version":
			goose = true
		}
		list.WriteString(line)
		list.WriteByte('\n')
	}
	if err := sc.Err(); err != nil {
		return toc{}, fmt.Errorf("backup: read the contents of %s: %w", file, err)
	}
	if len(schemas) != 1 || !goose {
		return toc{}, fmt.Errorf("backup: %s is a pg_dump archive but not a rolter backup (want one schema with a goose_db_version table; found schemas %q)", file, schemas)
	}
	t.schema, t.list = schemas[0], list.Bytes()
	return t, nil
}

// prelude starts the restore transaction and empties the schema, creating
// it if it does not exist.
func prelude(s schemaInfo) string {
	var b strings.Builder
	b.WriteString("BEGIN;\n")
	fmt.Fprintf(&b, "SET LOCAL lock_timeout = '%s';\n", lockTimeout)
	b.WriteString("SET LOCAL client_min_messages = warning;\n")
	if !s.exists {
		fmt.Fprintf(&b, "CREATE SCHEMA %s;\n", quoteIdent(s.name))
	}
	fmt.Fprintf(&b, `DO $rolter$
DECLARE r record;
BEGIN
  FOR r IN
    SELECT c.relkind, format('%%I.%%I', n.nspname, c.relname) AS name
    FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE n.nspname = %s AND c.relkind IN ('r', 'p', 'f', 'v', 'm', 'S')
    ORDER BY c.relkind = 'S' -- identity sequences go with their tables
  LOOP
    EXECUTE format('DROP %%s IF EXISTS %%s CASCADE',
      CASE r.relkind WHEN 'v' THEN 'VIEW' WHEN 'm' THEN 'MATERIALIZED VIEW'
        WHEN 'S' THEN 'SEQUENCE' WHEN 'f' THEN 'FOREIGN TABLE' ELSE 'TABLE' END,
      r.name);
  END LOOP;
END
$rolter$;
`, quoteLiteral(s.name))
	return b.String()
}

func quoteIdent(s string) string   { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }
func quoteLiteral(s string) string { return `'` + strings.ReplaceAll(s, `'`, `''`) + `'` }

// pipeInTransaction feeds apply (psql) the prelude, then the output of
// script (pg_restore), then COMMIT, but COMMIT only when script succeeded:
// otherwise psql reaches the end of its input inside the transaction and
// the server rolls it back.
func pipeInTransaction(script, apply *exec.Cmd, prelude string) error {
	pr, pw, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	var applyErr, scriptErr bytes.Buffer
	apply.Stdin, apply.Stdout, apply.Stderr = pr, io.Discard, &applyErr
	if err := apply.Start(); err != nil {
		_ = pr.Close()
		_ = pw.Close()
		return fmt.Errorf("backup: psql: %w", err)
	}
	_ = pr.Close()

	_, werr := io.WriteString(pw, prelude)
	var serr error
	if werr == nil {
		script.Stdout, script.Stderr = pw, &scriptErr
		serr = script.Run()
	}
	if werr == nil && serr == nil {
		_, werr = io.WriteString(pw, "COMMIT;\n")
	}
	_ = pw.Close()
	aerr := apply.Wait()

	switch {
	case aerr != nil:
		msg := tail(applyErr.Bytes())
		if strings.Contains(msg, "lock timeout") {
			msg += " (is the gateway still running? stop it before restoring)"
		}
		return fmt.Errorf("backup: restore failed and was rolled back: psql: %v: %s", aerr, msg)
	case serr != nil:
		return fmt.Errorf("backup: restore failed and was rolled back: pg_restore: %v: %s", serr, tail(scriptErr.Bytes()))
	case werr != nil:
		return fmt.Errorf("backup: restore failed and was rolled back: feeding psql: %w", werr)
	}
	return nil
}
