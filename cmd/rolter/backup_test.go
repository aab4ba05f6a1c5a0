package main

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/rolter/rolter/internal/store"
	"github.com/rolter/rolter/internal/store/sqlstore"
)

var backupLine = regexp.MustCompile(`^rolter: backup written to (\S+) \(\d+(\.\d)? (B|KB|MB)\)\n$`)

// orgNames opens the SQLite store in dataDir, optionally adds an org, and
// returns the org names; the store is closed again.
func orgNames(t *testing.T, dataDir, add string) []string {
	t.Helper()
	ctx := context.Background()
	db, err := sqlstore.Open(ctx, "sqlite", dataDir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if add != "" {
		if err := db.CreateOrg(ctx, &store.Org{Name: add}); err != nil {
			t.Fatal(err)
		}
	}
	orgs, err := db.ListOrgs(ctx, store.Page{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, o := range orgs {
		names = append(names, o.Name)
	}
	return names
}

func TestBackupRestoreCmd(t *testing.T) {
	cmdEnv(t)
	dir := t.TempDir()
	data, out := filepath.Join(dir, "data"), filepath.Join(dir, "backups")
	orgNames(t, data, "acme")

	code, stdout, stderr := runCmd(t, "backup", "--data-dir", data, "--out", out)
	if code != 0 {
		t.Fatalf("backup: exit %d\n%s\n%s", code, stdout, stderr)
	}
	m := backupLine.FindStringSubmatch(stdout)
	if m == nil {
		t.Fatalf("backup printed %q", stdout)
	}
	path := m[1]
	if filepath.Dir(path) != out || !strings.HasPrefix(filepath.Base(path), "rolter-sqlite-") || !strings.HasSuffix(path, ".db.gz") {
		t.Errorf("backup path %s", path)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("the printed path: %v", err)
	}

	if got := orgNames(t, data, "after-backup"); strings.Join(got, ",") != "acme,after-backup" {
		t.Fatalf("orgs before restore: %v", got)
	}
	// Flags may follow FILE.
	code, stdout, stderr = runCmd(t, "restore", path, "--data-dir", data)
	if code != 0 {
		t.Fatalf("restore: exit %d\n%s\n%s", code, stdout, stderr)
	}
	want := "rolter: restored " + path + " into the SQLite store " + filepath.Join(data, sqlstore.SQLiteFile) + "; start the gateway again\n"
	if stdout != want {
		t.Errorf("restore printed %q, want %q", stdout, want)
	}
	if got := orgNames(t, data, ""); strings.Join(got, ",") != "acme" {
		t.Errorf("orgs after restore: %v, want [acme]", got)
	}
}

func TestBackupRestoreCmdErrors(t *testing.T) {
	cmdEnv(t)
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	orgNames(t, data, "acme")
	garbage := writeFile(t, dir, "garbage.db.gz", "not a backup")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"backup", "--data-dir", data}, "rolter backup: --out DIR is required\n"},
		{[]string{"backup", "--data-dir", data, "--out", dir, "extra"}, "rolter backup: unexpected arguments: extra\n"},
		{[]string{"backup", "--data-dir", filepath.Join(dir, "none"), "--out", dir}, "no SQLite store at"},
		{[]string{"restore", "--data-dir", data}, "rolter restore: want exactly one FILE\n"},
		{[]string{"restore", "--data-dir", data, garbage, garbage}, "rolter restore: want exactly one FILE\n"},
		{[]string{"restore", "--data-dir", data, garbage}, "is not a rolter backup"},
	} {
		code, stdout, stderr := runCmd(t, c.args...)
		if code != 1 || stdout != "" || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, stdout %q, stderr:\n%s\nwant %q", c.args, code, stdout, stderr, c.want)
		}
	}
	if got := orgNames(t, data, ""); strings.Join(got, ",") != "acme" {
		t.Errorf("orgs after refused restores: %v", got)
	}
}

// TestScenario30_FileModes_RestoreWarns: a restore writes the store 0600,
// also over an existing file others could read (which the warning at start
// names; after a restore there is nothing left to warn about).
func TestScenario30_FileModes_RestoreWarns(t *testing.T) {
	cmdEnv(t)
	dir := t.TempDir()
	data, out := filepath.Join(dir, "data"), filepath.Join(dir, "backups")
	orgNames(t, data, "acme")
	code, stdout, stderr := runCmd(t, "backup", "--data-dir", data, "--out", out)
	m := backupLine.FindStringSubmatch(stdout)
	if code != 0 || m == nil {
		t.Fatalf("backup: exit %d\n%s\n%s", code, stdout, stderr)
	}
	db := filepath.Join(data, sqlstore.SQLiteFile)
	code, _, stderr = runCmd(t, "restore", "--data-dir", data, m[1])
	if code != 0 || stderr != "" {
		t.Fatalf("restore into a 0600 store: exit %d, stderr %q", code, stderr)
	}
	if err := os.Chmod(db, 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, stderr = runCmd(t, "restore", "--data-dir", data, m[1])
	if code != 0 || stderr != "" {
		t.Fatalf("restore into a 0644 store: exit %d, stderr %q", code, stderr)
	}
	if st, err := os.Stat(db); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("a restore left the store %v (%v); want 0600", st.Mode().Perm(), err)
	}
}

func TestHumanSize(t *testing.T) {
	for n, want := range map[int64]string{
		0: "0 B", 1023: "1023 B", 1024: "1.0 KB", 123 * 1024: "123 KB",
		5 << 20: "5.0 MB", 300 << 30: "300 GB",
	} {
		if got := humanSize(n); got != want {
			t.Errorf("humanSize(%d) = %q, want %q", n, got, want)
		}
	}
}
