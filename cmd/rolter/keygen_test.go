package main

import (
	"strings"
	"testing"

	"github.com/rolter/rolter/internal/secret"
)

// Issue 22, master key format: rolter keygen prints a key that the format
// check accepts, a fresh one each time; rolter serve refuses a weak key at
// start with the reason and without echoing it.
func TestKeygenAndWeakMasterKey(t *testing.T) {
	code, out, _ := runCmd(t, "keygen")
	key := strings.TrimSpace(out)
	if code != 0 || len(key) != 44 {
		t.Fatalf("keygen: exit %d, %q", code, out)
	}
	if _, err := secret.NewSealer(secret.New(key)); err != nil {
		t.Fatalf("keygen's key is refused: %v", err)
	}
	if _, again, _ := runCmd(t, "keygen"); strings.TrimSpace(again) == key {
		t.Fatal("keygen printed the same key twice")
	}
	if code, _, _ := runCmd(t, "keygen", "extra"); code == 0 {
		t.Fatal("keygen took an argument")
	}

	t.Setenv("ROLTER_MASTER_KEY", "hunter2")
	code, _, errOut := runCmd(t, "serve", "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0")
	if code == 0 || !strings.Contains(errOut, "ROLTER_MASTER_KEY") || !strings.Contains(errOut, "rolter keygen") || strings.Contains(errOut, "hunter2") {
		t.Fatalf("serve with a weak key: exit %d, %q", code, errOut)
	}
	code, _, errOut = runCmd(t, "import", "--data-dir", t.TempDir(), writeFile(t, t.TempDir(), "c.yml", "orgs: []\n"))
	if code == 0 || !strings.Contains(errOut, "ROLTER_MASTER_KEY") || strings.Contains(errOut, "hunter2") {
		t.Fatalf("import with a weak key: exit %d, %q", code, errOut)
	}
}
