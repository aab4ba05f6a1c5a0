package config_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rolter/rolter/internal/admin"
	"github.com/rolter/rolter/internal/config"
	"github.com/rolter/rolter/internal/secret"
	"github.com/rolter/rolter/internal/snapshot"
	"github.com/rolter/rolter/internal/store"
	"github.com/rolter/rolter/internal/store/sqlstore"
	"github.com/rolter/rolter/internal/store/storetest"
	"github.com/rolter/rolter/internal/testkit"
)

// Provider key secrets of testdata/full.good.yml: the literal one and the
// two that testEnv puts in the environment for secret_env. None of them may
// ever reach out, the log or an error.
const (
	literalSecret   = "sk-literal-acme-0001"
	acmeEnvSecret   = "sk-env-acme-0002"
	globexEnvSecret = "sk-env-globex-0003"
)

var providerSecrets = []string{literalSecret, acmeEnvSecret, globexEnvSecret}

// testEnv sets the variables the testdata files name in secret_env:
// ROLTER_TEST_EMPTY_KEY is set but empty, ROLTER_TEST_UNSET_KEY is unset.
func testEnv(t *testing.T) {
	t.Helper()
	t.Setenv("ROLTER_TEST_ACME_KEY", acmeEnvSecret)
	t.Setenv("ROLTER_TEST_GLOBEX_KEY", globexEnvSecret)
	t.Setenv("ROLTER_TEST_EMPTY_KEY", "")
	t.Setenv("ROLTER_TEST_UNSET_KEY", "") // restores the old value when t ends
	_ = os.Unsetenv("ROLTER_TEST_UNSET_KEY")
}

func assertNoSecrets(t *testing.T, what, s string) {
	t.Helper()
	testkit.AssertNoSecrets(t, what, s, providerSecrets...)
}

// TestGolden loads every testdata file: *.good.yml must load, *.bad.yml must
// fail with an error containing the one line of its sibling *.bad.yml.err.
func TestGolden(t *testing.T) {
	testEnv(t)
	files, err := filepath.Glob("testdata/*")
	if err != nil {
		t.Fatal(err)
	}
	var good, bad int
	for _, path := range files {
		name := filepath.Base(path)
		switch {
		case strings.HasSuffix(name, ".good.yml"):
			good++
			t.Run(name, func(t *testing.T) {
				if _, err := config.Load(path); err != nil {
					t.Fatalf("Load: %v", err)
				}
			})
		case strings.HasSuffix(name, ".bad.yml"):
			bad++
			t.Run(name, func(t *testing.T) {
				want, err := os.ReadFile(path + ".err")
				if err != nil {
					t.Fatalf("every bad file needs its expected error: %v", err)
				}
				wantMsg := strings.TrimSpace(string(want))
				if wantMsg == "" || strings.Contains(wantMsg, "\n") {
					t.Fatalf("%s.err must hold exactly one non-empty line", path)
				}
				f, err := config.Load(path)
				if err == nil {
					t.Fatalf("Load succeeded (%d orgs), want an error containing %q", len(f.Orgs), wantMsg)
				}
				msg := err.Error()
				if !strings.Contains(msg, wantMsg) {
					t.Errorf("error = %q\nwant it to contain %q", msg, wantMsg)
				}
				if !strings.HasPrefix(msg, "config "+path+": ") {
					t.Errorf("error = %q, want it to name the file %s", msg, path)
				}
				assertNoSecrets(t, "the error", msg)
				if strings.Contains(msg, "not found in type") || strings.Contains(msg, "unmarshal errors:\n") {
					t.Errorf("error = %q leaks the raw YAML decoder wording", msg)
				}
			})
		case strings.HasSuffix(name, ".bad.yml.err"):
			if _, err := os.Stat(strings.TrimSuffix(path, ".err")); err != nil {
				t.Errorf("%s has no bad file beside it", path)
			}
		default:
			t.Errorf("%s is neither *.good.yml, *.bad.yml nor *.bad.yml.err", path)
		}
	}
	if good < 3 || bad < 10 {
		t.Fatalf("found %d good and %d bad files; is testdata/ missing?", good, bad)
	}
}

func intp(n int) *int { return &n }

