package server_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rolter/rolter/internal/server"
	"github.com/rolter/rolter/internal/store/sqlstore"
)

// TestScenario30_FileModes_StartWarns: a store file others may read is
// named, with its mode, in a warning at start; one rolter created is not.
func TestScenario30_FileModes_StartWarns(t *testing.T) {
	loose := t.TempDir()
	db := filepath.Join(loose, sqlstore.SQLiteFile)
	if err := os.WriteFile(db, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(db, 0o644); err != nil { // whatever the umask
		t.Fatal(err)
	}
	r := start(t, server.Config{Store: "sqlite", DataDir: loose})
	if err := r.srv.Shutdown(); err != nil {
		t.Fatal(err)
	}
	want := `level=WARN msg="store file is readable by other users: it holds provider and host keys (in plain text without ROLTER_MASTER_KEY); run chmod 600 on it" file=` + db + " mode=0644\n"
	if !strings.Contains(r.logs.String(), want) {
		t.Fatalf("no warning naming %s at start; logs:\n%s", db, r.logs.String())
	}

	fresh := start(t, server.Config{Store: "sqlite", DataDir: t.TempDir()})
	if err := fresh.srv.Shutdown(); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(fresh.logs.String(), "readable by other users") {
		t.Fatalf("warning about a store rolter created:\n%s", fresh.logs.String())
	}
}
