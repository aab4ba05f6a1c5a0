package main

import (
	"os"
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

// TestServeRefusesBadNumbers: counts below 1 and non-positive durations
// are refused, naming the flag, instead of becoming defaults.
func TestServeRefusesBadNumbers(t *testing.T) {
	cmdEnv(t)
	dir := t.TempDir()
	for _, args := range [][]string{
		{"--max-attempts", "0"}, {"--max-body", "-1"}, {"--usage-buffer", "0"}, {"--probe-fail-after", "0"},
		{"--fleet-fail-after", "0"}, {"--idle-timeout", "0s"}, {"--fleet-probe-interval", "-1s"}, {"--shutdown-timeout", "-1s"},
		{"--body-timeout", "0s"}, {"--body-timeout", "soon"}, {"--client-write-timeout", "-5s"}, {"--credential-cooldown", "0s"},
		{"--metrics-token", "short"}, {"--upstream-client", "h2"},
	} {
		code, _, errOut := runCmd(t, append([]string{"serve", "--data-dir", dir, "--listen", "127.0.0.1:0"}, args...)...)
		if code != 1 || !strings.Contains(errOut, strings.TrimLeft(args[0], "-")) {
			t.Errorf("%v: exit %d, %s", args, code, errOut)
		}
	}
}

// TestServeRefusesShortAdminToken: a ROLTER_ADMIN_TOKEN under 24
// characters stops `rolter serve` with an error that names the variable and
// the rule, not the value, and nothing is created.
func TestServeRefusesShortAdminToken(t *testing.T) {
	cmdEnv(t)
	const short = "short-admin-FAKE"
	t.Setenv("ROLTER_ADMIN_TOKEN", short)
	dir := t.TempDir()
	code, out, errOut := runCmd(t, "serve", "--data-dir", dir, "--listen", "127.0.0.1:0")
	if code != 1 || !strings.Contains(errOut, "ROLTER_ADMIN_TOKEN") || !strings.Contains(errOut, "at least 24") ||
		strings.Contains(errOut+out, short) {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("the data dir was written: %v", entries)
	}
}
