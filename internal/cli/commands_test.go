package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/rolter/rolter/internal/testkit"
)

// newOrg creates an org with a project "default" for one test, so that
// tests sharing the gateway do not see each other's resources.
func newOrg(t *testing.T, name string) {
	t.Helper()
	must(t, "orgs", "create", "--name", name)
	must(t, "projects", "create", "--org", name, "--name", "default")
}

// jsonList runs a list command with -o json and decodes it.
func jsonList(t *testing.T, args ...string) []map[string]any {
	t.Helper()
	var items []map[string]any
	out := must(t, append(args, "-o", "json")...)
	if err := json.Unmarshal([]byte(out), &items); err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return items
}

func jsonObject(t *testing.T, args ...string) map[string]any {
	t.Helper()
	var m map[string]any
	out := must(t, append(args, "-o", "json")...)
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return m
}

func writeTemp(t *testing.T, name, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestProviderCommands(t *testing.T) {
	newOrg(t, "t-providers")
	const key, stdinKey = "sk-FAKE-cli-provider-0001", "sk-FAKE-cli-stdin-0002"
	org := []string{"--org", "t-providers"}
	withKey := cmd{env: map[string]string{"VLLM_KEY": key}}
	var outputs strings.Builder
	run := func(c cmd, code int, args ...string) result {
		t.Helper()
		r := c.on(t, gw, append(args, org...)...)
		if r.code != code {
			t.Fatalf("rolter %s: want exit %d, got %v", strings.Join(args, " "), code, r)
		}
		outputs.WriteString(r.stdout + r.stderr)
		return r
	}

	r := run(withKey, 0, "providers", "create", "--name", "My vLLM", "--kind", "vllm",
		"--base-url", "http://127.0.0.1:9/v1", "--model", "Qwen/Qwen3-8B", "--model", "qwen3", "--key-env", "VLLM_KEY")
	if !regexp.MustCompile(`(?m)^slug\s+my-vllm$`).MatchString(r.stdout) || !strings.Contains(r.stdout, "models") {
		t.Fatalf("create shows the provider: %v", r)
	}

	// A taken slug is a conflict, with the API's suggestion.
	r = run(withKey, ExitConflict, "providers", "create", "--name", "My vLLM", "--kind", "vllm", "--base-url", "http://127.0.0.1:9/v1")
	for _, want := range []string{"slug_taken", "slug: taken", "suggestion: my-vllm-2"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("conflict message lacks %q: %v", want, r)
		}
	}

	// An unset --key-env is a usage error and creates nothing.
	r = run(cmd{}, ExitUsage, "providers", "create", "--name", "Other", "--kind", "vllm", "--base-url", "http://127.0.0.1:9/v1", "--key-env", "UNSET_KEY")
	if !strings.Contains(r.stderr, "--key-env UNSET_KEY: the environment variable is not set") {
		t.Errorf("unset --key-env: %v", r)
	}
	if items := jsonList(t, append([]string{"providers", "list"}, org...)...); len(items) != 1 {
		t.Fatalf("a refused create created something: %v", items)
	}

	// -f: the API's body as YAML; flags override its fields.
	file := writeTemp(t, "p.yaml", "name: Hosted\nkind: openai\nbase_url: https://api.example.test/v1\nprices: {input: 0.15, output: 0.6}\n")
	run(cmd{}, 0, "providers", "create", "-f", file, "--slug", "hosted")
	got := jsonObject(t, append([]string{"providers", "get", "hosted"}, org...)...)
	if got["kind"] != "openai" || lookup(got, "prices.input") == nil {
		t.Errorf("-f body not sent: %v", got)
	}

	// --key-stdin reads the pool from standard input.
	run(cmd{stdin: stdinKey + "\n\n"}, 0, "providers", "create", "--name", "piped", "--kind", "vllm", "--base-url", "http://127.0.0.1:9/v1", "--key-stdin")
	if ks := lookup(jsonObject(t, append([]string{"providers", "get", "piped"}, org...)...), "keys").([]any); len(ks) != 1 {
		t.Errorf("--key-stdin: keys %v", ks)
	}

	// update changes only what it names.
	r = run(cmd{}, 0, "providers", "update", "my-vllm", "--base-url", "http://127.0.0.1:10/v1")
	if !strings.Contains(r.stdout, "http://127.0.0.1:10/v1") || !strings.Contains(r.stdout, "Qwen/Qwen3-8B") {
		t.Errorf("update: %v", r)
	}
	run(cmd{}, ExitUsage, "providers", "update", "my-vllm")
	r = run(cmd{}, ExitUsage, "providers", "update", "my-vllm", "--slug", "vllm-msk")
	if !strings.Contains(r.stderr, "slug_immutable") {
		t.Errorf("slug change without --allow-slug-change: %v", r)
	}
	r = run(cmd{}, 0, "providers", "update", "my-vllm", "--slug", "vllm-msk", "--allow-slug-change")
	if !strings.Contains(r.stderr, "warning: ") {
		t.Errorf("a slug change repeats the API's warning: %v", r)
	}

	// The key pool: add, list, delete.
	r = run(withKey, 0, "providers", "keys", "add", "vllm-msk", "--key-env", "VLLM_KEY", "--weight", "2")
	id := regexp.MustCompile(`(?m)^id\s+(\d+)$`).FindStringSubmatch(r.stdout)
	if id == nil {
		t.Fatalf("keys add: %v", r)
	}
	if rows := strings.Count(run(cmd{}, 0, "providers", "keys", "list", "vllm-msk").stdout, "\n"); rows != 3 {
		t.Errorf("keys list: want a header and 2 keys, got %d lines", rows)
	}
	if r = run(cmd{}, 0, "providers", "keys", "update", "vllm-msk", id[1], "--weight", "0"); !regexp.MustCompile(`(?m)^weight\s+0$`).MatchString(r.stdout) {
		t.Errorf("keys update --weight 0: %v", r)
	}
	run(cmd{}, ExitUsage, "providers", "keys", "update", "vllm-msk", id[1])
	run(cmd{}, 0, "providers", "keys", "delete", "vllm-msk", id[1])
	run(cmd{}, ExitUsage, "providers", "keys", "add", "vllm-msk", "--key-env", "UNSET_KEY")

	// delete is soft: listed as deleted, slug kept; purge frees it.
	if r = run(cmd{}, 0, "providers", "delete", "piped"); r.stdout != "provider piped deleted\n" {
		t.Errorf("delete: %v", r)
	}
	if !regexp.MustCompile(`(?m)^piped .* deleted\s*$`).MatchString(run(cmd{}, 0, "providers", "list").stdout) {
		t.Errorf("a deleted provider is listed as deleted")
	}
	run(cmd{}, ExitConflict, "slugs", "check", "piped")
	run(cmd{}, 0, "providers", "purge", "piped")
	run(cmd{}, ExitNotFound, "providers", "get", "piped")
	if r = run(cmd{}, 0, "slugs", "check", "piped"); r.stdout != "piped is available\n" {
		t.Errorf("slugs check: %v", r)
	}
	run(cmd{}, 0, "providers", "delete", "hosted", "--purge")

	testkit.AssertNoSecrets(t, "provider command output", outputs.String(), key, stdinKey)
}

