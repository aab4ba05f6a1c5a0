package ui

import (
	"context"
	"encoding/json"
	"math"
	"math/rand/v2"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/rolter/rolter/internal/admin"
	"github.com/rolter/rolter/internal/fleetapi"
	"github.com/rolter/rolter/internal/money"
	"github.com/rolter/rolter/internal/readiness"
	"github.com/rolter/rolter/internal/secret"
	"github.com/rolter/rolter/internal/store"
)

// The screenshots in docs/ui.md come from TestDocsScreenshots, which runs
// only with ROLTER_UI_DOCS set to the directory to write them to:
//
//	ROLTER_UI_DOCS=$PWD/docs/ui go test ./internal/ui -run TestDocsScreenshots -count=1
//
// It seeds a server like `rolter serve --demo` plus a few providers,
// routes, a group, keys, hosts and a day of usage, then takes one PNG per
// page at a 1280x800 viewport. A page that is still a "coming"
// placeholder is logged and not written. Each PNG must stay under
// docsMaxPNG.

const docsMaxPNG = 200 << 10

// docsReadiness is the readiness the docs server shows: probe results as
// the readiness package would report them for a healthy fleet with one
// provider down.
type docsReadiness map[int64]readiness.Status

func (d docsReadiness) Status(id int64) (readiness.Status, bool) {
	st, ok := d[id]
	return st, ok
}

func TestDocsScreenshots(t *testing.T) {
	dir := os.Getenv("ROLTER_UI_DOCS")
	if dir == "" {
		t.Skip("set ROLTER_UI_DOCS=DIR to write docs/ui.md's screenshots into DIR")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, Options{})
	seedDocs(t, h)
	tb := newTab(t, h)
	tb.do("viewport", chromedp.EmulateViewport(1280, 800))
	shoot := func(name string) {
		t.Helper()
		png, err := chromedp.Run(tb.ctx, chromedp.CaptureScreenshot())
		if err != nil {
			t.Fatalf("screenshot %s: %v", name, err)
		}
		if len(png) > docsMaxPNG {
			t.Errorf("screenshot %s is %d bytes, over %d", name, len(png), docsMaxPNG)
		}
		path := filepath.Join(dir, name+".png")
		if err := os.WriteFile(path, png, 0o644); err != nil { //nolint:gosec // G306: docs images, meant to be read
			t.Fatal(err)
		}
		t.Logf("%s: %s (%d bytes)", name, path, len(png))
	}
	tb.do("login page", chromedp.Navigate(h.srv.URL+"/ui/login"), chromedp.WaitVisible(chromedp.CSS("#token")))
	shoot("login")
	tb.do("type the token", chromedp.SendKeys(chromedp.CSS("#token"), h.token))
	tb.navigate("log in", "/ui/models", chromedp.Submit(chromedp.CSS("#token")), chromedp.WaitVisible(chromedp.CSS("#models-table")))
	var missing []string
	for _, p := range nav {
		tb.do(p.Name, chromedp.Navigate(h.srv.URL+link(p.Name, "org", "default")), chromedp.WaitVisible(chromedp.CSS("#content h1")))
		coming, err := chromedp.Run(tb.ctx, chromedp.Evaluate[bool](`document.querySelector('#content .placeholder') !== null`))
		if err != nil {
			t.Fatal(err)
		}
		if coming {
			missing = append(missing, p.Name)
			continue
		}
		shoot(p.Name)
	}
	if len(missing) > 0 {
		t.Logf("pages not built yet, no screenshot: %v", missing)
	}
	tb.clean()
}

