package fleet

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rolter/rolter/internal/fleetapi"
	"github.com/rolter/rolter/internal/secret"
	"github.com/rolter/rolter/internal/store"
	"github.com/rolter/rolter/internal/store/sqlstore"
	"github.com/rolter/rolter/internal/store/storetest"
)

func vllm(args ...string) *fleetapi.VLLM {
	return &fleetapi.VLLM{Model: "Qwen/Qwen3-8B", Source: fleetapi.Source{Kind: "hf"}, VRAMGB: 16, DiskGB: 18, Args: args}
}

func TestContractDiff(t *testing.T) {
	base := vllm("--max-model-len", "32768", "--tool-call-parser", "hermes", "--enable-auto-tool-choice")
	cases := []struct {
		other *fleetapi.VLLM
		diff  string
	}{
		{vllm("--enable-auto-tool-choice", "--tool-call-parser=hermes", "--max-model-len=32768", "--gpu-memory-utilization", "0.8"), ""},
		{vllm("--max-model-len", "32768", "--tool-call-parser", "hermes", "--enable-auto-tool-choice", "--kv-cache-memory", "1000"), ""},
		{vllm("--max-model-len", "40960", "--tool-call-parser", "hermes", "--enable-auto-tool-choice"), "--max-model-len"},
		{vllm("--max-model-len", "32768", "--tool-call-parser", "hermes"), "--enable-auto-tool-choice"},
		{vllm("--max-model-len", "32768", "--tool-call-parser", "hermes", "--enable-auto-tool-choice", "--served-model-name", "qwen"), "served model name"},
		{vllm("--max-model-len", "32768", "--tool-call-parser", "hermes", "--enable-auto-tool-choice", "--chat-template", "/t.jinja"), "--chat-template"},
		{vllm("--max-model-len", "32768", "--tool-call-parser", "hermes", "--enable-auto-tool-choice", "--reasoning-parser", "qwen3"), "--reasoning-parser"},
		// vLLM reads underscores as dashes; so does the contract.
		{vllm("--max_model_len", "32768", "--tool_call_parser=hermes", "--enable_auto_tool_choice"), ""},
		{vllm("--max_model_len", "40960", "--tool-call-parser", "hermes", "--enable-auto-tool-choice"), "--max-model-len"},
	}
	for i, c := range cases {
		name, _, _, differ := ContractDiff(base, c.other)
		if name != c.diff || differ != (c.diff != "") {
			t.Errorf("case %d: diff %q (%v), want %q", i, name, differ, c.diff)
		}
	}
	if MaxModelLen(base) != 32768 || MaxModelLen(vllm()) != 0 || MaxModelLen(vllm("--max_model_len=1024")) != 1024 {
		t.Fatal("MaxModelLen")
	}
}

func TestRevisionIsStableAndSensitive(t *testing.T) {
	h := &store.Host{ID: 7, ModelName: "qwen3", Port: 8000, APIKey: secret.New("rh-a_b"),
		Recipe: fleetapi.Recipe{VLLM: vllm("--max-model-len", "32768")}}
	r1 := Revision(h)
	// Same payload, rebuilt from scratch: same revision.
	h2 := *h
	h2.Recipe = fleetapi.Recipe{VLLM: vllm("--max-model-len", "32768")}
	h2.ApplyRequested, h2.AutoApply, h2.Notes, h2.State = true, true, "notes are not part of it", store.HostServing
	if Revision(&h2) != r1 {
		t.Fatal("equal payloads gave different revisions")
	}
	for name, mut := range map[string]func(*store.Host){
		"port":  func(h *store.Host) { h.Port = 8001 },
		"key":   func(h *store.Host) { h.APIKey = secret.New("rh-a_c") },
		"model": func(h *store.Host) { h.Recipe.VLLM.Model = "Qwen/Qwen3-8B-FP8" },
		"args": func(h *store.Host) {
			h.Recipe.VLLM.Args = append(h.Recipe.VLLM.Args, "--gpu-memory-utilization", "0.9")
		},
		"order":  func(h *store.Host) { h.Recipe.VLLM.Args = []string{"32768", "--max-model-len"} },
		"source": func(h *store.Host) { h.Recipe.VLLM.Source = fleetapi.Source{Kind: "local", Path: "/models/q"} },
		"vram":   func(h *store.Host) { h.Recipe.VLLM.VRAMGB = 24 },
		"route":  func(h *store.Host) { h.ModelName = "qwen3-b" },
	} {
		c := *h
		v := *h.Recipe.VLLM
		v.Args = append([]string(nil), v.Args...)
		c.Recipe = fleetapi.Recipe{VLLM: &v}
		mut(&c)
		if Revision(&c) == r1 {
			t.Errorf("changing %s kept the revision", name)
		}
	}
}

