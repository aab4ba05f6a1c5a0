package main

import (
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

// rolter version and rolter --version print the same build facts; in a
// test binary the version is "(devel)" and the revision unknown.
func TestVersionCommands(t *testing.T) {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		t.Fatal("no build info in the test binary")
	}
	want := versionText(bi, ok)
	for _, args := range [][]string{{"version"}, {"--version"}, {"-v"}} {
		code, out, errOut := runCmd(t, args...)
		if code != 0 || out != want || errOut != "" {
			t.Fatalf("rolter %s: exit %d, %q, stderr %q; want %q", args[0], code, out, errOut, want)
		}
		lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
		if len(lines) < 3 || !strings.HasPrefix(lines[0], "rolter ") || lines[0] == "rolter " || lines[0] == "rolter unknown" ||
			!strings.HasPrefix(lines[1], "revision: ") ||
			lines[len(lines)-1] != "go: "+runtime.Version()+" "+runtime.GOOS+"/"+runtime.GOARCH {
			t.Fatalf("rolter %s:\n%s", args[0], out)
		}
	}
	if code, _, errOut := runCmd(t, "version", "extra"); code == 0 || !strings.Contains(errOut, "extra") {
		t.Fatalf("version extra: exit %d, %q", code, errOut)
	}
}

func TestVersionText(t *testing.T) {
	stamped := &debug.BuildInfo{GoVersion: "go1.99.1", Main: debug.Module{Path: "github.com/rolter/rolter", Version: "v1.4.0"},
		Settings: []debug.BuildSetting{
			{Key: "vcs", Value: "git"},
			{Key: "vcs.revision", Value: "0123456789abcdef0123456789abcdef01234567"},
			{Key: "vcs.time", Value: "2026-01-02T03:04:05Z"},
			{Key: "vcs.modified", Value: "true"},
		}}
	platform := " " + runtime.GOOS + "/" + runtime.GOARCH + "\n"
	for _, c := range []struct {
		name string
		bi   *debug.BuildInfo
		ok   bool
		want string
	}{
		{"stamped, modified", stamped, true, "rolter v1.4.0\nrevision: 0123456789abcdef0123456789abcdef01234567 (modified)\ncommit time: 2026-01-02T03:04:05Z\ngo: go1.99.1" + platform},
		{"stamped, clean", &debug.BuildInfo{GoVersion: "go1.99.1", Main: debug.Module{Version: "v1.4.0"},
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "abc"}, {Key: "vcs.modified", Value: "false"}}}, true,
			"rolter v1.4.0\nrevision: abc\ngo: go1.99.1" + platform},
		{"devel, no vcs", &debug.BuildInfo{GoVersion: "go1.99.1", Main: debug.Module{Version: "(devel)"}}, true,
			"rolter (devel)\nrevision: unknown (built without VCS information)\ngo: go1.99.1" + platform},
		{"no build info", nil, false,
			"rolter unknown\nrevision: unknown (built without VCS information)\ngo: " + runtime.Version() + platform},
	} {
		if got := versionText(c.bi, c.ok); got != c.want {
			t.Errorf("%s:\n got %q\nwant %q", c.name, got, c.want)
		}
	}
}