// TestParseFull checks every value of the full example as parsed, with
// secret_env resolved into the key's secret.
func TestParseFull(t *testing.T) {
	testEnv(t)
	got, err := config.Load("testdata/full.good.yml")
	if err != nil {
		t.Fatal(err)
	}
	expires := time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC)
	want := &config.File{Orgs: []config.Org{
		{
			Name: "acme", Description: "Acme Corp",
			Providers: []config.Provider{
				{
					Name: "OpenAI Prod", Slug: "openai-prod", Kind: "openai", BaseURL: "https://api.openai.com/v1",
					MetadataSource: "configured", ContextLimit: 128000, Models: []string{"gpt-4o", "gpt-4o-mini"},
					FirstByteTimeout: store.Duration(30 * time.Second), IdleTimeout: store.Duration(2 * time.Minute),
					Keys: []config.ProviderKey{
						{Secret: secret.New(literalSecret), Weight: intp(3)},
						{Secret: secret.New(acmeEnvSecret), SecretEnv: "ROLTER_TEST_ACME_KEY"},
					},
				},
				{Name: "Local vLLM", Kind: "vllm", BaseURL: "http://10.0.0.5:8000/v1/", MetadataSource: "upstream"},
			},
			Groups: []config.Group{
				{
					Name: "Acme fleet", Slug: "acme-fleet", Strategy: "round_robin",
					Members: []config.GroupMember{
						{Provider: "openai-prod", Weight: intp(2)},
						{Provider: "local-vllm", ModelMap: map[string]string{"gpt-4o": "meta/llama-3-70b"}},
					},
				},
				{Name: "vLLM only", Members: []config.GroupMember{{Provider: "local-vllm"}}},
			},
			Projects: []config.Project{
				{
					Name: "web", Description: "the web app", RPMLimit: 1200, TPMLimit: 500000,
					Routes: []config.Route{
						{
							Model: "gpt-4o", Strategy: "weighted",
							Targets: []config.Target{
								{Provider: "openai-prod", Weight: intp(9)},
								{Provider: "local-vllm", UpstreamModel: "meta/llama-3-70b", Weight: intp(1)},
							},
							Policy:   config.Policy{MaxOutputTokens: 4096, Tools: "allow", Media: "deny", MaxConcurrency: 8},
							RPMLimit: 300, TPMLimit: 200000,
						},
						{Model: "llama", Strategy: "round_robin", Targets: []config.Target{{Provider: "local-vllm"}}},
					},
					Keys: []config.VirtualKey{
						{Name: "web-frontend", Models: []string{"gpt-4o"}, ExpiresAt: &expires, RPMLimit: 600},
						{Name: "web-backend"},
					},
				},
				{
					Name: "batch",
					Keys: []config.VirtualKey{{Name: "nightly", TPMLimit: 100000}},
				},
			},
		},
		{
			Name: "globex",
			Providers: []config.Provider{{
				Name: "claude", Kind: "anthropic", BaseURL: "https://api.anthropic.com",
				Keys: []config.ProviderKey{{Secret: secret.New(globexEnvSecret), SecretEnv: "ROLTER_TEST_GLOBEX_KEY"}},
			}},
			Projects: []config.Project{{
				Name: "research",
				Routes: []config.Route{{
					Model:   "claude-sonnet",
					Targets: []config.Target{{Provider: "claude", UpstreamModel: "claude-sonnet-4-5"}},
				}},
				Keys: []config.VirtualKey{{Name: "lab"}},
			}},
		},
	}}
	if !reflect.DeepEqual(got, want) {
		// Secrets print redacted, so compare them on their own first.
		for oi := range min(len(got.Orgs), len(want.Orgs)) {
			for pi := range min(len(got.Orgs[oi].Providers), len(want.Orgs[oi].Providers)) {
				g, w := got.Orgs[oi].Providers[pi].Keys, want.Orgs[oi].Providers[pi].Keys
				for ki := range min(len(g), len(w)) {
					if g[ki].Secret.Reveal() != w[ki].Secret.Reveal() {
						t.Errorf("orgs[%d].providers[%d].keys[%d].secret differs from the expected one", oi, pi, ki)
					}
				}
			}
		}
		t.Fatalf("parsed file differs\n got: %+v\nwant: %+v", got, want)
	}
}

func TestParseEmpty(t *testing.T) {
	for _, in := range []string{"", "\n", "# nothing\n", "---\n"} {
		f, err := config.Parse([]byte(in))
		if err != nil {
			t.Errorf("Parse(%q): %v", in, err)
			continue
		}
		if len(f.Orgs) != 0 {
			t.Errorf("Parse(%q) = %d orgs, want none", in, len(f.Orgs))
		}
	}
}

// A Parse error has no file name; Load adds it.
func TestParseErrorHasNoPath(t *testing.T) {
	_, err := config.Parse([]byte("orgs: []\nbar: 1\n"))
	if err == nil || err.Error() != "line 2: unknown key bar" {
		t.Fatalf("Parse error = %v, want exactly %q", err, "line 2: unknown key bar")
	}
}

func TestLoadMissingFile(t *testing.T) {
	_, err := config.Load("testdata/does-not-exist.yml")
	if err == nil || !strings.Contains(err.Error(), "config: open testdata/does-not-exist.yml") {
		t.Fatalf("Load error = %v, want it to name the file it could not open", err)
	}
}

// harness is a fresh store with the Service the importer calls.
type harness struct {
	db   *sqlstore.DB
	snap *snapshot.Holder
	svc  *admin.Service
	logs *bytes.Buffer
	log  *slog.Logger
}

func newHarness(t *testing.T, dialect string) *harness {
	t.Helper()
	h := &harness{db: storetest.Open(t, dialect, nil), logs: &bytes.Buffer{}}
	h.log = slog.New(slog.NewTextHandler(h.logs, nil))
	h.snap = snapshot.NewHolder(h.db, h.log)
	if err := h.snap.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	h.svc = admin.NewService(h.db, h.snap, h.log)
	return h
}

// each runs fn as a subtest on every store dialect.
func each(t *testing.T, fn func(t *testing.T, h *harness)) {
	storetest.EachWith(t, newHarness, fn)
}