func TestValidateRecipe(t *testing.T) {
	ok := fleetapi.Recipe{VLLM: vllm("--max-model-len", "32768", "--reasoning-parser", "qwen3")}
	if fe := ValidateRecipe(ok); fe != nil {
		t.Fatalf("valid recipe refused: %v", fe)
	}
	for _, s := range []fleetapi.Source{
		{Kind: "hf", Repo: "Qwen/Qwen3-8B", Revision: "main"},
		{Kind: "url", URL: "https://mirror.internal/qwen3.tar"},
		{Kind: "registry", Ref: "models/qwen3:fp8"},
		{Kind: "local", Path: "/models/qwen3"},
	} {
		r := fleetapi.Recipe{VLLM: vllm()}
		r.VLLM.Source = s
		if fe := ValidateRecipe(r); fe != nil {
			t.Errorf("source %+v refused: %v", s, fe)
		}
	}
	bad := map[string]fleetapi.Recipe{
		"recipe.vllm":                      {},
		"recipe.vllm.model":                {VLLM: &fleetapi.VLLM{Model: "has space", Source: fleetapi.Source{Kind: "hf"}, VRAMGB: 1, DiskGB: 1}},
		"recipe.vllm.disk_gb":              {VLLM: &fleetapi.VLLM{Model: "m", Source: fleetapi.Source{Kind: "hf"}, VRAMGB: 1}},
		"recipe.vllm.source.path":          {VLLM: &fleetapi.VLLM{Model: "m", Source: fleetapi.Source{Kind: "local", Path: "relative"}, VRAMGB: 1, DiskGB: 1}},
		"recipe.vllm.source.ref":           {VLLM: &fleetapi.VLLM{Model: "m", Source: fleetapi.Source{Kind: "registry"}, VRAMGB: 1, DiskGB: 1}},
		"recipe.vllm.source.url":           {VLLM: &fleetapi.VLLM{Model: "m", Source: fleetapi.Source{Kind: "url", URL: "ftp://x/y"}, VRAMGB: 1, DiskGB: 1}},
		"recipe.vllm.args[0]":              {VLLM: &fleetapi.VLLM{Model: "m", Source: fleetapi.Source{Kind: "hf"}, VRAMGB: 1, DiskGB: 1, Args: []string{"positional"}}},
		"recipe.vllm.args[1]":              {VLLM: &fleetapi.VLLM{Model: "m", Source: fleetapi.Source{Kind: "hf"}, VRAMGB: 1, DiskGB: 1, Args: []string{"--x", "--api-key=abc"}}},
		"recipe.vllm.args[2] (underscore)": {VLLM: &fleetapi.VLLM{Model: "m", Source: fleetapi.Source{Kind: "hf"}, VRAMGB: 1, DiskGB: 1, Args: []string{"--x", "y", "--api_key", "abc"}}},
		"recipe.vllm.args[0] (config)":     {VLLM: &fleetapi.VLLM{Model: "m", Source: fleetapi.Source{Kind: "hf"}, VRAMGB: 1, DiskGB: 1, Args: []string{"--config", "/etc/v.yaml"}}},
		"recipe.vllm.args":                 {VLLM: &fleetapi.VLLM{Model: "m", Source: fleetapi.Source{Kind: "hf"}, VRAMGB: 1, DiskGB: 1, Args: []string{"--max-model-len", "-5"}}},
		"recipe.vllm.source.repo":          {VLLM: &fleetapi.VLLM{Model: "m", Source: fleetapi.Source{Kind: "url", URL: "http://x/y", Repo: "a/b"}, VRAMGB: 1, DiskGB: 1}},
		"recipe.vllm.source.kind":          {VLLM: &fleetapi.VLLM{Model: "m", VRAMGB: 1, DiskGB: 1}},
		"recipe.vllm.vram_gb":              {VLLM: &fleetapi.VLLM{Model: "m", Source: fleetapi.Source{Kind: "hf"}, VRAMGB: -1, DiskGB: 1}},
		"recipe.vllm.source.revision":      {VLLM: &fleetapi.VLLM{Model: "m", Source: fleetapi.Source{Kind: "local", Path: "/m", Revision: "x"}, VRAMGB: 1, DiskGB: 1}},
		"recipe.vllm.args[0] (control)":    {VLLM: &fleetapi.VLLM{Model: "m", Source: fleetapi.Source{Kind: "hf"}, VRAMGB: 1, DiskGB: 1, Args: []string{"--x\n"}}},
		"recipe.vllm.kv_cache":             {VLLM: &fleetapi.VLLM{Model: "m", Source: fleetapi.Source{Kind: "hf"}, VRAMGB: 1, DiskGB: 1, KVCache: "big"}},
		"recipe.vllm.kv_cache (both)":      {VLLM: &fleetapi.VLLM{Model: "m", Source: fleetapi.Source{Kind: "hf"}, VRAMGB: 1, DiskGB: 1, KVCache: "auto", Args: []string{"--kv-cache-memory=1"}}},
	}
	auto := fleetapi.Recipe{VLLM: vllm("--max-model-len", "32768")}
	auto.VLLM.KVCache = fleetapi.KVCacheAuto
	if fe := ValidateRecipe(auto); fe != nil {
		t.Errorf("kv_cache: auto refused: %v", fe)
	}
	for field, r := range bad {
		field, _, _ = strings.Cut(field, " ")
		fe := ValidateRecipe(r)
		if _, ok := fe[field]; !ok {
			t.Errorf("%s: got %v", field, fe)
		}
	}
}

