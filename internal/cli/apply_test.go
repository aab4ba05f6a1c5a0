package cli

import (
	"strings"
	"testing"
	"time"

	"github.com/rolter/rolter/internal/readiness"
	"github.com/rolter/rolter/internal/server"
	"github.com/rolter/rolter/internal/store/storetest"
	"github.com/rolter/rolter/internal/testkit"
)

// rolter apply and rolter export against a real gateway, on SQLite and on
// PostgreSQL: the gateway is server.Start on a store of the dialect.

// The upstream keys of the config files below; none may ever be printed.
const (
	applyKey1 = "sk-FAKE-apply-openai-0001"
	applyKey2 = "sk-FAKE-apply-openai-0002"
	applyKey3 = "sk-FAKE-apply-openai-0003"
)

// applyFile is the config the tests start from: every kind of entry the
// format has but hosts (which need a fleet), with keys from the
// environment in both reference forms.
const applyFile = `orgs:
  - name: acme
    description: Acme Corp
    providers:
      - name: OpenAI
        slug: openai
        kind: openai
        base_url: http://127.0.0.1:9/v1
        models: [gpt-4o]
        keys:
          - secret: os.environ/APPLY_KEY_1
            weight: 2
          - secret: ${APPLY_KEY_2}
      - name: vLLM
        slug: vllm
        kind: vllm
        base_url: http://127.0.0.1:9/v1
        models: [qwen3]
    groups:
      - slug: pool
        members:
          - provider: openai
          - provider: vllm
            weight: 3
    projects:
      - name: web
        rpm_limit: 600
        budget: {amount: "25", period: month}
        routes:
          - model: gpt-4o
            targets:
              - provider: openai
                weight: 9
              - provider: vllm
                upstream_model: qwen3
          - model: qwen3
            targets: [{provider: vllm}]
            policy: {max_output_tokens: 1024}
        keys:
          - name: frontend
            models: [gpt-4o]
            rpm_limit: 60
          - name: backend
`