func (h *harness) apply(t *testing.T, f *config.File) (out string, err error) {
	t.Helper()
	var buf bytes.Buffer
	err = config.Apply(context.Background(), h.svc, f, &buf, h.log)
	return buf.String(), err
}

func (h *harness) org(t *testing.T, name string) *store.Org {
	t.Helper()
	o, err := h.db.GetOrg(context.Background(), name)
	if err != nil {
		t.Fatalf("org %s: %v", name, err)
	}
	return o
}

func (h *harness) project(t *testing.T, org, name string) *store.Project {
	t.Helper()
	p, err := h.db.GetProject(context.Background(), h.org(t, org).ID, name)
	if err != nil {
		t.Fatalf("project %s/%s: %v", org, name, err)
	}
	return p
}

func (h *harness) provider(t *testing.T, org, slug string) *store.Provider {
	t.Helper()
	p, err := h.db.GetProvider(context.Background(), h.org(t, org).ID, slug)
	if err != nil {
		t.Fatalf("provider %s/%s: %v", org, slug, err)
	}
	return p
}

func (h *harness) group(t *testing.T, org, slug string) *store.Group {
	t.Helper()
	g, err := h.db.GetGroup(context.Background(), h.org(t, org).ID, slug)
	if err != nil {
		t.Fatalf("group %s/%s: %v", org, slug, err)
	}
	return g
}

func (h *harness) route(t *testing.T, org, project, model string) *store.Route {
	t.Helper()
	r, err := h.db.GetRoute(context.Background(), h.project(t, org, project).ID, model)
	if err != nil {
		t.Fatalf("route %s/%s/%s: %v", org, project, model, err)
	}
	return r
}

func (h *harness) keys(t *testing.T, org, project string) []store.VirtualKey {
	t.Helper()
	ks, err := h.db.ListVirtualKeys(context.Background(), h.project(t, org, project).ID, store.Page{Limit: 100})
	if err != nil {
		t.Fatalf("keys of %s/%s: %v", org, project, err)
	}
	return ks
}

func (h *harness) count(t *testing.T, what string, list func(store.Page) (int, error)) int {
	t.Helper()
	n, err := list(store.Page{Limit: 100})
	if err != nil {
		t.Fatalf("list %s: %v", what, err)
	}
	return n
}

func loadFull(t *testing.T) *config.File {
	t.Helper()
	testEnv(t)
	f, err := config.Load("testdata/full.good.yml")
	if err != nil {
		t.Fatal(err)
	}
	return f
}

var keyLine = regexp.MustCompile(`^rolter: config created virtual key "([^"]+)" in ([^ /]+/[^ /]+): (rk-\S+) \(shown once\)$`)

// createdKeys parses out: one line per created virtual key, keyed by
// "org/project/name", each with its token.
func createdKeys(t *testing.T, out string) map[string]string {
	t.Helper()
	keys := map[string]string{}
	for _, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		if line == "" {
			continue
		}
		m := keyLine.FindStringSubmatch(line)
		if m == nil {
			t.Errorf("unexpected output line %q", line)
			continue
		}
		id := m[2] + "/" + m[1]
		if _, dup := keys[id]; dup {
			t.Errorf("key %s printed twice", id)
		}
		keys[id] = m[3]
	}
	return keys
}

