package sqlstore

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
)

// The SQLite store holds provider and host keys (in plain text without a
// master key), key hashes and every tenant's usage, so its files are
// created 0600: the owner alone reads them, whatever the umask.
const privateMode fs.FileMode = 0o600

// sqliteSuffixes are the files SQLite keeps beside the database in WAL mode.
var sqliteSuffixes = []string{"", "-wal", "-shm"}

// CreateSQLiteFile creates the SQLite database file at path, empty and
// 0600, when it does not exist yet; an existing file is left as it is.
// SQLite gives the -wal and -shm files it creates later the database
// file's mode, so they are 0600 too: left to SQLite, all three would be
// 0644 less the umask. Open calls it; so does a restore into a new file.
func CreateSQLiteFile(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, privateMode)
	if errors.Is(err, fs.ErrExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("store: create %s: %w", path, err)
	}
	// The umask may have taken bits from 0600 (0277 leaves the owner
	// unable to write); set the mode exactly.
	err = f.Chmod(privateMode)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
		return fmt.Errorf("store: create %s: %w", path, err)
	}
	return nil
}

// LooseFile is a store file that users other than its owner may access.
type LooseFile struct {
	Path string
	Mode fs.FileMode // permission bits
}

// LooseFiles returns the files of the SQLite store named by spec and
// dataDir (the database, its -wal and -shm) that exist and give the group
// or others any access. A PostgreSQL store, or files that do not exist,
// give none. rolter never changes the mode of a file it did not create: a
// loose one was made so by hand or by an older rolter, and the operator
// decides (see docs/backup.md).
func LooseFiles(spec, dataDir string) []LooseFile {
	path, ok := sqlitePath(spec, dataDir)
	if !ok {
		return nil
	}
	var out []LooseFile
	for _, s := range sqliteSuffixes {
		st, err := os.Stat(path + s)
		if err != nil || st.Mode().Perm()&0o077 == 0 {
			continue
		}
		out = append(out, LooseFile{Path: path + s, Mode: st.Mode().Perm()})
	}
	return out
}

// WarnLooseFiles logs one warning per file LooseFiles returns, naming the
// file and its mode (never its content).
func WarnLooseFiles(log *slog.Logger, spec, dataDir string) {
	for _, f := range LooseFiles(spec, dataDir) {
		log.Warn("store file is readable by other users: it holds provider and host keys (in plain text without ROLTER_MASTER_KEY); run chmod 600 on it",
			"file", f.Path, "mode", fmt.Sprintf("%#o", f.Mode))
	}
}

// sqlitePath returns the database file of a SQLite spec, as Open reads it.
func sqlitePath(spec, dataDir string) (string, bool) {
	if spec != "" && spec != "sqlite" && !strings.HasPrefix(spec, "sqlite:") {
		return "", false
	}
	path := strings.TrimPrefix(strings.TrimPrefix(spec, "sqlite"), ":")
	if path == "" {
		path = filepath.Join(dataDir, SQLiteFile)
	}
	return path, true
}
