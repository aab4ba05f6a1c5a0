package cli

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/rolter/rolter/internal/readiness"
	"github.com/rolter/rolter/internal/server"
	"github.com/rolter/rolter/internal/testkit"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from this run's output")

var (
	// A timestamp as the API sends it (YAML keeps its quotes) or as a
	// table shows it.
	timeRe = regexp.MustCompile(`"?\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)"?`)
	// A virtual key, admin token, fleet key or host key, or its prefix.
	secretRe = regexp.MustCompile(`\b(r[kafh]-)([A-Za-z0-9_-]{6,})`)
)

// mask makes output comparable across runs. In a table a timestamp
// becomes a mask of its own width, so the columns stay aligned as they
// were; a secret keeps its length everywhere.
func mask(s string, table bool) string {
	s = timeRe.ReplaceAllStringFunc(s, func(m string) string {
		if table {
			return "YYYY-MM-DDThh:mm:ssZ"[:min(len(m), 20)]
		}
		return "<time>"
	})
	return secretRe.ReplaceAllStringFunc(s, func(m string) string {
		return m[:3] + strings.Repeat("x", len(m)-3)
	})
}

// golden compares got with testdata/name.golden, or rewrites it.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o600); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./internal/cli -run TestGolden -update to write it)", err)
	}
	if !bytes.Equal(want, []byte(got)) {
		t.Errorf("%s differs from %s (rewrite with -update if the change is meant):\n--- got\n%s--- want\n%s", name, path, got, want)
	}
}

// TestGolden prints the table and YAML forms of providers, routes and a
// key's creation against a gateway of its own, so that ids do not depend
// on the other tests. Its providers point at a closed port and are probed
// once (the interval is an hour): their readiness is the first probe's,
// the same on every run.
func TestGolden(t *testing.T) {
	g, err := startGateway(server.Config{Metadata: readiness.Config{Interval: time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := g.close(); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	}()
	const upstreamKey = "sk-FAKE-golden-upstream-0001"
	c := cmd{env: map[string]string{"VLLM_KEY": upstreamKey}}
	run := func(args ...string) string {
		t.Helper()
		r := c.on(t, g, args...)
		if r.code != 0 {
			t.Fatalf("rolter %s: %v", strings.Join(args, " "), r)
		}
		testkit.AssertNoSecrets(t, "output", r.stdout+r.stderr, upstreamKey)
		return r.stdout
	}
	run("providers", "create", "--name", "My vLLM", "--kind", "vllm", "--base-url", "http://127.0.0.1:9/v1",
		"--model", "Qwen/Qwen3-8B", "--model", "qwen3", "--key-env", "VLLM_KEY", "--context-limit", "32768")
	run("providers", "create", "-f", writeTemp(t, "hosted.yaml", `name: Hosted
slug: hosted
kind: openai
base_url: http://127.0.0.1:9/v1
prices: {input: 0.15, output: "0.60"}
policy: {max_output_tokens: 4096}
`))
	for _, slug := range []string{"my-vllm", "hosted"} {
		testkit.Eventually(t, slug+"'s first probe", func() bool {
			var p struct {
				Readiness struct {
					LastProbe string `json:"last_probe"`
				}
			}
			return json.Unmarshal([]byte(run("providers", "get", slug, "-o", "json")), &p) == nil && p.Readiness.LastProbe != ""
		})
	}
	run("routes", "create", "--model", "qwen3", "--target", "my-vllm:Qwen/Qwen3-8B:3", "--target", "hosted:gpt-4o-mini", "--rpm-limit", "600")
	run("routes", "create", "--model", "team/small", "--target", "hosted")

	golden(t, "providers_list.table", mask(run("providers", "list"), true))
	golden(t, "providers_list.yaml", mask(run("providers", "list", "-o", "yaml"), false))
	golden(t, "providers_get.table", mask(run("providers", "get", "my-vllm"), true))
	golden(t, "providers_get.yaml", mask(run("providers", "get", "hosted", "-o", "yaml"), false))
	golden(t, "routes_list.table", mask(run("routes", "list"), true))
	golden(t, "routes_list.yaml", mask(run("routes", "list", "-o", "yaml"), false))
	table := run("keys", "create", "--name", "alice", "--models", "qwen3,my-vllm/*", "--rpm-limit", "60", "--budget", "20/month")
	golden(t, "keys_create.table", mask(table, true))
	golden(t, "keys_create.yaml", mask(run("keys", "create", "--name", "bob", "--models", "qwen3", "-o", "yaml"), false))
	if !regexp.MustCompile(`(?m)^secret \(shown once\): rk-x+\n\z`).MatchString(mask(table, true)) {
		t.Errorf("the secret is not the last line, on its own:\n%s", table)
	}
}