func TestRouteAndGroupCommands(t *testing.T) {
	newOrg(t, "t-routes")
	org := []string{"--org", "t-routes"}
	for _, p := range []string{"vllm-a", "vllm-b"} {
		must(t, append([]string{"providers", "create", "--name", p, "--kind", "vllm", "--base-url", "http://127.0.0.1:9/v1"}, org...)...)
	}

	// A route model may hold a slash and an upstream model a colon.
	out := must(t, append([]string{"routes", "create", "--model", "team/qwen3",
		"--target", "vllm-a:Qwen/Qwen3-8B:3", "--target", "vllm-b:llama3:8b", "--rpm-limit", "600"}, org...)...)
	if !strings.Contains(out, "targets[1].upstream_model  llama3:8b") {
		t.Errorf("routes create:\n%s", out)
	}
	r := must(t, append([]string{"routes", "get", "team/qwen3", "-o", "json"}, org...)...)
	var route struct {
		Targets []struct {
			Provider      string
			UpstreamModel string `json:"upstream_model"`
			Weight        int
		}
	}
	if err := json.Unmarshal([]byte(r), &route); err != nil || len(route.Targets) != 2 || route.Targets[0].Weight != 3 {
		t.Fatalf("routes get: %v %s", err, r)
	}
	must(t, append([]string{"routes", "update", "team/qwen3", "--target", "vllm-b"}, org...)...)
	list := must(t, append([]string{"routes", "list"}, org...)...)
	if !regexp.MustCompile(`(?m)^team/qwen3\s+weighted\s+vllm-b\s+600\s+-\s+-\s*$`).MatchString(list) {
		t.Errorf("routes list:\n%s", list)
	}
	wantExit(t, ExitUsage, append([]string{"routes", "create", "--model", "x", "--target", "vllm-a:7"}, org...)...)
	wantExit(t, ExitUsage, append([]string{"routes", "create", "--model", "x", "--target", "nope:m"}, org...)...) // unknown_provider
	wantExit(t, ExitNotFound, append([]string{"routes", "get", "x"}, org...)...)
	wantExit(t, ExitNotFound, append([]string{"routes", "list", "--project", "nope"}, org...)...)

	// Groups: members with weights; a provider in a group cannot be purged.
	must(t, append([]string{"groups", "create", "--name", "all", "--member", "vllm-a", "--member", "vllm-b:2"}, org...)...)
	if g := must(t, append([]string{"groups", "list"}, org...)...); !strings.Contains(g, "vllm-a,vllm-b*2") {
		t.Errorf("groups list:\n%s", g)
	}
	must(t, append([]string{"groups", "update", "all", "--member", "vllm-a"}, org...)...)
	must(t, append([]string{"routes", "delete", "team/qwen3"}, org...)...)
	wantExit(t, ExitConflict, append([]string{"providers", "purge", "vllm-a"}, org...)...)
	must(t, append([]string{"groups", "get", "all"}, org...)...)
	if r := must(t, append([]string{"groups", "delete", "all"}, org...)...); r != "group all deleted\n" {
		t.Errorf("groups delete: %q", r)
	}
	// design 000 §3: the deleted group keeps its slug until purged; its
	// membership no longer holds the provider.
	if g := must(t, append([]string{"groups", "list"}, org...)...); !regexp.MustCompile(`(?m)^all\s.*deleted\s*$`).MatchString(g) {
		t.Errorf("groups list after delete:\n%s", g)
	}
	wantExit(t, ExitConflict, append([]string{"groups", "create", "--name", "all", "--member", "vllm-b"}, org...)...)
	must(t, append([]string{"providers", "purge", "vllm-a"}, org...)...)
	if r := must(t, append([]string{"groups", "purge", "all"}, org...)...); r != "group all purged\n" {
		t.Errorf("groups purge: %q", r)
	}
	wantExit(t, ExitUsage, append([]string{"groups", "delete", "all", "--force"}, org...)...)
	must(t, append([]string{"groups", "create", "--name", "all", "--member", "vllm-b"}, org...)...)
}

