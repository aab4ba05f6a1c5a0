package main

import (
	"net"
	"strings"
	"testing"
)

// The admin commands of package cli share the root with the commands of
// this package; internal/cli tests them against a real gateway.
func TestAdminCommandsAreWired(t *testing.T) {
	code, out, _ := runCmd(t, "help")
	for _, want := range []string{"serve", "import", "backup", "providers", "routes", "keys", "usage", "completion"} {
		if code != 0 || !strings.Contains(out, "\n  "+want+" ") {
			t.Errorf("rolter help lacks %q (exit %d):\n%s", want, code, out)
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	t.Setenv("ROLTER_ADMIN_TOKEN", "tok-FAKE-cmd-wired-0123456789ab")
	if code, _, errOut := runCmd(t, "providers", "list", "--server", "http://"+addr); code != 6 || !strings.Contains(errOut, "rolter providers list: cannot reach the gateway") {
		t.Errorf("providers list against a closed port: exit %d, %q", code, errOut)
	}
	if code, out, _ := runCmd(t, "completion", "bash"); code != 0 || !strings.Contains(out, "rolter") {
		t.Errorf("completion bash: exit %d", code)
	}
	// The flag-parsing commands keep their own help and exit codes.
	if code, _, errOut := runCmd(t, "migrate", "-h"); code != 0 || !strings.Contains(errOut, "-data-dir") {
		t.Errorf("migrate -h: exit %d, %q", code, errOut)
	}
	if code, _, errOut := runCmd(t, "help", "serve"); code != 0 || !strings.Contains(errOut, "-listen") {
		t.Errorf("help serve: exit %d, %q", code, errOut)
	}
	if code, _, errOut := runCmd(t, "serve", "--no-such-flag"); code != 1 || !strings.Contains(errOut, "rolter serve: flag provided but not defined") {
		t.Errorf("serve --no-such-flag: exit %d, %q", code, errOut)
	}
}
