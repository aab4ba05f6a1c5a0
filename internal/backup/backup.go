// Package backup writes and restores one-file copies of rolter's store.
//
// A SQLite store is copied with SQLite's online backup API, so a running
// gateway may keep writing meanwhile, and gzipped: the artifact is
// rolter-sqlite-<UTC time>.db.gz. A PostgreSQL store is dumped with the
// installed pg_dump in its custom format (compressed) as
// rolter-postgres-<UTC time>.dump; only the schema the store lives in is
// dumped, so rolter should have a database or schema of its own.
//
// Restore replaces the whole store with the artifact's content. Stop the
// gateway first: a running one keeps serving the routing state it loaded,
// and on SQLite it holds the file a restore writes. Restore does not check
// that the gateway is stopped. After a restore the store is migrated
// forward, so an artifact from an older rolter is fine.
//
// What a restore cannot bring back is listed in docs/backup.md.
package backup

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/rolter/rolter/internal/store/sqlstore"
)

// Store dialects, as sqlstore names them.
const (
	dialectSQLite   = "sqlite"
	dialectPostgres = "postgres"
)

// Magic numbers that tell the artifact kinds apart.
var (
	gzipMagic  = []byte{0x1f, 0x8b}
	pgdmpMagic = []byte("PGDMP")
)

// target is a parsed --store value.
type target struct {
	dialect string
	path    string // SQLite: the database file
	url     string // PostgreSQL: the URL as given (it may hold a password)
}

// parseTarget reads spec as sqlstore.Open does.
func parseTarget(spec, dataDir string) (target, error) {
	switch {
	case spec == "" || spec == "sqlite" || strings.HasPrefix(spec, "sqlite:"):
		path := strings.TrimPrefix(strings.TrimPrefix(spec, "sqlite"), ":")
		if path == "" {
			path = filepath.Join(dataDir, sqlstore.SQLiteFile)
		}
		return target{dialect: dialectSQLite, path: path}, nil
	case strings.HasPrefix(spec, "postgres://") || strings.HasPrefix(spec, "postgresql://"):
		return target{dialect: dialectPostgres, url: spec}, nil
	}
	return target{}, fmt.Errorf("backup: unknown --store %q: want \"sqlite\", \"sqlite:PATH\" or a postgres:// URL", redactURL(spec))
}

// Describe names the store spec points at for messages, without a password.
func Describe(spec, dataDir string) string {
	t, err := parseTarget(spec, dataDir)
	if err != nil {
		return "store " + redactURL(spec)
	}
	if t.dialect == dialectSQLite {
		return "SQLite store " + t.path
	}
	return "PostgreSQL store " + redactURL(t.url)
}

// redactURL drops the password from a database URL.
func redactURL(spec string) string {
	u, err := url.Parse(spec)
	if err != nil {
		return "(unparsable URL)"
	}
	if q := u.Query(); q.Has("password") {
		q.Set("password", "xxxxx")
		u.RawQuery = q.Encode()
	}
	return u.Redacted()
}

// Backup writes one artifact of the store named by spec into outDir
// (created 0700 if missing) and returns its path. The name carries now in
// UTC; when that name is taken, a suffix -2, -3, ... is added: an existing
// file is never overwritten. The artifact is written under a temporary
// name, synced, and renamed into place, so a crash leaves no partial
// artifact under a final name. Its mode is 0600.
func Backup(ctx context.Context, spec, dataDir, outDir string, now time.Time) (string, error) {
	t, err := parseTarget(spec, dataDir)
	if err != nil {
		return "", err
	}
	if outDir == "" {
		return "", errors.New("backup: no output directory")
	}
	if err := os.MkdirAll(outDir, 0o700); err != nil {
		return "", fmt.Errorf("backup: create output directory: %w", err)
	}
	tmp, err := tempFile(outDir, ".rolter-backup-*.tmp")
	if err != nil {
		return "", err
	}
	defer os.Remove(tmp) // a no-op once it is renamed into place

	base := "rolter-" + t.dialect + "-" + now.UTC().Format("20060102T150405Z")
	ext := ".dump"
	if t.dialect == dialectSQLite {
		ext = ".db.gz"
		err = backupSQLite(ctx, t.path, tmp)
	} else {
		err = dumpPostgres(ctx, t.url, tmp)
	}
	if err != nil {
		return "", err
	}
	if err := syncFile(tmp); err != nil {
		return "", fmt.Errorf("backup: %w", err)
	}
	return publish(tmp, outDir, base, ext)
}

// tempFile creates an empty 0600 file in dir and returns its path.
func tempFile(dir, pattern string) (string, error) {
	f, err := os.CreateTemp(dir, pattern)
	if err != nil {
		return "", fmt.Errorf("backup: create temporary file: %w", err)
	}
	if err := f.Close(); err != nil {
		os.Remove(f.Name())
		return "", fmt.Errorf("backup: create temporary file: %w", err)
	}
	return f.Name(), nil
}

// maxSuffix bounds the names publish tries for one timestamp.
const maxSuffix = 100