func TestKeyCommands(t *testing.T) {
	newOrg(t, "t-keys")
	org := []string{"--org", "t-keys"}
	r := rolter(t, append([]string{"keys", "create", "--name", "alice", "--models", "qwen3,my-vllm/*", "--rpm-limit", "60", "--budget", "20/month"}, org...)...)
	m := regexp.MustCompile(`(?m)^secret \(shown once\): (rk-\S+)$`).FindStringSubmatch(r.stdout)
	if r.code != 0 || m == nil {
		t.Fatalf("keys create prints the secret once, on its own line: %v", r)
	}
	secretKey := m[1]
	if strings.Count(r.stdout, secretKey) != 1 {
		t.Errorf("the secret is printed more than once:\n%s", r.stdout)
	}
	id := regexp.MustCompile(`(?m)^id\s+(\d+)$`).FindStringSubmatch(r.stdout)[1]

	// In json the secret is the API's field, as returned.
	created := jsonObject(t, append([]string{"keys", "create", "--name", "bob"}, org...)...)
	bobSecret, _ := created["secret"].(string)
	if !strings.HasPrefix(bobSecret, "rk-") {
		t.Fatalf("json create: %v", created)
	}

	var later strings.Builder
	for _, args := range [][]string{
		{"keys", "list"}, {"keys", "list", "-o", "json"}, {"keys", "list", "-o", "yaml"},
		{"keys", "get", id}, {"keys", "get", id, "-o", "yaml"},
		{"keys", "update", id, "--models", "qwen3", "--no-budget"},
	} {
		later.WriteString(must(t, append(args, org...)...))
	}
	testkit.AssertNoSecrets(t, "key output after creation", later.String(), secretKey, bobSecret)
	k := jsonObject(t, append([]string{"keys", "get", id}, org...)...)
	if models, _ := k["models"].([]any); len(models) != 1 || k["budget"] != nil || k["rpm_limit"] != float64(60) {
		t.Errorf("update changed the wrong fields: %v", k)
	}
	must(t, append([]string{"keys", "update", id, "--all-models"}, org...)...)
	if k := jsonObject(t, append([]string{"keys", "get", id}, org...)...); len(k["models"].([]any)) != 0 {
		t.Errorf("--all-models: %v", k)
	}

	// Revoke, then purge; purging a live key is a conflict.
	wantExit(t, ExitConflict, append([]string{"keys", "delete", id, "--purge"}, org...)...)
	if r := must(t, append([]string{"keys", "revoke", id}, org...)...); r != "key "+id+" revoked\n" {
		t.Errorf("revoke: %q", r)
	}
	wantExit(t, ExitConflict, append([]string{"keys", "update", id, "--name", "x"}, org...)...)
	must(t, append([]string{"keys", "delete", id, "--purge"}, org...)...)
	wantExit(t, ExitNotFound, append([]string{"keys", "get", id}, org...)...)
	wantExit(t, ExitUsage, append([]string{"keys", "create", "--name", "x", "--budget", "lots"}, org...)...)
	wantExit(t, ExitUsage, append([]string{"keys", "create", "--name", "x", "--rpm-limit", "-1"}, org...)...)
}
