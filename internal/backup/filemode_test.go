package backup

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/rolter/rolter/internal/store"
	"github.com/rolter/rolter/internal/store/sqlstore"
)

// TestScenario30_FileModes_Restore: a restore creates the SQLite store, its
// -wal and -shm 0600 under a umask of 022, in an existing data dir and at
// sqlite:PATH, and the artifact itself is 0600; a restore over an existing
// file keeps that file's mode (serve and restore warn about it).
func TestScenario30_FileModes_Restore(t *testing.T) {
	ctx := context.Background()
	src := t.TempDir()
	populate(t, open(t, "sqlite", src, nil))
	out, existing, other := t.TempDir(), t.TempDir(), t.TempDir()

	old := syscall.Umask(0o022)
	t.Cleanup(func() { syscall.Umask(old) })

	artifact, err := Backup(ctx, "sqlite", src, out, when)
	must(t, err)
	checkMode(t, artifact, 0o600)

	modes := func(t *testing.T, spec, dataDir, path string) {
		t.Helper()
		must(t, Restore(ctx, spec, dataDir, artifact))
		for _, f := range []string{path, path + "-wal", path + "-shm"} {
			if _, err := os.Stat(f); err == nil {
				checkMode(t, f, 0o600)
			}
		}
		// The store as the gateway then runs it: all three files exist.
		db := open(t, spec, dataDir, nil)
		must(t, db.CreateOrg(ctx, &store.Org{Name: "after-restore"}))
		for _, f := range []string{path, path + "-wal", path + "-shm"} {
			checkMode(t, f, 0o600)
		}
		if l := sqlstore.LooseFiles(spec, dataDir); len(l) != 0 {
			t.Errorf("LooseFiles after restore: %v", l)
		}
	}
	t.Run("data dir exists", func(t *testing.T) {
		modes(t, "sqlite", existing, filepath.Join(existing, sqlstore.SQLiteFile))
	})
	t.Run("data dir created", func(t *testing.T) {
		dir := filepath.Join(existing, "new")
		modes(t, "sqlite", dir, filepath.Join(dir, sqlstore.SQLiteFile))
	})
	t.Run("sqlite:PATH", func(t *testing.T) {
		path := filepath.Join(other, "restored.db")
		modes(t, "sqlite:"+path, "", path)
	})
	t.Run("over a loose file", func(t *testing.T) {
		// A restore writes 0600 even over a file others could read.
		path := filepath.Join(other, "loose.db")
		must(t, os.WriteFile(path, nil, 0o644))
		must(t, Restore(ctx, "sqlite:"+path, "", artifact))
		checkMode(t, path, 0o600)
		if l := sqlstore.LooseFiles("sqlite:"+path, ""); len(l) != 0 {
			t.Errorf("LooseFiles after a restore over a 0644 file: %v", l)
		}
	})
}

func checkMode(t *testing.T, path string, want os.FileMode) {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if m := st.Mode().Perm(); m != want {
		t.Errorf("%s is %#o, want %#o", path, m, want)
	}
}