func TestApplyFull(t *testing.T) {
	each(t, func(t *testing.T, h *harness) {
		ctx := context.Background()
		out, err := h.apply(t, loadFull(t))
		if err != nil {
			t.Fatalf("Apply: %v", err)
		}

		acme, globex := h.org(t, "acme"), h.org(t, "globex")
		if acme.Description != "Acme Corp" || globex.Description != "" {
			t.Errorf("org descriptions = %q, %q", acme.Description, globex.Description)
		}
		if n := h.count(t, "orgs", func(p store.Page) (int, error) { l, err := h.db.ListOrgs(ctx, p); return len(l), err }); n != 2 {
			t.Errorf("%d orgs, want 2", n)
		}

		// Providers, with their key pools.
		op := h.provider(t, "acme", "openai-prod")
		if op.Name != "OpenAI Prod" || op.Kind != "openai" || op.BaseURL != "https://api.openai.com/v1" ||
			op.MetadataSource != "configured" || op.ContextLimit != 128000 ||
			!slices.Equal(op.Models, []string{"gpt-4o", "gpt-4o-mini"}) ||
			op.Settings.FirstByteTimeout != store.Duration(30*time.Second) ||
			op.Settings.IdleTimeout != store.Duration(2*time.Minute) || op.DeletedAt != nil {
			t.Errorf("openai-prod = %+v", *op)
		}
		type pooled struct {
			secret string
			weight int
		}
		// GetProvider leaves key secrets closed; Load opens them.
		state, err := h.db.Load(ctx)
		if err != nil {
			t.Fatalf("Load: %v", err)
		}
		pool := func(p *store.Provider) []pooled {
			var ks []pooled
			for _, sp := range state.Providers {
				if sp.ID != p.ID {
					continue
				}
				if len(sp.Keys) != len(p.Keys) {
					t.Errorf("provider %s: %d keys in Load, %d in GetProvider", p.Slug, len(sp.Keys), len(p.Keys))
				}
				p = &sp
			}
			for _, k := range p.Keys {
				ks = append(ks, pooled{k.Secret.Reveal(), k.Weight})
			}
			slices.SortFunc(ks, func(a, b pooled) int { return strings.Compare(a.secret, b.secret) })
			return ks
		}
		if got, want := pool(op), []pooled{{acmeEnvSecret, 1}, {literalSecret, 3}}; !slices.Equal(got, want) {
			t.Errorf("openai-prod keys: got %d keys %v, want the literal secret with weight 3 and the env one with weight 1", len(got), got)
		}
		lv := h.provider(t, "acme", "local-vllm") // slug derived from "Local vLLM"
		if lv.Name != "Local vLLM" || lv.Kind != "vllm" || lv.BaseURL != "http://10.0.0.5:8000/v1" ||
			lv.MetadataSource != "upstream" || len(lv.Keys) != 0 || !reflect.DeepEqual(lv.Settings, store.ProviderSettings{}) {
			t.Errorf("local-vllm = %+v", *lv)
		}
		cl := h.provider(t, "globex", "claude")
		if cl.Kind != "anthropic" || cl.MetadataSource != "configured" {
			t.Errorf("claude = %+v", *cl)
		}
		if got, want := pool(cl), []pooled{{globexEnvSecret, 1}}; !slices.Equal(got, want) {
			t.Errorf("claude keys: got %d keys, want the env secret with weight 1", len(got))
		}
		if _, err := h.db.GetProvider(ctx, globex.ID, "openai-prod"); err != store.ErrNotFound {
			t.Errorf("openai-prod in globex: err = %v, want ErrNotFound (providers belong to their org)", err)
		}

		// Provider groups, created after the providers they name.
		type member struct {
			slug   string
			weight int
			mm     string
		}
		members := func(g *store.Group) []member {
			var ms []member
			for _, m := range g.Members {
				ms = append(ms, member{m.ProviderSlug, m.Weight, fmt.Sprint(m.ModelMap)})
			}
			return ms
		}
		fleet := h.group(t, "acme", "acme-fleet")
		if got, want := members(fleet), []member{{"openai-prod", 2, "map[]"}, {"local-vllm", 1, "map[gpt-4o:meta/llama-3-70b]"}}; fleet.Name != "Acme fleet" ||
			fleet.Strategy != "round_robin" || !slices.Equal(got, want) {
			t.Errorf("acme-fleet = %s %s %v, want round_robin %v", fleet.Name, fleet.Strategy, got, want)
		}
		only := h.group(t, "acme", "vllm-only") // slug derived from "vLLM only"
		if got, want := members(only), []member{{"local-vllm", 1, "map[]"}}; only.Name != "vLLM only" || only.Strategy != "weighted" || !slices.Equal(got, want) {
			t.Errorf("vllm-only = %s %s %v, want weighted %v", only.Name, only.Strategy, got, want)
		}
		if gs, err := h.db.ListGroups(ctx, globex.ID, store.Page{}); err != nil || len(gs) != 0 {
			t.Errorf("globex groups = %d, %v, want none", len(gs), err)
		}

		// Projects and routes.
		if p := h.project(t, "acme", "web"); p.Description != "the web app" || p.RPMLimit != 1200 || p.TPMLimit != 500000 {
			t.Errorf("web = %+v", p)
		}
		h.project(t, "acme", "batch")
		h.project(t, "globex", "research")

		r := h.route(t, "acme", "web", "gpt-4o")
		if r.Strategy != "weighted" || r.RPMLimit != 300 || r.TPMLimit != 200000 {
			t.Errorf("gpt-4o strategy = %q, rpm_limit %d, tpm_limit %d", r.Strategy, r.RPMLimit, r.TPMLimit)
		}
		if want := (store.Policy{MaxOutputTokens: 4096, Tools: "allow", Media: "deny", MaxConcurrency: 8}); r.Policy != want {
			t.Errorf("gpt-4o policy = %+v, want %+v", r.Policy, want)
		}
		type target struct {
			slug, upstream string
			weight         int
		}
		targets := func(r *store.Route) []target {
			var ts []target
			for _, x := range r.Targets {
				ts = append(ts, target{x.ProviderSlug, x.UpstreamModel, x.Weight})
			}
			return ts
		}
		if got, want := targets(r), []target{{"openai-prod", "", 9}, {"local-vllm", "meta/llama-3-70b", 1}}; !slices.Equal(got, want) {
			t.Errorf("gpt-4o targets = %v, want %v", got, want)
		}
		r = h.route(t, "acme", "web", "llama")
		if got, want := targets(r), []target{{"local-vllm", "", 1}}; r.Strategy != "round_robin" || !slices.Equal(got, want) || r.Policy != (store.Policy{}) {
			t.Errorf("llama = %s %v %+v", r.Strategy, got, r.Policy)
		}
		r = h.route(t, "globex", "research", "claude-sonnet")
		if got, want := targets(r), []target{{"claude", "claude-sonnet-4-5", 1}}; r.Strategy != "weighted" || !slices.Equal(got, want) {
			t.Errorf("claude-sonnet = %s %v", r.Strategy, got)
		}

		// Virtual keys: stored, and each secret printed once.
		printed := createdKeys(t, out)
		if len(printed) != 4 || strings.Count(out, "\n") != 4 {
			t.Errorf("out has %d key lines, want 4:\n%s", strings.Count(out, "\n"), out)
		}
		stored := map[string]store.VirtualKey{}
		for _, pj := range [][2]string{{"acme", "web"}, {"acme", "batch"}, {"globex", "research"}} {
			for _, k := range h.keys(t, pj[0], pj[1]) {
				stored[pj[0]+"/"+pj[1]+"/"+k.Name] = k
			}
		}
		if len(stored) != 4 {
			t.Errorf("%d virtual keys stored, want 4: %v", len(stored), slices.Sorted(func(yield func(string) bool) {
				for k := range stored {
					if !yield(k) {
						return
					}
				}
			}))
		}
		for id, tok := range printed {
			k, ok := stored[id]
			if !ok {
				t.Errorf("printed key %s is not in the store", id)
				continue
			}
			lookup, ok := secret.Lookup(secret.PrefixVirtualKey, tok)
			if !ok || lookup != k.Lookup || !k.Hash.Equal(secret.HashOf(tok)) {
				t.Errorf("printed token for %s does not match the stored key", id)
			}
		}
		fe := stored["acme/web/web-frontend"]
		if !slices.Equal(fe.Models, []string{"gpt-4o"}) || fe.RPMLimit != 600 || fe.ExpiresAt == nil ||
			!fe.ExpiresAt.Equal(time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC)) || fe.RevokedAt != nil {
			t.Errorf("web-frontend = %+v", fe)
		}
		if be := stored["acme/web/web-backend"]; len(be.Models) != 0 || be.ExpiresAt != nil || be.RPMLimit != 0 {
			t.Errorf("web-backend = %+v", be)
		}
		if n := stored["acme/batch/nightly"]; n.TPMLimit != 100000 {
			t.Errorf("nightly = %+v", n)
		}

		// The snapshot was rebuilt: the printed tokens authenticate now.
		snap := h.snap.Current()
		if snap == nil || snap.Org("acme") == nil || snap.Org("globex") == nil {
			t.Fatal("the snapshot does not show the imported orgs")
		}
		for id, tok := range printed {
			if k, ok := snap.Authenticate(tok, time.Now()); !ok || k.Name != id[strings.LastIndex(id, "/")+1:] {
				t.Errorf("token of %s does not authenticate against the snapshot", id)
			}
		}

		// Provider secrets never reach out or the log; virtual key
		// secrets reach out only.
		assertNoSecrets(t, "out", out)
		assertNoSecrets(t, "the log", h.logs.String())
		for id, tok := range printed {
			if strings.Contains(h.logs.String(), tok) {
				t.Errorf("the log contains the secret of virtual key %s", id)
			}
		}
	})
}