// seedDocs fills the harness like a small deployment: the demo provider
// and route, two vLLM servers and a cloud API, routes over them, a group,
// keys in two projects, four hosts and a fleet key, an admin token for CI,
// and a day of usage.
func seedDocs(t *testing.T, h *harness) {
	t.Helper()
	ctx := context.Background()
	must := func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	demoLike(t, h)
	must(h.svc.CreateProject(ctx, "default", admin.ProjectInput{Name: "batch"}))
	providers := []admin.ProviderInput{
		{Name: "vLLM St Petersburg", Slug: "vllm-spb", Kind: "vllm", BaseURL: "http://10.0.3.7:8000/v1", MetadataSource: store.MetadataUpstream},
		{Name: "vLLM Moscow", Slug: "vllm-msk", Kind: "vllm", BaseURL: "http://10.0.4.12:8000/v1", MetadataSource: store.MetadataUpstream},
		{Name: "Cloud API", Slug: "cloud", Kind: "openai", BaseURL: "https://api.example.com/v1",
			Models: []string{"gpt-4o-mini", "text-embedding-3-small"}, ContextLimit: 128000, Keys: []admin.KeyInput{
				{Secret: secret.New("sk-docs-not-a-real-key-1"), Weight: ptr(2)}, {Secret: secret.New("sk-docs-not-a-real-key-2")}}},
	}
	for _, in := range providers {
		must(h.svc.CreateProvider(ctx, "default", in))
	}
	must(h.svc.CreateGroup(ctx, "default", admin.GroupInput{Name: "qwen-pool", Members: []admin.GroupMemberInput{
		{Provider: "vllm-spb", Weight: ptr(3)}, {Provider: "vllm-msk", Weight: ptr(1)}}}))
	must(h.svc.CreateGroup(ctx, "default", admin.GroupInput{Name: "qwen-small", Members: []admin.GroupMemberInput{
		{Provider: "vllm-spb", ModelMap: map[string]string{"qwen3": "Qwen/Qwen3-8B"}}}}))
	must(h.svc.CreateRoute(ctx, "default", "default", admin.RouteInput{Model: "chat", Targets: []admin.TargetInput{
		{Provider: "vllm-spb", UpstreamModel: "Qwen/Qwen3-8B", Weight: ptr(3)}, {Provider: "vllm-msk", UpstreamModel: "Qwen/Qwen3-8B", Weight: ptr(1)}},
		Policy: store.Policy{MaxOutputTokens: 4096}}))
	must(h.svc.CreateRoute(ctx, "default", "default", admin.RouteInput{Model: "embed",
		Targets: []admin.TargetInput{{Provider: "cloud", UpstreamModel: "text-embedding-3-small"}}}))
	must(h.svc.CreateRoute(ctx, "default", "default", admin.RouteInput{Model: "summarize",
		Targets: []admin.TargetInput{{Provider: "cloud", UpstreamModel: "gpt-4o-mini"}}, Policy: store.Policy{Tools: "deny"}}))
	keys := map[string]int64{}
	for _, k := range []struct {
		project, name string
		models        []string
	}{{"default", "web-app", []string{"chat", "embed"}}, {"default", "alice", nil}, {"batch", "nightly-jobs", []string{"embed"}},
		{"default", "old-laptop", nil}} {
		v, err := h.svc.CreateVirtualKey(ctx, "default", k.project, admin.VirtualKeyInput{Name: k.name, Models: k.models, RPMLimit: 600})
		if err != nil {
			t.Fatal(err)
		}
		keys[k.name] = v.ID
	}
	must(h.svc.RevokeVirtualKey(ctx, "default", "default", itoa64(keys["old-laptop"])))
	docsFleet(t, h)
	must(h.svc.CreateAdminToken(ctx, admin.AdminTokenInput{Name: "ci deploys", Scope: json.RawMessage(`{"org":"default"}`)}))
	docsReady(t, h)
	seedDocsUsage(t, h, keys)
}

func ptr[T any](v T) *T { return &v }

