package ui

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/rolter/rolter/internal/admin"
	"github.com/rolter/rolter/internal/store"
)

// addressesOn lists the addresses of a Models page in order.
var addrRe = regexp.MustCompile(`<td><span class="addr">([^<]*)`)

func addressesOn(body string) []string {
	var out []string
	for _, m := range addrRe.FindAllStringSubmatch(body, -1) {
		out = append(out, m[1])
	}
	return out
}

func TestModelsListsEveryAddressGroupedByWhatServesIt(t *testing.T) {
	h := newHarness(t, Options{})
	ctx := context.Background()
	mustDo := func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	mustDo(h.svc.CreateProvider(ctx, "default", admin.ProviderInput{Name: "alpha", Kind: "vllm", BaseURL: "http://10.0.0.5/v1",
		Models: []string{"m1", "m2"}, ContextLimit: 8192, Policy: store.Policy{Tools: "deny"}}))
	mustDo(h.svc.CreateProvider(ctx, "default", admin.ProviderInput{Name: "beta", Kind: "openai", BaseURL: "https://api.example.com/v1"}))
	mustDo(h.svc.CreateGroup(ctx, "default", admin.GroupInput{Name: "pool", Members: []admin.GroupMemberInput{
		{Provider: "alpha", ModelMap: map[string]string{"alias": "m1"}}}}))
	mustDo(h.svc.CreateRoute(ctx, "default", "default", admin.RouteInput{Model: "chat", Targets: []admin.TargetInput{{Provider: "alpha", UpstreamModel: "m1"}},
		Policy: store.Policy{MaxOutputTokens: 512}}))
	// A route named like a provider address shadows it: listed once.
	mustDo(h.svc.CreateRoute(ctx, "default", "default", admin.RouteInput{Model: "alpha/m2", Targets: []admin.TargetInput{{Provider: "alpha", UpstreamModel: "m2"}}}))
	// Another project's route adds to the provider's catalog, not to this
	// project's routes.
	mustDo(h.svc.CreateProject(ctx, "default", admin.ProjectInput{Name: "other"}))
	mustDo(h.svc.CreateRoute(ctx, "default", "other", admin.RouteInput{Model: "x", Targets: []admin.TargetInput{{Provider: "alpha", UpstreamModel: "m3"}}}))
	b := h.browser()
	b.login(h.token)
	r := b.get("/ui/models")
	if r.status != http.StatusOK {
		t.Fatalf("models: %d", r.status)
	}
	got := strings.Join(addressesOn(r.body), " ")
	want := "alpha/m2 chat alpha/m1 alpha/m3 beta/ pool/alias pool/m1 pool/m2 pool/m3"
	if got != want {
		t.Fatalf("addresses\n got %s\nwant %s", got, want)
	}
	mustContain(t, "models", r.body, "Models <span class=\"count\">(9)</span>", "routes of project default",
		`<span class="tag">provider</span> <span class="addr">alpha</span>`, `<span class="tag">group</span> <span class="addr">pool</span>`,
		`data-copy="alpha/m1"`, "&lt;any model&gt;", "no probe result yet", "max output 512", "no tools", `<option value="other">`)
	// The project selector: the other project's routes.
	r = b.get("/ui/models?org=default&project=other")
	// alpha/m2 is a route only in project default: here it is the provider's.
	if got := strings.Join(addressesOn(r.body), " "); got != "x alpha/m1 alpha/m2 alpha/m3 beta/ pool/alias pool/m1 pool/m2 pool/m3" {
		t.Fatalf("project other: %v", got)
	}
}

func TestModelsSearchAndPaginationKeepTheFilters(t *testing.T) {
	h := newHarness(t, Options{})
	ctx := context.Background()
	if _, err := h.svc.CreateProvider(ctx, "default", admin.ProviderInput{Name: "p", Kind: "vllm", BaseURL: "http://10.0.0.5/v1", Models: []string{"m"}}); err != nil {
		t.Fatal(err)
	}
	for i := range 250 {
		if _, err := h.svc.CreateRoute(ctx, "default", "default", admin.RouteInput{Model: fmt.Sprintf("route-%03d", i),
			Targets: []admin.TargetInput{{Provider: "p", UpstreamModel: "m"}}}); err != nil {
			t.Fatal(err)
		}
	}
	b := h.browser()
	b.login(h.token)
	r := b.get("/ui/models")
	mustContain(t, "page 1", r.body, "1–100 of 251", `href="/ui/models?org=default&amp;page=2&amp;project=default" rel="next"`)
	if n := len(addressesOn(r.body)); n != 100 {
		t.Fatalf("page 1 shows %d rows", n)
	}
	r = b.get("/ui/models?org=default&project=default&page=3")
	mustContain(t, "page 3", r.body, "201–251 of 251", `rel="prev"`)
	mustNotContain(t, "page 3", r.body, `rel="next"`)
	// Search is server-side, deep-linkable, and the pager keeps it.
	r = b.get("/ui/models?org=default&project=default&q=ROUTE-1")
	mustContain(t, "search", r.body, "100 of 251 addresses match", `value="ROUTE-1"`)
	if n := len(addressesOn(r.body)); n != 100 {
		t.Fatalf("search shows %d rows", n)
	}
	r = b.get("/ui/models?org=default&project=default&q=route-24")
	if got := strings.Join(addressesOn(r.body), " "); got != "route-240 route-241 route-242 route-243 route-244 route-245 route-246 route-247 route-248 route-249" {
		t.Fatalf("q=route-24: %s", got)
	}
	mustNotContain(t, "one page", r.body, `rel="next"`)
	// htmx asks for the table alone.
	req, _ := http.NewRequest(http.MethodGet, h.srv.URL+"/ui/models?org=default&project=default&q=p/", nil)
	req.Header.Set("HX-Request", "true")
	req.Header.Set("HX-Target", "models-table")
	r = b.do(req)
	if strings.Contains(r.body, "<html") || !strings.HasPrefix(strings.TrimSpace(r.body), `<div id="models-table">`) {
		t.Fatalf("htmx search answered more than the table: %.200s", r.body)
	}
	if got := addressesOn(r.body); len(got) != 1 || got[0] != "p/m" {
		t.Fatalf("q=p/: %v", got)
	}
}