func TestSourceIP(t *testing.T) {
	trusted := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
	cases := []struct {
		cfg    HandlerConfig
		remote string
		xff    string
		want   string
	}{
		// No header configured: the peer, whatever the box claims.
		{HandlerConfig{}, "192.0.2.7:5555", "203.0.113.9", "192.0.2.7"},
		// Configured, but the peer is not a trusted proxy: the peer.
		{HandlerConfig{ProxyHeader: "X-Forwarded-For", TrustedProxies: trusted}, "192.0.2.7:5555", "203.0.113.9", "192.0.2.7"},
		// From a trusted proxy: the rightmost untrusted hop.
		{HandlerConfig{ProxyHeader: "X-Forwarded-For", TrustedProxies: trusted}, "10.1.1.1:5555", "198.51.100.1, 203.0.113.9, 10.2.2.2", "203.0.113.9"},
		// Only trusted hops (or no header) from a trusted proxy: unknown.
		{HandlerConfig{ProxyHeader: "X-Forwarded-For", TrustedProxies: trusted}, "10.1.1.1:5555", "10.2.2.2", ""},
		{HandlerConfig{ProxyHeader: "X-Forwarded-For", TrustedProxies: trusted}, "10.1.1.1:5555", "", ""},
		// IPv4-mapped peers are unmapped so they match stored IPv4 hosts.
		{HandlerConfig{}, "[::ffff:192.0.2.7]:5555", "", "192.0.2.7"},
		{HandlerConfig{}, "[2001:db8::1]:5555", "", "2001:db8::1"},
	}
	for i, c := range cases {
		h := NewHandler(nil, c.cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
		r := httptest.NewRequest("GET", "/vllm/config", nil)
		r.RemoteAddr = c.remote
		if c.xff != "" {
			r.Header.Set("X-Forwarded-For", c.xff)
		}
		got, ok := h.SourceIP(r)
		if c.want == "" {
			if ok {
				t.Errorf("case %d: %v, want refusal", i, got)
			}
			continue
		}
		if !ok || got.String() != c.want {
			t.Errorf("case %d: %v %v, want %s", i, got, ok, c.want)
		}
	}
}

// box is a fake vLLM whose health a test flips.
type box struct {
	srv             *httptest.Server
	health, listing atomic.Bool
}

func newBox(t *testing.T, model string) *box {
	b := &box{}
	b.listing.Store(true)
	b.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/health":
			if !b.health.Load() {
				w.WriteHeader(503)
			}
		case "/v1/models":
			if r.Header.Get("Authorization") != "Bearer rh-k_secret" {
				w.WriteHeader(401)
				return
			}
			id := model
			if !b.listing.Load() {
				id = "something-else"
			}
			fmt.Fprintf(w, `{"data":[{"id":%q}]}`, id)
		}
	}))
	t.Cleanup(b.srv.Close)
	return b
}

