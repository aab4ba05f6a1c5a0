package sqlstore_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/rolter/rolter/internal/store"
	"github.com/rolter/rolter/internal/store/sqlstore"
)

// withUmask sets the process umask for the rest of the test.
func withUmask(t *testing.T, mask int) {
	old := syscall.Umask(mask)
	t.Cleanup(func() { syscall.Umask(old) })
}

// checkPrivate opens the store, writes, and checks that the database, its
// -wal and its -shm are all 0600.
func checkPrivate(t *testing.T, spec, dataDir, path string) {
	t.Helper()
	db, err := sqlstore.Open(context.Background(), spec, dataDir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.CreateOrg(context.Background(), &store.Org{Name: "acme"}); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{path, path + "-wal", path + "-shm"} {
		st, err := os.Stat(f)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if m := st.Mode().Perm(); m != 0o600 {
			t.Errorf("%s is %#o, want 0600", f, m)
		}
	}
	if loose := sqlstore.LooseFiles(spec, dataDir); len(loose) != 0 {
		t.Errorf("LooseFiles on a store rolter created: %v", loose)
	}
}

// TestScenario30_FileModes: the SQLite database and its WAL and SHM files
// were created 0644 when the data dir already existed or sqlite:PATH was
// used, which with no master key let every local user read the upstream
// and host keys. They are 0600 whatever the umask, and a loose existing
// file is named in a warning (and left as it is).
func TestScenario30_FileModes(t *testing.T) {
	// 0277 takes the owner's write bit from what Open creates; directories
	// are made before it is set, since under it a new one is not writable.
	for _, mask := range []int{0o022, 0o000, 0o277} {
		t.Run(fmt.Sprintf("umask %#o", mask), func(t *testing.T) {
			existing, parent, other := t.TempDir(), t.TempDir(), t.TempDir()
			withUmask(t, mask)
			t.Run("data dir exists", func(t *testing.T) {
				checkPrivate(t, "sqlite", existing, filepath.Join(existing, sqlstore.SQLiteFile))
			})
			if mask&0o200 == 0 {
				t.Run("data dir created", func(t *testing.T) {
					dir := filepath.Join(parent, "data")
					checkPrivate(t, "sqlite", dir, filepath.Join(dir, sqlstore.SQLiteFile))
				})
			}
			t.Run("sqlite:PATH", func(t *testing.T) {
				path := filepath.Join(other, "my.db")
				checkPrivate(t, "sqlite:"+path, "", path)
			})
		})
	}

	t.Run("existing loose file warned about, not changed", func(t *testing.T) {
		withUmask(t, 0o022)
		path := filepath.Join(t.TempDir(), "old.db")
		if err := os.WriteFile(path, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		spec := "sqlite:" + path
		db, err := sqlstore.Open(context.Background(), spec, "", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if err := db.CreateOrg(context.Background(), &store.Org{Name: "acme"}); err != nil {
			t.Fatal(err)
		}
		var logs bytes.Buffer
		sqlstore.WarnLooseFiles(slog.New(slog.NewTextHandler(&logs, nil)), spec, "")
		// SQLite gave the -wal and -shm the database's mode: all three are
		// named.
		for _, f := range []string{path, path + "-wal", path + "-shm"} {
			want := fmt.Sprintf("level=WARN msg=\"store file is readable by other users: it holds provider and host keys (in plain text without ROLTER_MASTER_KEY); run chmod 600 on it\" file=%s mode=0644", f)
			if !strings.Contains(logs.String(), want+"\n") {
				t.Errorf("no warning for %s; logs:\n%s", f, logs.String())
			}
			if st, err := os.Stat(f); err != nil || st.Mode().Perm() != 0o644 {
				t.Errorf("%s: mode changed: %v %v", f, st.Mode(), err)
			}
		}
		if strings.Count(logs.String(), "\n") != 3 {
			t.Errorf("want 3 warnings:\n%s", logs.String())
		}
		if err := os.Chmod(path, 0o640); err != nil {
			t.Fatal(err)
		}
		loose := sqlstore.LooseFiles(spec, "")
		if len(loose) != 3 || loose[0] != (sqlstore.LooseFile{Path: path, Mode: 0o640}) {
			t.Errorf("LooseFiles after chmod 640: %v", loose)
		}
		for _, f := range []string{path, path + "-wal", path + "-shm"} {
			if err := os.Chmod(f, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		if loose := sqlstore.LooseFiles(spec, ""); len(loose) != 0 {
			t.Errorf("LooseFiles after chmod 600: %v", loose)
		}
	})

	t.Run("not SQLite, or no file", func(t *testing.T) {
		if l := sqlstore.LooseFiles("postgres://x@127.0.0.1/db", ""); l != nil {
			t.Errorf("postgres: %v", l)
		}
		if l := sqlstore.LooseFiles("sqlite", t.TempDir()); l != nil {
			t.Errorf("no file yet: %v", l)
		}
	})
}