func TestApplyIdempotentNeverOverwrites(t *testing.T) {
	each(t, func(t *testing.T, h *harness) {
		ctx := context.Background()
		if _, err := h.apply(t, loadFull(t)); err != nil {
			t.Fatalf("first Apply: %v", err)
		}

		// Operators change things after the import.
		newURL := "https://gateway.internal.example/v1"
		if _, err := h.svc.UpdateProvider(ctx, "acme", "openai-prod", admin.ProviderPatch{BaseURL: &newURL}, false); err != nil {
			t.Fatalf("UpdateProvider: %v", err)
		}
		acme := h.org(t, "acme")
		acme.Description = "changed by hand"
		if err := h.db.UpdateOrg(ctx, acme); err != nil {
			t.Fatalf("UpdateOrg: %v", err)
		}
		fleetName := "renamed by hand"
		if _, err := h.svc.UpdateGroup(ctx, "acme", "acme-fleet", admin.GroupPatch{Name: &fleetName}, false); err != nil {
			t.Fatalf("UpdateGroup: %v", err)
		}
		rt := h.route(t, "acme", "web", "llama")
		rt.Policy.MaxConcurrency = 2
		if err := h.db.UpdateRoute(ctx, rt); err != nil {
			t.Fatalf("UpdateRoute: %v", err)
		}
		keysBefore := map[string][]store.VirtualKey{}
		for _, pj := range []string{"web", "batch"} {
			keysBefore[pj] = h.keys(t, "acme", pj)
		}

		h.logs.Reset()
		out, err := h.apply(t, loadFull(t))
		if err != nil {
			t.Fatalf("second Apply: %v", err)
		}
		if out != "" {
			t.Errorf("second Apply printed %q, want nothing: no key is created twice", out)
		}
		logs := h.logs.String()
		// 2 orgs, 3 providers, 2 groups, 3 projects, 3 routes, 4 virtual keys.
		if n := strings.Count(logs, "exists, left unchanged"); n != 17 {
			t.Errorf("%d \"exists, left unchanged\" log lines, want 17:\n%s", n, logs)
		}
		for _, want := range []string{
			`kind=org name=acme`,
			`kind=provider name=acme/openai-prod`,
			`kind=group name=acme/acme-fleet`,
			`kind=group name="acme/vLLM only"`,
			`kind=project name=globex/research`,
			`kind=route name=acme/web/gpt-4o`,
			`kind="virtual key" name=acme/web/web-frontend`,
		} {
			if !strings.Contains(logs, want) {
				t.Errorf("the log lacks %q:\n%s", want, logs)
			}
		}
		assertNoSecrets(t, "the log", logs)

		// Nothing was overwritten...
		if p := h.provider(t, "acme", "openai-prod"); p.BaseURL != newURL || len(p.Keys) != 2 {
			t.Errorf("openai-prod after re-Apply: base_url %q with %d keys, want %q with 2", p.BaseURL, len(p.Keys), newURL)
		}
		if o := h.org(t, "acme"); o.Description != "changed by hand" {
			t.Errorf("acme description after re-Apply = %q", o.Description)
		}
		if g := h.group(t, "acme", "acme-fleet"); g.Name != fleetName || len(g.Members) != 2 {
			t.Errorf("acme-fleet after re-Apply: %q with %d members, want %q with 2", g.Name, len(g.Members), fleetName)
		}
		if r := h.route(t, "acme", "web", "llama"); r.Policy.MaxConcurrency != 2 {
			t.Errorf("llama max_concurrency after re-Apply = %d, want 2", r.Policy.MaxConcurrency)
		}
		// ...and nothing was added.
		if n := h.count(t, "providers", func(p store.Page) (int, error) {
			l, err := h.db.ListProviders(ctx, acme.ID, p)
			return len(l), err
		}); n != 2 {
			t.Errorf("acme has %d providers, want 2", n)
		}
		if n := h.count(t, "routes", func(p store.Page) (int, error) {
			l, err := h.db.ListRoutes(ctx, h.project(t, "acme", "web").ID, p)
			return len(l), err
		}); n != 2 {
			t.Errorf("acme/web has %d routes, want 2", n)
		}
		for pj, before := range keysBefore {
			if after := h.keys(t, "acme", pj); !reflect.DeepEqual(ids(after), ids(before)) {
				t.Errorf("acme/%s keys changed: %v -> %v", pj, ids(before), ids(after))
			}
		}

		// A revoked key is no longer live: the next Apply mints one
		// replacement for it, and only for it.
		var backend store.VirtualKey
		for _, k := range keysBefore["web"] {
			if k.Name == "web-backend" {
				backend = k
			}
		}
		if err := h.db.RevokeVirtualKey(ctx, backend.ID, time.Now()); err != nil {
			t.Fatal(err)
		}
		out, err = h.apply(t, loadFull(t))
		if err != nil {
			t.Fatalf("third Apply: %v", err)
		}
		printed := createdKeys(t, out)
		if len(printed) != 1 || printed["acme/web/web-backend"] == "" {
			t.Errorf("after revoking web-backend, Apply printed %q, want one new web-backend key", out)
		}
		if ks := h.keys(t, "acme", "web"); len(ks) != 3 {
			t.Errorf("acme/web has %d keys, want 3 (two live, one revoked)", len(ks))
		}
	})
}