func ready(ctx int, mods ...string) *admin.ReadinessView {
	return &admin.ReadinessView{State: "ready", Context: ctx, Modalities: mods}
}

func TestAddressReadinessContextAndPolicy(t *testing.T) {
	yes, no := true, false
	live := map[string]*admin.ProviderView{
		"big":   {Slug: "big", MetadataSource: store.MetadataConfigured, Models: []string{"m"}, ContextLimit: 32768, Readiness: ready(0, "text", "image"), Policy: store.Policy{MaxOutputTokens: 100}},
		"small": {Slug: "small", MetadataSource: store.MetadataConfigured, Models: []string{"m"}, ContextLimit: 4096, Readiness: ready(0, "text"), Policy: store.Policy{Media: "deny"}},
		"down":  {Slug: "down", MetadataSource: store.MetadataConfigured, Models: []string{"m"}, Readiness: &admin.ReadinessView{State: "not_ready", Reason: "health probe failed"}},
		"disc":  {Slug: "disc", MetadataSource: store.MetadataUpstream, Readiness: &admin.ReadinessView{State: "ready", ModelID: "Qwen/Qwen3-8B", Context: 40960, StaleModels: map[string]string{}}},
		"stale": {Slug: "stale", MetadataSource: store.MetadataConfigured, Models: []string{"old", "new"}, Readiness: &admin.ReadinessView{State: "ready", StaleModels: map[string]string{"old": "upstream answered 404"}}},
	}
	t.Run("route", func(t *testing.T) {
		rt := admin.RouteView{Model: "chat", Targets: []admin.TargetView{
			{Provider: "big", Weight: 1, Routable: &yes}, {Provider: "small", Weight: 1, Routable: &yes},
			{Provider: "down", Weight: 1, Routable: &no, Reason: "provider not ready: health probe failed"}}}
		a := routeAddress(rt, live, "default")
		if a.State != "ready" || a.Context != 4096 || strings.Join(a.Modalities, ",") != "image,text" ||
			a.Policy.MaxOutputTokens != 100 || a.Policy.Media != "deny" {
			t.Fatalf("route over two ready targets: %+v", a)
		}
		rt.Targets = rt.Targets[2:]
		if a := routeAddress(rt, live, "default"); a.State != "not ready" || a.Reason != "down: provider not ready: health probe failed" {
			t.Fatalf("route without a routable target: %+v", a)
		}
		rt.Targets = []admin.TargetView{{Provider: "big", Weight: 1, ContextLimit: 2048, Routable: &yes}}
		if a := routeAddress(rt, live, "default"); a.Context != 2048 {
			t.Fatalf("a target's own context limit: %+v", a)
		}
		rt.Targets = []admin.TargetView{{Provider: "gone", Weight: 1}}
		if a := routeAddress(rt, live, "default"); a.State != "not ready" || a.Reason != "gone: deleted" {
			t.Fatalf("target on a deleted provider: %+v", a)
		}
	})
	t.Run("provider", func(t *testing.T) {
		as := providerAddresses(live["disc"], nil)
		if len(as) != 1 || as[0].Address != "disc/Qwen/Qwen3-8B" || as[0].Context != 40960 || as[0].State != "ready" {
			t.Fatalf("discovered: %+v", as)
		}
		as = providerAddresses(live["stale"], map[string]bool{"routed": true})
		var rows []string
		for _, a := range as {
			rows = append(rows, a.Address+":"+a.State+":"+a.Reason)
		}
		if got := strings.Join(rows, " | "); got != "stale/new:ready: | stale/old:not ready:stale: upstream answered 404 | stale/routed:ready:" {
			t.Fatalf("stale model: %s", got)
		}
		if as := providerAddresses(live["down"], nil); as[0].State != "not ready" || as[0].Reason != "health probe failed" {
			t.Fatalf("down: %+v", as)
		}
		if as := providerAddresses(&admin.ProviderView{Slug: "new", MetadataSource: store.MetadataUpstream}, nil); len(as) != 1 || !as[0].Any ||
			as[0].State != "unknown" {
			t.Fatalf("undiscovered upstream: %+v", as)
		}
	})
	t.Run("group", func(t *testing.T) {
		g := admin.GroupView{Slug: "g", Policy: store.Policy{Tools: "deny"}, Members: []admin.GroupMemberView{
			{Provider: "big"}, {Provider: "small"}, {Provider: "down", ModelMap: map[string]string{"only-down": "m"}}}}
		as := groupAddresses(g, live, nil)
		byAddr := map[string]address{}
		for _, a := range as {
			byAddr[a.Address] = a
		}
		m := byAddr["g/m"]
		if m.State != "ready" || m.Context != 4096 || m.Policy.Tools != "deny" || m.Policy.MaxOutputTokens != 100 || m.Policy.Media != "deny" {
			t.Fatalf("g/m: %+v", m)
		}
		if d := byAddr["g/only-down"]; d.State != "not ready" || d.Reason != "down: health probe failed" {
			t.Fatalf("g/only-down: %+v", d)
		}
	})
}