// publish moves tmp to the first free name base[-N]ext in dir. The name is
// claimed with O_EXCL first, so two backups in the same second never
// overwrite each other or an older file, and then replaced by tmp in one
// rename.
func publish(tmp, dir, base, ext string) (string, error) {
	for i := 1; i <= maxSuffix; i++ {
		name := base + ext
		if i > 1 {
			name = fmt.Sprintf("%s-%d%s", base, i, ext)
		}
		final := filepath.Join(dir, name)
		f, err := os.OpenFile(final, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return "", fmt.Errorf("backup: %w", err)
		}
		_ = f.Close() // an empty placeholder: nothing was written to it
		if err := os.Rename(tmp, final); err != nil {
			os.Remove(final)
			return "", fmt.Errorf("backup: %w", err)
		}
		syncDir(dir)
		return final, nil
	}
	return "", fmt.Errorf("backup: %s%s and %d numbered variants already exist in %s", base, ext, maxSuffix-1, dir)
}

func syncFile(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		_ = f.Close() // the write error is the one to report
		return err
	}
	return f.Close()
}

// syncDir makes a rename durable where the platform allows; failures are
// ignored because some file systems refuse to sync a directory.
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		_ = d.Close()
	}
}

// Restore replaces the content of the store named by spec with the
// artifact file, then migrates the store forward. The artifact kind is
// read from its content and must match the store's dialect; an artifact
// that is damaged, or not rolter's, is refused before the store is
// touched. On PostgreSQL the replacement is one transaction; on SQLite it
// is one write transaction of the online backup API.
//
// A gateway serving the store would keep its old routing state, so Restore
// refuses while one runs (sqlstore.HoldRestore; the error wraps
// sqlstore.ErrServing and says what to do). RestoreForce restores anyway.
func Restore(ctx context.Context, spec, dataDir, file string) error {
	return restore(ctx, spec, dataDir, file, false)
}

// RestoreForce restores like Restore while gateways serve the store, then
// tells them to reload: on PostgreSQL a change announcement (NOTIFY) makes
// every replica rebuild its routing state from the restored store. On
// SQLite there is no announcement: the gateway serves its old routing state
// until it restarts (docs/backup.md). serving reports whether a gateway was
// seen.
func RestoreForce(ctx context.Context, spec, dataDir, file string) (serving bool, err error) {
	err = restore(ctx, spec, dataDir, file, true)
	if errors.Is(err, errForcedServing) {
		return true, nil
	}
	return false, err
}

// errForcedServing tells RestoreForce that it restored under a gateway.
var errForcedServing = errors.New("restored under a running gateway")

func restore(ctx context.Context, spec, dataDir, file string, force bool) error {
	t, err := parseTarget(spec, dataDir)
	if err != nil {
		return err
	}
	kind, err := detect(file)
	if err != nil {
		return err
	}
	if kind != t.dialect {
		return fmt.Errorf("backup: %s is a %s backup but the store is %s: restore it into a %s store",
			file, dialectName(kind), dialectName(t.dialect), dialectName(kind))
	}
	release, err := sqlstore.HoldRestore(ctx, spec, dataDir)
	serving := errors.Is(err, sqlstore.ErrServing)
	switch {
	case serving && !force:
		return fmt.Errorf("backup: %w (%s): it would keep serving its old routing state. Stop every gateway on this store and run the restore again, or run it with --force to restore anyway and have running replicas reload (PostgreSQL; a SQLite gateway must be restarted)",
			sqlstore.ErrServing, Describe(spec, dataDir))
	case serving:
		release = func() {}
	case err != nil:
		return err
	}
	defer release()
	if t.dialect == dialectSQLite {
		err = restoreSQLite(ctx, file, t.path)
	} else {
		err = restorePostgres(ctx, file, t.url)
	}
	if err != nil {
		return err
	}
	db, err := sqlstore.Open(ctx, spec, dataDir, nil) // migrates forward
	if err != nil {
		return fmt.Errorf("backup: restored %s, but the store does not open: %w", file, err)
	}
	defer db.Close()
	if serving {
		// On PostgreSQL every replica rebuilds its snapshot on this
		// announcement; on SQLite it does nothing.
		if err := db.NotifyChange(ctx); err != nil {
			return fmt.Errorf("backup: restored %s, but the running replicas were not told to reload (restart them): %w", file, err)
		}
		return errForcedServing
	}
	return nil
}

func dialectName(d string) string {
	if d == dialectSQLite {
		return "SQLite"
	}
	return "PostgreSQL"
}

// detect tells a SQLite artifact (gzip) from a PostgreSQL one (pg_dump
// custom format) by their first bytes.
func detect(file string) (string, error) {
	f, err := os.Open(file)
	if err != nil {
		return "", fmt.Errorf("backup: %w", err)
	}
	defer f.Close() //nolint:errcheck // opened read-only
	head := make([]byte, len(pgdmpMagic))
	n, err := io.ReadFull(f, head)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return "", fmt.Errorf("backup: %w", err)
	}
	head = head[:n]
	switch {
	case bytes.HasPrefix(head, gzipMagic):
		return dialectSQLite, nil
	case bytes.Equal(head, pgdmpMagic):
		return dialectPostgres, nil
	}
	return "", fmt.Errorf("backup: %s is not a rolter backup: neither a gzipped SQLite database (.db.gz) nor a pg_dump custom archive (.dump)", file)
}

// tail keeps the end of a tool's stderr for an error message.
func tail(b []byte) string {
	const max = 2000
	s := strings.TrimSpace(string(b))
	if len(s) > max {
		s = "..." + s[len(s)-max:]
	}
	return s
}