func ids(ks []store.VirtualKey) []int64 {
	var out []int64
	for _, k := range ks {
		out = append(out, k.ID)
	}
	return out
}

func TestApplyEmptyFile(t *testing.T) {
	each(t, func(t *testing.T, h *harness) {
		f, err := config.Parse(nil)
		if err != nil {
			t.Fatal(err)
		}
		out, err := h.apply(t, f)
		if err != nil || out != "" {
			t.Fatalf("Apply of an empty file = %q, %v", out, err)
		}
		orgs, err := h.db.ListOrgs(context.Background(), store.Page{Limit: 10})
		if err != nil || len(orgs) != 0 {
			t.Fatalf("orgs after an empty import: %d, %v", len(orgs), err)
		}
	})
}

// An invalid resource stops Apply with an error naming its path in the file
// and the admin API's stable code.
func TestApplyInvalid(t *testing.T) {
	const acme = "orgs:\n  - name: acme\n"
	const vllm = acme + `    providers:
      - name: vllm
        kind: vllm
        base_url: http://10.0.0.5:8000/v1
`
	cases := []struct {
		name string
		yaml string
		want []string
	}{
		{
			name: "route to unknown provider",
			yaml: vllm + `    projects:
      - name: web
        routes:
          - model: ok
            targets: [{provider: vllm}]
          - model: gpt-4o
            targets:
              - provider: vllm
              - provider: nope
`,
			want: []string{"config: orgs[0].projects[0].routes[1]: ", "targets[1].provider no such provider", "(unknown_provider)"},
		},
		{
			name: "group with unknown provider",
			yaml: vllm + `    groups:
      - slug: fleet
        members:
          - provider: vllm
          - provider: nope
`,
			want: []string{"config: orgs[0].groups[0]: ", "members[1].provider no such provider", "(unknown_provider)"},
		},
		{
			name: "group in group",
			yaml: vllm + `    groups:
      - slug: fleet
        members: [{provider: vllm}]
      - slug: fleets
        members: [{provider: fleet}]
`,
			want: []string{"config: orgs[0].groups[1]: groups cannot contain groups", "(validation_failed)"},
		},
		{
			name: "group without members",
			yaml: vllm + "    groups:\n      - slug: fleet\n",
			want: []string{"config: orgs[0].groups[0]: ", "members needs at least one member", "(validation_failed)"},
		},
		{
			name: "ftp base_url",
			yaml: vllm + `      - name: files
        kind: openai
        base_url: ftp://x
        keys:
          - secret: ` + literalSecret + `
`,
			want: []string{"config: orgs[0].providers[1]: ", "base_url must be an absolute http:// or https:// URL", "(validation_failed)"},
		},
		{
			name: "credentials in base_url",
			yaml: acme + `    providers:
      - name: creds
        kind: openai
        base_url: https://user:` + literalSecret + `@api.example.com/v1
`,
			want: []string{"config: orgs[0].providers[0]: ", "base_url must not carry credentials", "(validation_failed)"},
		},
		{
			name: "fields in a stable order",
			yaml: acme + `    providers:
      - name: many
        kind: nope
        base_url: ftp://x
        metadata_source: guess
`,
			want: []string{"config: orgs[0].providers[0]: the request has invalid fields; see fields; base_url must be an absolute http:// or https:// URL, e.g. http://10.0.0.5:8000/v1; kind must be one of openai, anthropic, vllm, sglang, llamacpp; metadata_source must be \"configured\" or \"upstream\" (validation_failed)"},
		},
		{
			name: "provider key without a secret",
			yaml: acme + `    providers:
      - name: empty
        kind: openai
        base_url: https://api.openai.com/v1
        keys:
          - weight: 2
`,
			want: []string{"config: orgs[0].providers[0]: ", "keys[0].secret is required", "(validation_failed)"},
		},
		{
			name: "bad org name",
			yaml: acme + "  - name: \"bad name\"\n",
			want: []string{"config: orgs[1]: ", "name must be 1-63 characters", "(validation_failed)"},
		},
		{
			name: "bad project name",
			yaml: acme + "    projects:\n      - name: ok\n      - name: -no\n",
			want: []string{"config: orgs[0].projects[1]: ", "name must be 1-63 characters", "(validation_failed)"},
		},
		{
			name: "route without targets",
			yaml: vllm + "    projects:\n      - name: web\n        routes:\n          - model: gpt-4o\n",
			want: []string{"config: orgs[0].projects[0].routes[0]: ", "targets needs at least one target", "(validation_failed)"},
		},
		{
			name: "bad policy",
			yaml: vllm + `    projects:
      - name: web
        routes:
          - model: gpt-4o
            targets: [{provider: vllm}]
            policy: {tools: maybe}
`,
			want: []string{"config: orgs[0].projects[0].routes[0]: ", `policy.tools must be "allow" or "deny"`, "(validation_failed)"},
		},
		{
			name: "expired virtual key",
			yaml: acme + `    projects:
      - name: web
      - name: batch
        keys:
          - name: old
            expires_at: 2001-01-01T00:00:00Z
`,
			want: []string{"config: orgs[0].projects[1].keys[0]: ", "expires_at must be in the future", "(validation_failed)"},
		},
		{
			name: "virtual key without a name",
			yaml: acme + "    projects:\n      - name: web\n        keys:\n          - models: [gpt-4o]\n",
			want: []string{"config: orgs[0].projects[0].keys[0]: ", "name is required", "(validation_failed)"},
		},
	}
	each(t, func(t *testing.T, h *harness) {
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				// One store per dialect: start every case from an empty one.
				for _, name := range []string{"acme", "bad name"} {
					if o, err := h.db.GetOrg(context.Background(), name); err == nil {
						purgeOrg(t, h, o)
					}
				}
				f, err := config.Parse([]byte(tc.yaml))
				if err != nil {
					t.Fatalf("Parse: %v", err)
				}
				out, err := h.apply(t, f)
				if err == nil {
					t.Fatalf("Apply succeeded, want an error containing %q", tc.want)
				}
				for _, w := range tc.want {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error = %q\nwant it to contain %q", err, w)
					}
				}
				assertNoSecrets(t, "the error", err.Error())
				assertNoSecrets(t, "the log", h.logs.String())
				if out != "" {
					t.Errorf("out = %q, want nothing", out)
				}
			})
		}
	})
}

