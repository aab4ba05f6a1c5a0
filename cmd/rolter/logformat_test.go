package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLogFormat(t *testing.T) {
	line := func(f logFlags, w *bytes.Buffer) string {
		t.Helper()
		log, err := f.logger(w)
		if err != nil {
			t.Fatal(err)
		}
		log.Debug("hidden")
		log.Info("shown", "request_id", "req-1")
		return w.String()
	}
	// Not a terminal (a buffer, a pipe, a file): JSON by default.
	out := line(logFlags{level: "info"}, &bytes.Buffer{})
	var rec map[string]any
	if err := json.Unmarshal([]byte(out), &rec); err != nil || rec["msg"] != "shown" || rec["request_id"] != "req-1" || rec["level"] != "INFO" {
		t.Fatalf("default format off a terminal: %q (%v)", out, err)
	}
	if out := line(logFlags{level: "debug", format: "text"}, &bytes.Buffer{}); !strings.Contains(out, "level=DEBUG msg=hidden\n") ||
		!strings.Contains(out, "msg=shown request_id=req-1\n") {
		t.Fatalf("text: %q", out)
	}
	if out := line(logFlags{level: "warn", format: "json"}, &bytes.Buffer{}); out != "" {
		t.Fatalf("below the level: %q", out)
	}
	if _, err := (logFlags{level: "info", format: "xml"}).logger(&bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), "--log-format") {
		t.Fatalf("bad format: %v", err)
	}
	if _, err := (logFlags{level: "loud"}).logger(&bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), "--log-level") {
		t.Fatalf("bad level: %v", err)
	}
}

func TestIsTerminal(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "log"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if isTerminal(f) || isTerminal(&bytes.Buffer{}) {
		t.Fatal("a file or a buffer is not a terminal")
	}
	// A character device stands in for a terminal: what the check sees
	// of one (the test has no pseudo-terminal to hand).
	dev, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	if !isTerminal(dev) {
		t.Fatal("a character device should count as a terminal")
	}
}

func TestServeRefusesBadLogFormat(t *testing.T) {
	code, _, errOut := runCmd(t, "serve", "--log-format", "xml", "--data-dir", t.TempDir())
	if code != 1 || !strings.Contains(errOut, `--log-format: "xml" is neither json nor text`) {
		t.Fatalf("exit %d, %q", code, errOut)
	}
	if code, _, errOut := runCmd(t, "help", "serve"); code != 0 || !strings.Contains(errOut, "-log-format") || !strings.Contains(errOut, "-admin-listen") {
		t.Fatalf("help serve: exit %d, %q", code, errOut)
	}
}
