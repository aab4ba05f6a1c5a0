package cli

import (
	"regexp"
	"strings"
	"testing"

	"github.com/rolter/rolter/internal/testkit"
)

const recipeYAML = `vllm:
  model: Qwen/Qwen3-8B-FP8
  source: {kind: hf}
  vram_gb: 12
  disk_gb: 18
  args: ["--max-model-len", "32768"]
`

func TestHostAndFleetKeyCommands(t *testing.T) {
	newOrg(t, "t-fleet")
	org := []string{"--org", "t-fleet"}
	recipe := writeTemp(t, "recipe.yaml", recipeYAML)

	r := rolter(t, append([]string{"hosts", "create", "--ip", "10.0.0.5", "--port", "8000", "--model-name", "qwen3",
		"--recipe", recipe, "--notes", "rented"}, org...)...)
	m := regexp.MustCompile(`(?m)^api_key \(shown once\): (rh-\S+)$`).FindStringSubmatch(r.stdout)
	if r.code != 0 || m == nil {
		t.Fatalf("hosts create shows the api_key once: %v", r)
	}
	apiKey := m[1]
	id := regexp.MustCompile(`(?m)^id\s+(\d+)$`).FindStringSubmatch(r.stdout)[1]
	if !strings.Contains(r.stdout, "recipe.vllm.model") || !strings.Contains(r.stdout, "state ") {
		t.Errorf("hosts create:\n%s", r.stdout)
	}

	fk := rolter(t, append([]string{"fleet-keys", "create", "--name", "gpu-template"}, org...)...)
	fm := regexp.MustCompile(`(?m)^secret \(shown once\): (rf-\S+)$`).FindStringSubmatch(fk.stdout)
	if fk.code != 0 || fm == nil {
		t.Fatalf("fleet-keys create: %v", fk)
	}
	fkID := regexp.MustCompile(`(?m)^id\s+(\d+)$`).FindStringSubmatch(fk.stdout)[1]

	var later strings.Builder
	for _, args := range [][]string{
		{"hosts", "list"}, {"hosts", "get", id}, {"hosts", "get", id, "-o", "json"},
		{"hosts", "update", id, "--notes", "kill after", "--auto-apply"},
		{"hosts", "apply", id},
		{"fleet-keys", "list"}, {"fleet-keys", "get", fkID}, {"fleet-keys", "list", "-o", "yaml"},
	} {
		later.WriteString(must(t, append(args, org...)...))
	}
	testkit.AssertNoSecrets(t, "fleet output after creation", later.String(), apiKey, fm[1])
	if h := jsonObject(t, append([]string{"hosts", "get", id}, org...)...); h["notes"] != "kill after" || h["auto_apply"] != true {
		t.Errorf("hosts update: %v", h)
	}
	wantExit(t, ExitUsage, append([]string{"hosts", "update", id, "--recipe", "/nonexistent.yaml"}, org...)...)
	wantExit(t, ExitNotFound, append([]string{"fleet-keys", "get", "999999"}, org...)...)

	if r := must(t, append([]string{"hosts", "retire", id}, org...)...); r != "host "+id+" retired\n" {
		t.Errorf("hosts retire: %q", r)
	}
	if h := jsonObject(t, append([]string{"hosts", "get", id}, org...)...); h["state"] != "retired" {
		t.Errorf("retired host: %v", h)
	}
	wantExit(t, ExitConflict, append([]string{"hosts", "apply", id}, org...)...)
	// DELETE retires too; the JSON form answers the host as it is now.
	if h := jsonObject(t, append([]string{"hosts", "delete", id}, org...)...); h["state"] != "retired" {
		t.Errorf("hosts delete -o json: %v", h)
	}
	if r := must(t, append([]string{"fleet-keys", "revoke", fkID}, org...)...); r != "fleet key "+fkID+" revoked\n" {
		t.Errorf("fleet-keys revoke: %q", r)
	}
	if k := jsonObject(t, append([]string{"fleet-keys", "get", fkID}, org...)...); k["revoked_at"] == nil {
		t.Errorf("revoked fleet key: %v", k)
	}
}

func TestTokenOrgAndProjectCommands(t *testing.T) {
	r := rolter(t, "tokens", "create", "--name", "team", "--scope", "org:default")
	m := regexp.MustCompile(`(?m)^secret \(shown once\): (ra-\S+)$`).FindStringSubmatch(r.stdout)
	if r.code != 0 || m == nil {
		t.Fatalf("tokens create: %v", r)
	}
	orgToken := m[1]
	id := regexp.MustCompile(`(?m)^id\s+(\d+)$`).FindStringSubmatch(r.stdout)[1]
	list := must(t, "tokens", "list")
	if !regexp.MustCompile(`(?m)^` + id + `\s+team\s+org:default\s+api\s+ra-`).MatchString(list) {
		t.Errorf("tokens list:\n%s", list)
	}
	testkit.AssertNoSecrets(t, "token output after creation", list+must(t, "tokens", "get", id)+must(t, "tokens", "list", "-o", "yaml"), orgToken)

	// An org token sees its org only: other orgs are not found (3), the
	// token API too; with --token it is used instead of the environment.
	asOrg := func(code int, args ...string) {
		t.Helper()
		if r := rolter(t, append(args, "--token", orgToken)...); r.code != code {
			t.Errorf("as an org token, %s: want exit %d, got %v", strings.Join(args, " "), code, r)
		}
	}
	asOrg(0, "providers", "list")
	asOrg(ExitNotFound, "providers", "list", "--org", "t-other")
	asOrg(ExitNotFound, "tokens", "list")
	wantExit(t, ExitUsage, "tokens", "create", "--name", "x", "--scope", "everything")

	must(t, "tokens", "revoke", id)
	asOrg(ExitAuth, "providers", "list")
	if r := must(t, "tokens", "delete", id); r != "token "+id+" revoked\n" {
		t.Errorf("revoking again: %q", r)
	}

	must(t, "orgs", "create", "--name", "t-orgs", "--description", "first")
	must(t, "orgs", "update", "t-orgs", "--description", "second")
	if o := jsonObject(t, "orgs", "get", "t-orgs"); o["description"] != "second" {
		t.Errorf("orgs update: %v", o)
	}
	must(t, "projects", "create", "--org", "t-orgs", "--name", "p1", "--rpm-limit", "600", "--budget", "500/month")
	if l := must(t, "projects", "list", "--org", "t-orgs"); !regexp.MustCompile(`(?m)^p1\s+-\s+600\s+-\s+500/month\s`).MatchString(l) {
		t.Errorf("projects list:\n%s", l)
	}
	must(t, "projects", "update", "p1", "--org", "t-orgs", "--no-budget", "--name", "p2")
	if p := jsonObject(t, "projects", "get", "p2", "--org", "t-orgs"); p["budget"] != nil {
		t.Errorf("projects update: %v", p)
	}
	wantExit(t, ExitConflict, "orgs", "delete", "t-orgs") // it holds a project
	must(t, "projects", "delete", "p2", "--org", "t-orgs")
	must(t, "orgs", "delete", "t-orgs")
	wantExit(t, ExitNotFound, "orgs", "get", "t-orgs")
	if !strings.Contains(must(t, "orgs", "list"), "default") {
		t.Error("orgs list lacks default")
	}
}