// purgeOrg removes an org and everything in it, children first.
func purgeOrg(t *testing.T, h *harness, o *store.Org) {
	t.Helper()
	ctx := context.Background()
	all := store.Page{Limit: 1000}
	pjs, err := h.db.ListProjects(ctx, o.ID, all)
	if err != nil {
		t.Fatal(err)
	}
	for _, pj := range pjs {
		rs, err := h.db.ListRoutes(ctx, pj.ID, all)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rs {
			if err := h.db.DeleteRoute(ctx, r.ID); err != nil {
				t.Fatal(err)
			}
		}
		ks, err := h.db.ListVirtualKeys(ctx, pj.ID, all)
		if err != nil {
			t.Fatal(err)
		}
		if len(ks) > 0 {
			t.Fatalf("cannot purge project %s with %d keys", pj.Name, len(ks))
		}
		if err := h.db.DeleteProject(ctx, pj.ID); err != nil {
			t.Fatal(err)
		}
	}
	gs, err := h.db.ListGroups(ctx, o.ID, all)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range gs {
		if _, err := h.db.PurgeGroup(ctx, g.ID, false); err != nil {
			t.Fatal(err)
		}
	}
	ps, err := h.db.ListProviders(ctx, o.ID, all)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ps {
		if _, err := h.db.PurgeProvider(ctx, p.ID, false); err != nil {
			t.Fatal(err)
		}
	}
	if err := h.db.DeleteOrg(ctx, o.ID); err != nil {
		t.Fatal(err)
	}
}

