package main

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/rolter/rolter/internal/agent"
)

// Issue 22, agent help text: rolter agent -h documents every flag, says
// how vLLM is launched as the agent does it (agent.LaunchDoc, held to the
// code by internal/agent TestLaunchMatchesDoc), and names only environment
// variables the command reads.
func TestAgentHelpMatchesFlags(t *testing.T) {
	code, _, help := runCmd(t, "agent", "-h")
	if code != 0 {
		t.Fatalf("agent -h: exit %d", code)
	}
	// flag.PrintDefaults: "  -name [type]" then the usage on the next line.
	lines := strings.Split(help, "\n")
	flagLine := regexp.MustCompile(`^  -([a-z-]+)`)
	var flags []string
	for i, l := range lines {
		m := flagLine.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		flags = append(flags, m[1])
		usage := strings.TrimSpace(strings.TrimPrefix(l, m[0]))
		if i+1 < len(lines) && strings.HasPrefix(lines[i+1], "    \t") {
			usage += " " + strings.TrimSpace(lines[i+1])
		}
		if len(strings.Fields(usage)) < 3 {
			t.Errorf("flag -%s is undocumented: %q", m[1], usage)
		}
	}
	want := []string{"fleet-key-file", "interval", "log-format", "log-level", "models-dir", "nvidia-smi", "server", "state-dir", "stop-grace", "vllm-command"}
	if strings.Join(flags, " ") != strings.Join(want, " ") {
		t.Errorf("agent -h lists flags %v, want %v (a new flag needs its help, and this list)", flags, want)
	}
	flat := strings.Join(strings.Fields(help), " ")
	if !strings.Contains(flat, strings.Join(strings.Fields(agent.LaunchDoc), " ")) {
		t.Errorf("agent -h does not say how vLLM is launched (agent.LaunchDoc):\n%s", help)
	}
	if strings.Contains(help, "--api-key") {
		t.Errorf("agent -h names --api-key, which the agent never passes:\n%s", help)
	}
	// Every environment variable the help names is read by the command
	// (its log flags are logFlags, in main.go).
	var src []byte
	for _, f := range []string{"agent.go", "main.go"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		src = append(src, b...)
	}
	for _, m := range regexp.MustCompile(`\b(ROLTER_[A-Z_]+)`).FindAllStringSubmatch(help, -1) {
		if !strings.Contains(string(src), `"`+m[1]+`"`) {
			t.Errorf("agent -h names %s, which agent.go does not read", m[1])
		}
	}
}
