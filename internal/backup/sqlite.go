package backup

import (
	"compress/gzip"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"modernc.org/sqlite"

	"github.com/rolter/rolter/internal/store/sqlstore"
)

// backuper and restorer are the online backup entry points of the
// modernc.org/sqlite driver connection, reached through (*sql.Conn).Raw.
type (
	backuper interface {
		NewBackup(dstURI string) (*sqlite.Backup, error)
	}
	restorer interface {
		NewRestore(srcURI string) (*sqlite.Backup, error)
	}
)

// backupSQLite copies the database at src with the online backup API,
// checks the copy, and writes it gzipped to dst.
func backupSQLite(ctx context.Context, src, dst string) error {
	if _, err := os.Stat(src); err != nil {
		return fmt.Errorf("backup: no SQLite store at %s: %w", src, err)
	}
	raw, err := tempFile(filepath.Dir(dst), ".rolter-backup-*.db")
	if err != nil {
		return err
	}
	defer removeSQLite(raw)
	if err := copyOut(ctx, src, raw); err != nil {
		return err
	}
	if err := checkSQLite(ctx, raw); err != nil {
		return fmt.Errorf("backup: the copy of %s does not check out: %w", src, err)
	}
	return gzipFile(raw, dst)
}

// copyOut runs one online backup of src into the (empty) file dst. One
// step copies every page under a single read transaction, so the copy is
// consistent; in WAL mode writers are not blocked meanwhile.
func copyOut(ctx context.Context, src, dst string) error {
	db, err := sql.Open("sqlite", sqliteURI(src)+"?mode=rw&_pragma=busy_timeout(10000)")
	if err != nil {
		return fmt.Errorf("backup: open %s: %w", src, err)
	}
	defer db.Close()
	err = withConn(ctx, db, func(dc any) error {
		b, ok := dc.(backuper)
		if !ok {
			return fmt.Errorf("the SQLite driver (%T) has no online backup", dc)
		}
		bk, err := b.NewBackup(sqliteURI(dst))
		if err != nil {
			return err
		}
		return runBackup(bk)
	})
	if err != nil {
		return fmt.Errorf("backup: copy %s: %w", src, err)
	}
	return nil
}

// restoreSQLite unpacks file, checks that it is a rolter database, and
// copies it over the database at path with the online backup API.
func restoreSQLite(ctx context.Context, file, path string) error {
	dir, err := os.MkdirTemp(scratchDir(path), ".rolter-restore-")
	if err != nil {
		return fmt.Errorf("backup: create temporary directory: %w", err)
	}
	defer os.RemoveAll(dir)
	raw := filepath.Join(dir, "rolter.db")
	if err := gunzipFile(file, raw); err != nil {
		return err
	}
	if err := checkSQLite(ctx, raw); err != nil {
		return fmt.Errorf("backup: %s does not hold a rolter store: %w", file, err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("backup: create data dir: %w", err)
	}
	// A new store file is 0600, and so are the -wal and -shm SQLite makes
	// beside it.
	if err := sqlstore.CreateSQLiteFile(path); err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	if err := copyIn(ctx, raw, path); err != nil {
		return err
	}
	// A restore writes the whole store: it leaves it 0600 even where an
	// existing file was readable by others (it holds upstream and host keys
	// in plaintext without a master key).
	for _, f := range []string{path, path + "-wal", path + "-shm"} {
		if err := os.Chmod(f, 0o600); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("backup: restrict %s to its owner: %w", f, err)
		}
	}
	return nil
}

// scratchDir is where restore unpacks: beside the target when its
// directory exists (same file system, no surprise in a small /tmp), else
// the system's temporary directory.
func scratchDir(path string) string {
	if st, err := os.Stat(filepath.Dir(path)); err == nil && st.IsDir() {
		return filepath.Dir(path)
	}
	return ""
}

// copyIn replaces the content of the database at dst (created if missing)
// with the database file src, in one write transaction, then folds the WAL
// back into the main file.
func copyIn(ctx context.Context, src, dst string) error {
	db, err := sql.Open("sqlite", sqliteURI(dst)+"?_pragma=busy_timeout(10000)")
	if err != nil {
		return fmt.Errorf("backup: open %s: %w", dst, err)
	}
	defer db.Close()
	err = withConn(ctx, db, func(dc any) error {
		r, ok := dc.(restorer)
		if !ok {
			return fmt.Errorf("the SQLite driver (%T) has no online restore", dc)
		}
		bk, err := r.NewRestore(sqliteURI(src) + "?mode=ro&immutable=1")
		if err != nil {
			return err
		}
		return runBackup(bk)
	})
	if err != nil {
		return fmt.Errorf("backup: restore into %s (is the gateway still running?): %w", dst, err)
	}
	if _, err := db.ExecContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)"); err != nil {
		return fmt.Errorf("backup: checkpoint %s: %w", dst, err)
	}
	return nil
}

// withConn runs fn on one driver connection of db.
func withConn(ctx context.Context, db *sql.DB, fn func(dc any) error) error {
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	return conn.Raw(fn)
}

// runBackup copies every page in one step and releases the backup.
func runBackup(bk *sqlite.Backup) error {
	_, err := bk.Step(-1)
	if ferr := bk.Finish(); err == nil {
		err = ferr
	}
	return err
}

// checkSQLite opens path read-only and makes sure it is an intact SQLite
// database that rolter has migrated.
func checkSQLite(ctx context.Context, path string) error {
	db, err := sql.Open("sqlite", sqliteURI(path)+"?mode=ro&immutable=1")
	if err != nil {
		return err
	}
	defer db.Close()
	var res string
	if err := db.QueryRowContext(ctx, "PRAGMA quick_check").Scan(&res); err != nil {
		return fmt.Errorf("not a readable SQLite database: %w", err)
	}
	if res != "ok" {
		return fmt.Errorf("SQLite integrity check failed: %s", res)
	}
	var n int
	if err := db.QueryRowContext(ctx, "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'goose_db_version'").Scan(&n); err != nil {
		return err
	}
	if n == 0 {
		return errors.New("a SQLite database, but not rolter's (no goose_db_version table)")
	}
	return nil
}

// gzipFile writes src gzipped to the existing file dst.
func gzipFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	defer in.Close() //nolint:errcheck // opened read-only
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	zw := gzip.NewWriter(out)
	zw.Name = "rolter.db"
	_, err = io.Copy(zw, in)
	if cerr := zw.Close(); err == nil {
		err = cerr
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("backup: compress: %w", err)
	}
	return nil
}

// gunzipFile unpacks src into a new 0600 file dst, reading the whole
// stream, so a truncated or corrupt artifact fails here.
func gunzipFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	defer in.Close() //nolint:errcheck // opened read-only
	zr, err := gzip.NewReader(in)
	if err != nil {
		return fmt.Errorf("backup: %s is truncated or corrupt: %w", src, err)
	}
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	_, err = io.Copy(out, zr) //nolint:gosec // G110: the operator restores their own backup
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("backup: %s is truncated or corrupt: %w", src, err)
	}
	return nil
}

// removeSQLite removes a database file and the files SQLite keeps beside it.
func removeSQLite(path string) {
	for _, suffix := range []string{"", "-journal", "-wal", "-shm"} {
		os.Remove(path + suffix)
	}
}

// sqliteURI makes a "file:" URI of path; the characters that would end the
// path early are escaped.
func sqliteURI(path string) string {
	r := strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23")
	return "file:" + r.Replace(path)
}