// TestControllerTransitions drives Sweep by hand on both stores: booting →
// no registration; healthy → registered; a wrong model listed → not
// serving; failures under the threshold keep it; at the threshold it is
// deregistered, never retired; a restarted controller re-asserts.
func TestControllerTransitions(t *testing.T) {
	storetest.Each(t, func(t *testing.T, d string) {
		ctx := context.Background()
		st := storetest.Open(t, d, nil)
		org, pj, b, h := boxHost(t, st, vllm("--max-model-len", "32768"))
		var changes atomic.Int64
		log := slog.New(slog.NewTextHandler(io.Discard, nil))
		c := NewController(st, ControllerConfig{FailAfter: 3}, log, func(context.Context) { changes.Add(1) })
		state := func() string {
			x, err := st.GetHost(ctx, org.ID, h.ID)
			must(t, err)
			return x.State
		}
		targets := func() int {
			r, err := st.GetRoute(ctx, pj.ID, "qwen3")
			if err != nil {
				return -1 // no route
			}
			return len(r.Targets)
		}

		c.Sweep(ctx)
		if state() != store.HostPending || targets() != -1 || changes.Load() != 0 {
			t.Fatalf("booting: %s, %d targets, %d changes", state(), targets(), changes.Load())
		}
		b.health.Store(true)
		b.listing.Store(false) // /health OK but the recipe's model is not served
		c.Sweep(ctx)
		if state() != store.HostPending {
			t.Fatalf("wrong model served: %s", state())
		}
		b.listing.Store(true)
		c.Sweep(ctx)
		if state() != store.HostServing || targets() != 1 || changes.Load() != 1 {
			t.Fatalf("healthy: %s, %d targets, %d changes", state(), targets(), changes.Load())
		}
		c.Sweep(ctx) // steady: no write
		if changes.Load() != 1 {
			t.Fatalf("a steady sweep wrote: %d", changes.Load())
		}
		b.health.Store(false)
		c.Sweep(ctx)
		c.Sweep(ctx)
		if state() != store.HostServing || targets() != 1 {
			t.Fatalf("under the threshold: %s, %d targets", state(), targets())
		}
		if _, fail, lastErr, _ := c.Health(h.ID); fail != 2 || !strings.Contains(lastErr, "/health") {
			t.Fatalf("health view: %d %q", fail, lastErr)
		}
		c.Sweep(ctx)
		if state() != store.HostDown || targets() != 0 {
			t.Fatalf("at the threshold: %s, %d targets", state(), targets())
		}
		for i := 0; i < 5; i++ { // down for long: never retired
			c.Sweep(ctx)
		}
		if state() != store.HostDown {
			t.Fatalf("long down: %s", state())
		}
		b.health.Store(true)
		c.Sweep(ctx)
		if state() != store.HostServing || targets() != 1 {
			t.Fatalf("recovered: %s, %d targets", state(), targets())
		}
		// A new controller (a restart) re-asserts the registration
		// once, then stays quiet.
		c2 := NewController(st, ControllerConfig{FailAfter: 3}, log, func(context.Context) { changes.Add(1) })
		before := changes.Load()
		c2.Sweep(ctx)
		c2.Sweep(ctx)
		if changes.Load() != before+1 || targets() != 1 {
			t.Fatalf("restart: %d changes, %d targets", changes.Load()-before, targets())
		}
	})
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

type switchLease struct{ held atomic.Bool }

func (l *switchLease) Held(context.Context) bool { return l.held.Load() }
func (l *switchLease) Release()                  {}

// TestControllerOnlyWithLease: a replica without the lease writes nothing;
// once it holds the lease it registers.
func TestControllerOnlyWithLease(t *testing.T) {
	ctx := context.Background()
	st := storetest.Open(t, "sqlite", nil)
	org, _, b, h := boxHost(t, st, vllm())
	b.health.Store(true)
	lease := &switchLease{}
	c := NewController(st, ControllerConfig{Lease: lease}, slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
	c.Sweep(ctx)
	if x, _ := st.GetHost(ctx, org.ID, h.ID); x.State != store.HostPending {
		t.Fatalf("a replica without the lease registered: %s", x.State)
	}
	lease.held.Store(true)
	c.Sweep(ctx)
	if x, _ := st.GetHost(ctx, org.ID, h.ID); x.State != store.HostServing {
		t.Fatalf("the lease holder did not register: %s", x.State)
	}
}

// TestControllerFollowsTheAppliedAssignment: a recipe change the box has
// not applied does not change routing (not the probed model, not the
// context limit); once the box reports it, routing follows.
func TestControllerFollowsTheAppliedAssignment(t *testing.T) {
	ctx := context.Background()
	st := storetest.Open(t, "sqlite", nil)
	org, pj, b, h := boxHost(t, st, vllm("--max-model-len", "8192"))
	b.health.Store(true)
	// The box reports the current revision: it is recorded as applied.
	rev := Revision(h)
	must(t, st.RecordHostReports(ctx, []store.HostReportEntry{{HostID: h.ID, Applied: rev,
		Current: &store.AppliedAssignment{Revision: rev, Port: h.Port, Recipe: h.Recipe}}}, time.Now()))
	c := NewController(st, ControllerConfig{FailAfter: 2}, slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
	c.Sweep(ctx)
	contextOf := func() int {
		x, err := st.GetHost(ctx, org.ID, h.ID)
		must(t, err)
		p, err := st.GetProvider(ctx, org.ID, x.ProviderSlug)
		must(t, err)
		return p.ContextLimit
	}
	if contextOf() != 8192 {
		t.Fatalf("registered context %d", contextOf())
	}
	// The operator changes the model and the context without applying.
	x, _ := st.GetHost(ctx, org.ID, h.ID)
	x.Recipe = fleetapi.Recipe{VLLM: &fleetapi.VLLM{Model: "Qwen/Qwen3-8B-FP8", Source: fleetapi.Source{Kind: "hf"}, VRAMGB: 8, DiskGB: 9, Args: []string{"--max-model-len", "32768"}}}
	must(t, st.UpdateHost(ctx, x, nil))
	for i := 0; i < 3; i++ {
		c.Sweep(ctx)
	}
	if y, _ := st.GetHost(ctx, org.ID, h.ID); y.State != store.HostServing || contextOf() != 8192 {
		t.Fatalf("before apply: state %s, context %d (want serving, 8192)", y.State, contextOf())
	}
	// The box applies it (now serving the FP8 model) and reports.
	b.srv.Close()
	b2 := newBox(t, "Qwen/Qwen3-8B-FP8")
	b2.health.Store(true)
	u2, _ := url.Parse(b2.srv.URL)
	port2, _ := strconv.Atoi(u2.Port())
	x.Port = port2
	must(t, st.UpdateHost(ctx, x, nil))
	x, _ = st.GetHost(ctx, org.ID, h.ID)
	rev2 := Revision(x)
	must(t, st.RecordHostReports(ctx, []store.HostReportEntry{{HostID: h.ID, Applied: rev2,
		Current: &store.AppliedAssignment{Revision: rev2, Port: port2, Recipe: x.Recipe}}}, time.Now()))
	c.Sweep(ctx)
	if y, _ := st.GetHost(ctx, org.ID, h.ID); y.State != store.HostServing || contextOf() != 32768 {
		t.Fatalf("after apply: state %s, context %d (want serving, 32768)", y.State, contextOf())
	}
	r, err := st.GetRoute(ctx, pj.ID, "qwen3")
	must(t, err)
	if len(r.Targets) != 1 || r.Targets[0].UpstreamModel != "Qwen/Qwen3-8B-FP8" {
		t.Fatalf("targets after apply: %+v", r.Targets)
	}
}

// boxHost makes org and project "default", a box serving Qwen/Qwen3-8B
// (not yet healthy) and a host for it, model name "qwen3", whose recipe
// runs v.
func boxHost(t *testing.T, st *sqlstore.DB, v *fleetapi.VLLM) (*store.Org, *store.Project, *box, *store.Host) {
	t.Helper()
	ctx := context.Background()
	org := &store.Org{Name: "default"}
	must(t, st.CreateOrg(ctx, org))
	pj := &store.Project{OrgID: org.ID, Name: "default"}
	must(t, st.CreateProject(ctx, pj))
	b := newBox(t, "Qwen/Qwen3-8B")
	u, _ := url.Parse(b.srv.URL)
	port, _ := strconv.Atoi(u.Port())
	h := &store.Host{OrgID: org.ID, ProjectID: pj.ID, IP: "127.0.0.1", Port: port, ModelName: "qwen3",
		APIKey: secret.New("rh-k_secret"), Recipe: fleetapi.Recipe{VLLM: v}}
	must(t, st.CreateHost(ctx, h, nil))
	return org, pj, b, h
}
