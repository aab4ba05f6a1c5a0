package main

import (
	"strings"
	"testing"
)

// TestAgentFlags: the agent refuses to start without a server or a fleet
// key, and never takes the key as a flag value.
func TestAgentFlags(t *testing.T) {
	cmdEnv(t)
	t.Setenv("ROLTER_SERVER", "")
	t.Setenv("ROLTER_FLEET_KEY", "")
	dir := t.TempDir()
	if code, _, errOut := runCmd(t, "agent", "--state-dir", dir); code != 1 || !strings.Contains(errOut, "--server") {
		t.Fatalf("no server: %d %s", code, errOut)
	}
	if code, _, errOut := runCmd(t, "agent", "--server", "http://127.0.0.1:1", "--state-dir", dir); code != 1 || !strings.Contains(errOut, "no fleet key") {
		t.Fatalf("no key: %d %s", code, errOut)
	}
	if code, _, errOut := runCmd(t, "agent", "--server", "http://127.0.0.1:1", "--fleet-key", "rf-x_y"); code != 1 || !strings.Contains(errOut, "not defined") {
		t.Fatalf("key as a flag: %d %s", code, errOut)
	}
	empty := writeFile(t, dir, "key", "\n")
	if code, _, errOut := runCmd(t, "agent", "--server", "http://127.0.0.1:1", "--fleet-key-file", empty); code != 1 || !strings.Contains(errOut, "is empty") {
		t.Fatalf("empty key file: %d %s", code, errOut)
	}
}