// docsFleet registers four hosts: two on a box that fetched and runs its
// assignments (the box's agent through the real fleet endpoints, as in
// fleet_test.go), one of them since given a new recipe that waits for
// Apply; and two quiet boxes, last seen two and ten days ago.
func docsFleet(t *testing.T, h *harness) {
	t.Helper()
	ctx := context.Background()
	k, err := h.svc.CreateFleetKey(ctx, "default", admin.FleetKeyInput{Name: "rack-2"})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(fleetEndpoints(h))
	t.Cleanup(srv.Close)
	bx := &box{t: t, srv: srv, key: k.Secret}
	host := func(ip string, port int, model, notes string, rc fleetapi.Recipe) admin.HostView {
		t.Helper()
		v, err := h.svc.CreateHost(ctx, "default", admin.HostInput{IP: ip, Port: port, ModelName: model, Recipe: rc, Notes: notes})
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	qwen := host("127.0.0.1", 8000, "qwen3", "rack 2, slot 1", testRecipe("32768"))
	host("127.0.0.1", 8001, "llama3", "rack 2, slot 2", testRecipe("8192"))
	quiet := host("10.0.0.6", 8000, "llama3", "borrowed from the batch cluster", testRecipe("8192"))
	gone := host("10.0.0.7", 8000, "llama3", "powered off for maintenance", testRecipe("8192"))
	bx.startAll()
	if err := h.db.TouchHosts(ctx, []int64{quiet.ID}, time.Now().Add(-50*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := h.db.TouchHosts(ctx, []int64{gone.ID}, time.Now().Add(-10*24*time.Hour)); err != nil {
		t.Fatal(err)
	}
	rc := testRecipe("32768", "--gpu-memory-utilization", "0.85")
	if _, err := h.svc.PatchHost(ctx, "default", itoa64(qwen.ID), admin.HostPatch{Recipe: &rc}); err != nil {
		t.Fatal(err)
	}
}

// docsReady gives every provider a recent probe result: ready, with the
// discovered model for the vLLM servers, except vllm-msk, which is down.
func docsReady(t *testing.T, h *harness) {
	t.Helper()
	ctx := context.Background()
	org, err := h.db.GetOrg(ctx, "default")
	if err != nil {
		t.Fatal(err)
	}
	ps, err := h.db.ListProviders(ctx, org.ID, store.Page{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	probe := h.clock.Now().Add(-40 * time.Second)
	rd := docsReadiness{}
	for _, p := range ps {
		st := readiness.Status{Ready: true, LastProbe: probe}
		switch {
		case p.Slug == "vllm-msk":
			st = readiness.Status{Reason: "health probe failed: GET /health: connection refused", Class: readiness.ClassHealthFailed,
				LastProbe: probe, LastError: "connection refused"}
		case p.MetadataSource == store.MetadataUpstream:
			st.Facts = readiness.Facts{ModelID: "Qwen/Qwen3-8B", Context: 40960, Modalities: []string{"text"}}
		}
		rd[p.ID] = st
	}
	h.svc.SetReadiness(rd)
}

// seedDocsUsage stores a day of traffic ending at the harness clock's now,
// as the gateway's accounting would: chat busy in the day and quiet at
// night, embed and summarize steadier, a few calls pinned to a provider,
// and an hour when vllm-msk failed.
func seedDocsUsage(t *testing.T, h *harness, keys map[string]int64) {
	t.Helper()
	ctx := context.Background()
	org, err := h.db.GetOrg(ctx, "default")
	if err != nil {
		t.Fatal(err)
	}
	def, err := h.db.GetProject(ctx, org.ID, "default")
	if err != nil {
		t.Fatal(err)
	}
	batch, err := h.db.GetProject(ctx, org.ID, "batch")
	if err != nil {
		t.Fatal(err)
	}
	rnd := rand.New(rand.NewPCG(16, 7)) //nolint:gosec // G404: a fixed seed, so the screenshots are reproducible
	type traffic struct {
		route, address, provider, model, key string
		project                              int64
		perHour, latency                     float64 // mean requests, median ms
		prompt, completion                   int
		price                                money.Amount // per request; 0: unpriced
	}
	streams := []traffic{
		{"chat", "chat", "vllm-spb", "Qwen/Qwen3-8B", "web-app", def.ID, 30, 900, 600, 250, 0},
		{"chat", "chat", "vllm-msk", "Qwen/Qwen3-8B", "web-app", def.ID, 10, 1100, 600, 250, 0},
		{"embed", "embed", "cloud", "text-embedding-3-small", "nightly-jobs", batch.ID, 18, 120, 400, 0, 8_000},
		{"summarize", "summarize", "cloud", "gpt-4o-mini", "alice", def.ID, 6, 2400, 3000, 300, 650_000},
		{"demo", "demo", "demo", "demo-model", "alice", def.ID, 2, 60, 20, 12, 0},
		{"", "vllm-spb/Qwen/Qwen3-8B", "vllm-spb", "Qwen/Qwen3-8B", "alice", def.ID, 3, 800, 900, 200, 0},
	}
	now := h.clock.Now()
	var recs []store.UsageRecord
	for hour := 24; hour >= 0; hour-- {
		start := now.Add(-time.Duration(hour) * time.Hour).Truncate(time.Hour)
		// Busy in the working day (UTC+3), quiet at night.
		local := (start.Hour() + 3) % 24
		load := 0.35 + 0.65*math.Max(0, math.Sin(float64(local-7)*math.Pi/14))
		for _, s := range streams {
			n := int(s.perHour*load + rnd.Float64()*3)
			if s.route != "chat" {
				n = int(s.perHour*(0.7+0.3*load) + rnd.Float64()*2)
			}
			for range n {
				at := start.Add(time.Duration(rnd.IntN(3600)) * time.Second)
				if !at.Before(now) {
					continue
				}
				ms := s.latency * math.Exp(rnd.NormFloat64()*0.35)
				status, class := 200, ""
				switch {
				case s.provider == "vllm-msk" && hour == 5:
					status, class, ms = 503, "server_error", 40
				case rnd.IntN(200) == 0:
					status, class = 429, "rate_limited"
				}
				r := store.UsageRecord{CreatedAt: at, OrgID: org.ID, ProjectID: s.project, KeyID: keys[s.key],
					AddressKind: "route", Address: s.address, Route: s.route, ProviderID: 1, ProviderSlug: s.provider,
					UpstreamModel: s.model, Status: status, Class: class, Attempts: 1, Latency: time.Duration(ms) * time.Millisecond}
				if s.route == "" {
					r.AddressKind = "provider"
				}
				if status == 200 {
					r.PromptTokens = s.prompt/2 + rnd.IntN(s.prompt+1)
					r.CompletionTokens = s.completion/2 + rnd.IntN(s.completion+1)
					if s.price > 0 {
						c := s.price
						r.Cost = &c
					}
				}
				recs = append(recs, r)
			}
		}
	}
	if err := h.db.InsertUsage(ctx, recs); err != nil {
		t.Fatal(err)
	}
}
