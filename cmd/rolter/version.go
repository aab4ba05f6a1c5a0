package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
)

// versionText is what `rolter version` and `rolter --version` print: the
// module version, the VCS revision (with its modified flag and commit
// time) and the Go version, all from the build info the Go toolchain
// embeds. A `go build` in a checkout stamps the revision; `go install
// module@version` stamps the version; a test binary has neither, and says
// so rather than leaving lines out.
func versionText(bi *debug.BuildInfo, ok bool) string {
	version, revision, modified, when, goVersion := "unknown", "", false, "", runtime.Version()
	if ok {
		if bi.Main.Version != "" {
			version = bi.Main.Version
		}
		if bi.GoVersion != "" {
			goVersion = bi.GoVersion
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				revision = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			case "vcs.time":
				when = s.Value
			}
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "rolter %s\n", version)
	switch {
	case revision == "":
		b.WriteString("revision: unknown (built without VCS information)\n")
	case modified:
		fmt.Fprintf(&b, "revision: %s (modified)\n", revision)
	default:
		fmt.Fprintf(&b, "revision: %s\n", revision)
	}
	if when != "" {
		fmt.Fprintf(&b, "commit time: %s\n", when)
	}
	fmt.Fprintf(&b, "go: %s %s/%s\n", goVersion, runtime.GOOS, runtime.GOARCH)
	return b.String()
}

// buildVersion is this binary's versionText.
func buildVersion() string { return versionText(debug.ReadBuildInfo()) }

func versionCmd(stdout io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "print the version, the VCS revision and the Go version (also rolter --version)",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			_, err := io.WriteString(stdout, buildVersion())
			return err
		},
	}
}