// Apply stops at the first invalid resource; what it created before stays,
// and a re-run of the corrected file skips it and creates the rest.
func TestApplyResumesAfterFailure(t *testing.T) {
	const head = `orgs:
  - name: acme
    providers:
      - name: vllm
        kind: vllm
        base_url: http://10.0.0.5:8000/v1
    projects:
      - name: web
        routes:
          - model: gpt-4o
            targets:
`
	const tail = `        keys:
          - name: app
  - name: globex
`
	each(t, func(t *testing.T, h *harness) {
		ctx := context.Background()
		bad, err := config.Parse([]byte(head + "              - provider: typo\n" + tail))
		if err != nil {
			t.Fatal(err)
		}
		out, err := h.apply(t, bad)
		if err == nil || !strings.Contains(err.Error(), "orgs[0].projects[0].routes[0]") || !strings.Contains(err.Error(), "(unknown_provider)") {
			t.Fatalf("Apply = %v, want the unknown provider of orgs[0].projects[0].routes[0]", err)
		}
		if out != "" {
			t.Errorf("out = %q, want nothing", out)
		}
		h.provider(t, "acme", "vllm")
		if _, err := h.db.GetRoute(ctx, h.project(t, "acme", "web").ID, "gpt-4o"); err != store.ErrNotFound {
			t.Errorf("route after the failure: err = %v, want ErrNotFound", err)
		}
		if len(h.keys(t, "acme", "web")) != 0 {
			t.Error("a key was created after the failing route")
		}
		if _, err := h.db.GetOrg(ctx, "globex"); err != store.ErrNotFound {
			t.Errorf("globex after the failure: err = %v, want ErrNotFound (Apply stops at the first error)", err)
		}

		h.logs.Reset()
		good, err := config.Parse([]byte(head + "              - provider: vllm\n" + tail))
		if err != nil {
			t.Fatal(err)
		}
		out, err = h.apply(t, good)
		if err != nil {
			t.Fatalf("Apply of the corrected file: %v", err)
		}
		if keys := createdKeys(t, out); len(keys) != 1 || keys["acme/web/app"] == "" {
			t.Errorf("out = %q, want the one new key acme/web/app", out)
		}
		h.route(t, "acme", "web", "gpt-4o")
		h.org(t, "globex")
		if n := strings.Count(h.logs.String(), "exists, left unchanged"); n != 3 {
			t.Errorf("%d \"exists, left unchanged\" lines, want 3 (org, provider, project):\n%s", n, h.logs.String())
		}
	})
}

// TestApplyRebuildsOnce: an import writes in one transaction and rebuilds
// the snapshot once for all its entities, not once per entity (issue 21),
// and the one rebuild holds them all.
func TestApplyRebuildsOnce(t *testing.T) {
	const providers, routes = 20, 200
	var b strings.Builder
	b.WriteString("orgs:\n  - name: acme\n    providers:\n")
	for i := range providers {
		fmt.Fprintf(&b, "      - name: p%d\n        kind: vllm\n        base_url: http://10.0.0.%d:8000/v1\n", i, i+1)
	}
	b.WriteString("    projects:\n      - name: web\n        routes:\n")
	for i := range routes {
		fmt.Fprintf(&b, "          - model: m%d\n            targets:\n              - provider: p%d\n", i, i%providers)
	}
	b.WriteString("        keys:\n          - name: app\n")
	f, err := config.Parse([]byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	each(t, func(t *testing.T, h *harness) {
		before := h.snap.Rebuilds()
		if _, err := h.apply(t, f); err != nil {
			t.Fatal(err)
		}
		if n := h.snap.Rebuilds() - before; n != 1 {
			t.Errorf("%d snapshot rebuilds for one import of %d entities, want 1", n, providers+routes+4)
		}
		pj := h.snap.Current().Org("acme").Projects.At("web")
		if pj == nil || pj.Routes.Len() != routes || pj.Org.Providers.Len() != providers {
			t.Fatalf("snapshot after the import: project %v", pj)
		}
		// A re-run creates nothing and rebuilds nothing.
		before = h.snap.Rebuilds()
		if _, err := h.apply(t, f); err != nil {
			t.Fatal(err)
		}
		if n := h.snap.Rebuilds() - before; n != 0 {
			t.Errorf("%d rebuilds for a re-run that creates nothing, want 0", n)
		}
	})
}