// applyGateway starts a gateway on a fresh store of dialect, stopped when
// t ends. Its providers point at a closed port and are probed once an
// hour: nothing but the commands changes the state.
func applyGateway(t *testing.T, dialect string) *gateway {
	t.Helper()
	spec, _ := storetest.Spec(t, dialect)
	g, err := startGateway(server.Config{Store: spec, Metadata: readiness.Config{Interval: time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := g.close(); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	return g
}

// applier runs commands on one gateway with the upstream keys set.
type applier struct {
	t   *testing.T
	g   *gateway
	env map[string]string
}

func newApplier(t *testing.T, dialect string) *applier {
	return &applier{t: t, g: applyGateway(t, dialect), env: map[string]string{
		"APPLY_KEY_1": applyKey1, "APPLY_KEY_2": applyKey2, "APPLY_KEY_3": applyKey3}}
}

// run runs a command with stdin, checking that no upstream key shows.
func (a *applier) run(stdin string, args ...string) result {
	a.t.Helper()
	r := cmd{env: a.env, stdin: stdin}.on(a.t, a.g, args...)
	testkit.AssertNoSecrets(a.t, "rolter "+strings.Join(args, " "), r.stdout+r.stderr, applyKey1, applyKey2, applyKey3)
	return r
}

func (a *applier) must(stdin string, args ...string) string {
	a.t.Helper()
	r := a.run(stdin, args...)
	if r.code != 0 {
		a.t.Fatalf("rolter %s: %v", strings.Join(args, " "), r)
	}
	return r.stdout
}

// apply applies file, which must succeed.
func (a *applier) apply(file string, flags ...string) string {
	a.t.Helper()
	return a.must(file, append([]string{"apply", "-f", "-"}, flags...)...)
}

// state is what must not move when an apply changes nothing: the export,
// and the lists whose views carry updated_at and ids.
func (a *applier) state() string {
	a.t.Helper()
	return a.must("", "export") +
		a.must("", "groups", "list", "--org", "acme", "-o", "json") +
		a.must("", "keys", "list", "--org", "acme", "--project", "web", "-o", "json")
}

func wantPlan(t *testing.T, out string, lines ...string) {
	t.Helper()
	for _, l := range lines {
		if !strings.Contains(out, l) {
			t.Errorf("the plan lacks %q:\n%s", l, out)
		}
	}
}

func TestApply(t *testing.T) {
	storetest.Each(t, func(t *testing.T, d string) {
		a := newApplier(t, d)

		// A dry run needs no secrets: it lists the unset references, plans
		// everything and changes nothing.
		r := cmd{stdin: applyFile}.on(t, a.g, "apply", "-f", "-", "--dry-run")
		if r.code != 0 {
			t.Fatalf("dry run without secrets: %v", r)
		}
		wantPlan(t, r.stdout, "Environment variables not set",
			"APPLY_KEY_1  orgs[0].providers[0].keys[0]", "APPLY_KEY_2  orgs[0].providers[0].keys[1]",
			"+ provider     acme/openai", "+ virtual key  acme/web/frontend", "Dry run: nothing was changed.")
		if strings.Contains(r.stdout, "shown once") {
			t.Errorf("a dry run printed a secret:\n%s", r.stdout)
		}
		if r := a.run("", "providers", "list", "--org", "acme"); r.code != ExitNotFound {
			t.Fatalf("after the dry run, org acme: %v", r)
		}

		// Without --dry-run an unset reference is an error naming its key.
		r = cmd{stdin: applyFile, env: map[string]string{"APPLY_KEY_1": applyKey1}}.on(t, a.g, "apply", "-f", "-")
		if r.code != ExitUsage || !strings.Contains(r.stderr, "orgs[0].providers[0].keys[1]: APPLY_KEY_2") {
			t.Fatalf("apply with APPLY_KEY_2 unset: %v", r)
		}

		out := a.apply(applyFile)
		wantPlan(t, out, "+ org          acme", "+ route        acme/web/qwen3",
			"Applied: 9 created, 0 updated, 0 deleted, 0 unchanged, in one transaction.",
			"virtual key acme/web/frontend secret (shown once): rk-", "virtual key acme/web/backend secret (shown once): rk-")

		// Idempotent: the second run writes nothing, not even updated_at.
		before := a.state()
		out = a.apply(applyFile)
		wantPlan(t, out, "= provider     acme/openai", "No changes: the gateway matches the file (9 unchanged).")
		if after := a.state(); after != before {
			t.Errorf("an apply without changes changed the state:\n%s\n---\n%s", before, after)
		}

		// export | apply is a no-op, and the export holds references only.
		exp := a.must("", "export")
		wantPlan(t, exp, "secret: os.environ/APPLY_KEY_1", "secret: os.environ/APPLY_KEY_2")
		wantPlan(t, a.apply(exp), "No changes: the gateway matches the file (12 unchanged).")

		// A changed slug is refused without allow_slug_change, naming the
		// entry, and nothing changes; with it, the provider is renamed.
		renamed := strings.NewReplacer("slug: vllm", "slug: local", "provider: vllm", "provider: local").Replace(applyFile)
		r = a.run(renamed, "apply", "-f", "-")
		if r.code != ExitUsage || !strings.Contains(r.stderr, `slug_immutable: orgs[0].providers[1] (provider "acme/local")`) ||
			!strings.Contains(r.stderr, "orgs[0].providers[1].slug: immutable") {
			t.Fatalf("apply of a changed slug: %v", r)
		}
		if after := a.state(); after != before {
			t.Errorf("a refused slug change changed the state")
		}
		allowed := strings.Replace(renamed, "slug: local", "slug: local\n        allow_slug_change: true", 1)
		wantPlan(t, a.apply(allowed), "~ provider     acme/local", `slug: "vllm" -> "local"`, `targets[1].provider: "vllm" -> "local"`)
		wantPlan(t, a.apply(renamed), "No changes")
		a.apply(strings.Replace(applyFile, "slug: vllm", "slug: vllm\n        previous_slug: local\n        allow_slug_change: true", 1))
		wantPlan(t, a.apply(applyFile), "No changes")
	})
}

// A failure midway changes nothing: the third of five new routes names a
// provider that does not exist, after an update and two creates.
func TestApplyFailureChangesNothing(t *testing.T) {
	storetest.Each(t, func(t *testing.T, d string) {
		a := newApplier(t, d)
		a.apply(applyFile)
		before := a.state()
		routes := ""
		for i, p := range []string{"openai", "vllm", "nope", "openai", "vllm"} {
			routes += "          - model: m" + string(rune('1'+i)) + "\n            targets: [{provider: " + p + "}]\n"
		}
		bad := strings.Replace(applyFile, "            weight: 3\n", "            weight: 4\n", 1)
		bad = strings.Replace(bad, "        keys:\n          - name: frontend", routes+"        keys:\n          - name: frontend", 1)
		r := a.run(bad, "apply", "-f", "-")
		if r.code != ExitUsage || !strings.Contains(r.stderr, `unknown_provider: orgs[0].projects[0].routes[4] (route "acme/web/m3")`) ||
			!strings.Contains(r.stderr, "orgs[0].projects[0].routes[4].targets[0].provider: no such provider") {
			t.Fatalf("apply with a bad third route: %v", r)
		}
		if after := a.state(); after != before {
			t.Errorf("a failed apply changed the state:\n%s\n---\n%s", before, after)
		}
		// The same file, fixed, applies every entry.
		out := a.apply(strings.Replace(bad, "provider: nope", "provider: openai", 1))
		wantPlan(t, out, "~ group        acme/pool", "+ route        acme/web/m5", "5 created, 1 updated")
	})
}

// --prune deletes what the org holds and the file does not; without it,
// entries missing from the file stay.
func TestApplyPrune(t *testing.T) {
	storetest.Each(t, func(t *testing.T, d string) {
		a := newApplier(t, d)
		a.apply(applyFile)
		less := strings.Replace(applyFile, "          - model: qwen3\n            targets: [{provider: vllm}]\n            policy: {max_output_tokens: 1024}\n", "", 1)
		less = strings.Replace(less, "          - name: backend\n", "", 1)
		less = less[:strings.Index(less, "    groups:")] + less[strings.Index(less, "    projects:"):]

		wantPlan(t, a.apply(less), "No changes")
		before := a.state()
		out := a.apply(less, "--prune", "--dry-run")
		wantPlan(t, out, "- route        acme/web/qwen3     delete", "- virtual key  acme/web/backend", "- group        acme/pool",
			"0 to create, 0 to update, 3 to delete")
		if after := a.state(); after != before {
			t.Errorf("a dry run changed the state")
		}
		wantPlan(t, a.apply(less, "--prune"), "3 deleted")
		wantPlan(t, a.apply(less, "--prune"), "No changes")
		// design 000 §3: a pruned group is soft-deleted, its slug reserved.
		if g := a.must("", "groups", "get", "pool", "--org", "acme"); !strings.Contains(g, "deleted_at") {
			t.Errorf("the pruned group:\n%s", g)
		}
		// The revoked key stays listed, revoked; the default org, which
		// the file does not name, is untouched.
		if keys := a.must("", "keys", "list", "--org", "acme", "--project", "web", "-o", "json"); !strings.Contains(keys, `"revoked_at"`) {
			t.Errorf("keys after the prune: %s", keys)
		}
		a.must("", "keys", "list")
	})
}

// TestApplyGolden pins the plan's diff: creates, updates with their fields
// (key pool changes by reference, never secrets), unchanged entries,
// deletes with their notes, and the unset references of a dry run.
func TestApplyGolden(t *testing.T) {
	a := newApplier(t, "sqlite")
	a.apply(applyFile)
	edited := strings.NewReplacer(
		"          - secret: ${APPLY_KEY_2}\n", "          - secret: ${APPLY_KEY_2}\n            weight: 4\n          - secret_env: APPLY_KEY_3\n",
		"        rpm_limit: 600\n", "        rpm_limit: 900\n",
		"            policy: {max_output_tokens: 1024}\n", "            policy: {max_output_tokens: 2048, tools: deny}\n",
		"          - name: backend\n", "",
	).Replace(applyFile)
	edited += `      - name: batch
        routes:
          - model: cheap
            targets: [{provider: vllm}]
`
	delete(a.env, "APPLY_KEY_1")
	out := a.must(edited, "apply", "-f", "-", "--dry-run", "--prune")
	golden(t, "apply_plan.table", mask(out, true))
}

// A file under the 8 MiB apply reads may be more than that as JSON (here
// each "<" of a description becomes \u003c): it is refused before it is
// sent, naming the limit.
func TestApplyJSONOverLimit(t *testing.T) {
	a := newApplier(t, "sqlite")
	file := strings.Replace(applyFile, "description: Acme Corp", "description: '"+strings.Repeat("<", 2<<20)+"'", 1)
	r := a.run(file, "apply", "-f", "-")
	if r.code != ExitUsage || !strings.Contains(r.stderr, "as JSON, over the 8 MiB that POST /apply takes") {
		t.Fatalf("a file of 2 MiB that is 12 MiB as JSON: %v", r)
	}
}
