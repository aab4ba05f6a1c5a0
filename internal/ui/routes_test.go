package ui

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/rolter/rolter/internal/admin"
	"github.com/rolter/rolter/internal/readiness"
	"github.com/rolter/rolter/internal/store"
	"github.com/rolter/rolter/internal/testkit"
)

// routeFields is the route editor's form: base fields, then targets as
// rows of provider, model, weight (the other columns empty).
func routeFields(model string, rows ...[3]string) url.Values {
	f := url.Values{"org": {"default"}, "project": {"default"}, "model": {model}, "strategy": {"weighted"}}
	for _, r := range rows {
		f.Add("target_provider", r[0])
		f.Add("target_model", r[1])
		f.Add("target_weight", r[2])
		for _, col := range []string{"target_context", "target_input_price", "target_output_price"} {
			f.Add(col, "")
		}
	}
	return f
}

func mustProvider(t *testing.T, h *harness, in admin.ProviderInput) admin.ProviderView {
	t.Helper()
	if in.Kind == "" {
		in.Kind = "vllm"
	}
	if in.BaseURL == "" {
		in.BaseURL = "http://10.0.0.5/v1"
	}
	p, err := h.svc.CreateProvider(context.Background(), "default", in)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// routeNames are the route names a list page shows, in order.
var routeNameRe = regexp.MustCompile(`<a class="addr" href="/ui/routes/_edit\?[^"]*">([^<]*)</a>`)

func routeNames(body string) []string {
	var out []string
	for _, m := range routeNameRe.FindAllStringSubmatch(body, -1) {
		out = append(out, m[1])
	}
	return out
}

func TestRouteCreateEditRenameAndDelete(t *testing.T) {
	h := newHarness(t, Options{})
	mustProvider(t, h, admin.ProviderInput{Name: "alpha", Models: []string{"m1", "m2"}})
	mustProvider(t, h, admin.ProviderInput{Name: "beta"})
	ctx := context.Background()
	b := h.browser()
	b.login(h.token)

	r := b.get("/ui/routes/_new?org=default&project=default")
	mustContain(t, "new", r.body, "Add route", `<option value="alpha">alpha</option>`, `<option value="_new">+ New provider…</option>`,
		`id="provider-dialog"`, `id="provider-dialog-form"`, `name="base_url"`, `id="slug-check"`)

	form := routeFields("chat", [3]string{"alpha", "m1", "3"}, [3]string{"", "", "1"}, [3]string{"beta", "", "1"})
	form.Set("policy.max_output_tokens", "512")
	form.Set("policy.tools", "deny")
	form.Set("rpm_limit", "60")
	form.Set("target_input_price", "0.5") // the first row's
	form["target_output_price"][0] = "1.25"
	r = b.postCSRF("/ui/routes/_new", form)
	if r.status != http.StatusSeeOther || r.header.Get("Location") != "/ui/routes?done=created&model=chat&org=default&project=default&q=chat" {
		t.Fatalf("create: %d %q %s", r.status, r.header.Get("Location"), r.body)
	}
	rt, err := h.svc.GetRoute(ctx, "default", "default", "chat")
	if err != nil {
		t.Fatal(err)
	}
	// The empty middle row was ignored.
	if len(rt.Targets) != 2 || rt.Targets[0].Provider != "alpha" || rt.Targets[0].UpstreamModel != "m1" || rt.Targets[0].Weight != 3 ||
		rt.Targets[0].Prices == nil || rt.Targets[0].Prices.Input.PerMillion() != "0.5" || rt.Targets[1].Provider != "beta" ||
		rt.Policy.MaxOutputTokens != 512 || rt.Policy.Tools != "deny" || rt.RPMLimit != 60 {
		t.Fatalf("stored %+v", rt)
	}
	list := b.get(r.header.Get("Location"))
	mustContain(t, "list", list.body, "Route <code>chat</code> created.", "Routes <span class=\"count\">(1)</span>",
		`<span class="addr">alpha</span> → <span class="mono">m1</span> <span class="muted">×3</span>`, "max output 512 · no tools", "60 rpm")
	if got := routeNames(list.body); len(got) != 1 || got[0] != "chat" {
		t.Fatalf("list rows %v", got)
	}

	edit := b.get("/ui/routes/_edit?org=default&project=default&model=chat")
	mustContain(t, "edit", edit.body, `value="chat"`, `<option value="alpha" selected>alpha</option>`, `value="m1"`, `value="0.5"`,
		`value="1.25"`, `data-fill-value="m2"`, "Delete route chat?", "Callers of chat in project default will get 404")
	// Its price is kept when the route is saved unchanged, since targets
	// are replaced whole.
	form = routeFields("chat", [3]string{"alpha", "m1", "3"}, [3]string{"beta", "", "1"})
	form.Set("current", "chat")
	form["target_input_price"][0], form["target_output_price"][0] = "0.5", "1.25"
	if r = b.postCSRF("/ui/routes/_edit", form); r.status != http.StatusSeeOther {
		t.Fatalf("save: %d %s", r.status, r.body)
	}
	// A rename says what callers of the old name get.
	form.Set("model", "chat-v2")
	r = b.postCSRF("/ui/routes/_edit", form)
	if r.status != http.StatusSeeOther {
		t.Fatalf("rename: %d %s", r.status, r.body)
	}
	r = b.get(r.header.Get("Location"))
	mustContain(t, "renamed", r.body, "Renamed: callers of <code>chat</code>", "<code>chat-v2</code>")
	if rt, err = h.svc.GetRoute(ctx, "default", "default", "chat-v2"); err != nil || rt.Targets[0].Prices == nil {
		t.Fatalf("renamed route %+v %v", rt, err)
	}

	r = b.postCSRF("/ui/routes/_delete?org=default&project=default&model=chat-v2", url.Values{"org": {"default"}})
	if r.status != http.StatusSeeOther {
		t.Fatalf("delete: %d %s", r.status, r.body)
	}
	mustContain(t, "deleted", b.get(r.header.Get("Location")).body, "Route <code>chat-v2</code> deleted", "No route in project default yet")
	if _, err := h.svc.GetRoute(ctx, "default", "default", "chat-v2"); err == nil {
		t.Fatal("route not deleted")
	}
}

func TestRouteFormShowsErrorsBesideTheirRowAndKeepsInput(t *testing.T) {
	h := newHarness(t, Options{})
	mustProvider(t, h, admin.ProviderInput{Name: "alpha"})
	b := h.browser()
	b.login(h.token)
	// What the UI cannot parse: named by the Service's field names.
	r := b.postCSRF("/ui/routes/_new", routeFields("typed", [3]string{"alpha", "kept-model", "heavy"}))
	if r.status != http.StatusUnprocessableEntity {
		t.Fatalf("unparsable weight: %d", r.status)
	}
	mustContain(t, "parse", r.body, `id="err-targets[0].weight"`, "must be a whole number", `value="heavy"`, `value="kept-model"`, `value="typed"`)
	// The Service's own verdicts: the second row names no provider it
	// knows, with its stable code beside that row.
	r = b.postCSRF("/ui/routes/_new", routeFields("typed", [3]string{"alpha", "m", "1"}, [3]string{"ghost", "m", "1"}))
	if r.status != http.StatusUnprocessableEntity {
		t.Fatalf("unknown provider: %d", r.status)
	}
	mustContain(t, "unknown", r.body, `id="err-targets[1].provider"`, "no such provider", `<code class="code">unknown_provider</code>`,
		`<option value="ghost" selected>ghost (deleted or unknown)</option>`)
	r = b.postCSRF("/ui/routes/_new", routeFields("has space", [3]string{"alpha", "", "1"}))
	mustContain(t, "model name", r.body, `id="err-model"`, "must not contain whitespace", `<code class="code">validation_failed</code>`)
	r = b.postCSRF("/ui/routes/_new", routeFields("none"))
	mustContain(t, "no targets", r.body, `id="err-targets"`, "needs at least one target")
	routes, err := h.svc.ListRoutes(context.Background(), "default", "default", admin.PageRequest{})
	if err != nil || len(routes.Data) != 0 {
		t.Fatalf("bad input created routes: %v %v", routes.Data, err)
	}
}

func TestRoutesSearchSortAndPagination(t *testing.T) {
	h := newHarness(t, Options{})
	mustProvider(t, h, admin.ProviderInput{Name: "p", Models: []string{"m"}})
	mustProvider(t, h, admin.ProviderInput{Name: "odd"})
	ctx := context.Background()
	for i := range 120 {
		tg := admin.TargetInput{Provider: "p", UpstreamModel: "m"}
		if i == 77 {
			tg = admin.TargetInput{Provider: "odd", UpstreamModel: "Special-Model"}
		}
		if _, err := h.svc.CreateRoute(ctx, "default", "default", admin.RouteInput{Model: fmt.Sprintf("route-%03d", 119-i),
			Targets: []admin.TargetInput{tg}}); err != nil {
			t.Fatal(err)
		}
	}
	b := h.browser()
	b.login(h.token)
	r := b.get("/ui/routes")
	mustContain(t, "page 1", r.body, "Routes <span class=\"count\">(120)</span>", "1–50 of 120",
		`href="/ui/routes?org=default&amp;page=2&amp;project=default" rel="next"`, `aria-sort="ascending"`)
	names := routeNames(r.body)
	if len(names) != 50 || names[0] != "route-000" || names[49] != "route-049" {
		t.Fatalf("page 1, by name: %d rows, %v…", len(names), names[:min(3, len(names))])
	}
	r = b.get("/ui/routes?org=default&project=default&page=3")
	mustContain(t, "page 3", r.body, "101–120 of 120", `rel="prev"`)
	mustNotContain(t, "page 3", r.body, `rel="next"`)
	// A page past the last shows the last, however large.
	r = b.get("/ui/routes?org=default&project=default&page=9223372036854775807")
	mustContain(t, "huge page", r.body, "101–120 of 120")
	r = b.get("/ui/routes?org=default&project=default&sort=-model")
	if names = routeNames(r.body); names[0] != "route-119" {
		t.Fatalf("descending: %v…", names[:3])
	}
	// Search is on the server, by name, provider or upstream model, and
	// the pager keeps it.
	r = b.get("/ui/routes?org=default&project=default&q=ROUTE-1")
	mustContain(t, "by name", r.body, "20 of 120 routes match", `value="ROUTE-1"`)
	r = b.get("/ui/routes?org=default&project=default&q=special")
	if names = routeNames(r.body); len(names) != 1 || names[0] != "route-042" {
		t.Fatalf("by upstream model: %v", names)
	}
	r = b.get("/ui/routes?org=default&project=default&q=route&page=2")
	mustContain(t, "search page 2", r.body, "51–100 of 120", `href="/ui/routes?org=default&amp;page=3&amp;project=default&amp;q=route" rel="next"`)
	// htmx asks for the table alone.
	req, _ := http.NewRequest(http.MethodGet, h.srv.URL+"/ui/routes?org=default&project=default&q=odd", nil)
	req.Header.Set("HX-Request", "true")
	req.Header.Set("HX-Target", "routes-table")
	r = b.do(req)
	if !strings.HasPrefix(strings.TrimSpace(r.body), `<div id="routes-table">`) || len(routeNames(r.body)) != 1 {
		t.Fatalf("htmx search: %.300s", r.body)
	}
}

// readyFor is a live readiness for the harness: provider id to status.
type readyFor map[int64]readiness.Status

func (m readyFor) Status(id int64) (readiness.Status, bool) { st, ok := m[id]; return st, ok }

func providerID(t *testing.T, h *harness, slug string) int64 {
	t.Helper()
	ctx := context.Background()
	org, err := h.db.GetOrg(ctx, "default")
	if err != nil {
		t.Fatal(err)
	}
	p, err := h.db.GetProvider(ctx, org.ID, slug)
	if err != nil {
		t.Fatal(err)
	}
	return p.ID
}

func TestRouteTargetsShowTheirReadiness(t *testing.T) {
	h := newHarness(t, Options{})
	mustProvider(t, h, admin.ProviderInput{Name: "up", Models: []string{"m"}})
	mustProvider(t, h, admin.ProviderInput{Name: "down", Models: []string{"m"}})
	mustProvider(t, h, admin.ProviderInput{Name: "disc", MetadataSource: store.MetadataUpstream})
	h.svc.SetReadiness(readyFor{
		providerID(t, h, "up"):   {Ready: true},
		providerID(t, h, "down"): {Reason: "health probe failed: connection refused"},
		providerID(t, h, "disc"): {Ready: true, Facts: readiness.Facts{ModelID: "Qwen/Qwen3-8B", Context: 40960}},
	})
	ctx := context.Background()
	for name, targets := range map[string][]admin.TargetInput{
		"both":     {{Provider: "up", UpstreamModel: "m"}, {Provider: "down", UpstreamModel: "m"}},
		"dead":     {{Provider: "down", UpstreamModel: "m"}},
		"mismatch": {{Provider: "disc", UpstreamModel: "other"}},
	} {
		if _, err := h.svc.CreateRoute(ctx, "default", "default", admin.RouteInput{Model: name, Targets: targets}); err != nil {
			t.Fatal(err)
		}
	}
	b := h.browser()
	b.login(h.token)
	r := b.get("/ui/routes")
	mustContain(t, "list", r.body, `<span class="status st-ok">ready</span> <span class="muted small">1 of 2 targets</span>`,
		`<span class="status st-bad">not ready</span> <span class="muted small">0 of 1 targets</span><span class="reason">down: provider not ready: health probe failed: connection refused</span>`,
		"is not the model provider")
	r = b.get("/ui/routes/_edit?org=default&project=default&model=mismatch")
	mustContain(t, "editor", r.body, "not ready", `upstream_model &#34;other&#34; is not the model provider &#34;disc&#34; serves`)
	// The picker's fragment: a discovered model, one click to take it.
	r = b.get("/ui/routes/_models?org=default&row=t4&target_provider=disc")
	mustContain(t, "discovered", r.body, `<div class="hint" id="t4-models"`, "ready", "Discovered model:", `data-fill-target="t4-model" data-fill-value="Qwen/Qwen3-8B"`,
		`<datalist id="t4-models-list"><option value="Qwen/Qwen3-8B"></option></datalist>`)
	r = b.get("/ui/routes/_models?org=default&row=t0&target_provider=down")
	mustContain(t, "configured", r.body, "not ready", "health probe failed", "Configured models:", `data-fill-value="m"`)
	if r = b.get("/ui/routes/_models?org=default&row=%22x&target_provider=up"); r.status != http.StatusBadRequest {
		t.Fatalf("a row id that is not one: %d", r.status)
	}
}

func TestRouteEditorAddsTargetRows(t *testing.T) {
	h := newHarness(t, Options{})
	mustProvider(t, h, admin.ProviderInput{Name: "alpha"})
	b := h.browser()
	b.login(h.token)
	req, _ := http.NewRequest(http.MethodGet, h.srv.URL+"/ui/routes/_target?org=default&project=default&i=3", nil)
	req.Header.Set("HX-Request", "true")
	r := b.do(req)
	mustContain(t, "row", r.body, `<div class="trow" id="t3">`, `id="t3-provider"`, `<option value="alpha">alpha</option>`,
		`hx-get="/ui/routes/_models?org=default&amp;row=t3"`, `id="add-target" class="btn btn-small" hx-swap-oob="true"`,
		`hx-get="/ui/routes/_target?i=4&amp;org=default&amp;project=default"`)
	if r = b.get("/ui/routes/_target?org=default&project=default&i=-1"); r.status != http.StatusBadRequest {
		t.Fatalf("negative row: %d", r.status)
	}
}

func TestRouteEditorCreatesAProviderInItsDialog(t *testing.T) {
	h := newHarness(t, Options{})
	mustProvider(t, h, admin.ProviderInput{Name: "vllm"})
	b := h.browser()
	b.login(h.token)
	const key = "sk-dialog-secret-5e6f7a"
	post := func(form url.Values) response {
		form.Set("csrf", b.csrf())
		req, _ := http.NewRequest(http.MethodPost, h.srv.URL+"/ui/routes/_provider", strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", h.srv.URL)
		req.Header.Set("HX-Request", "true")
		return b.do(req)
	}
	// A taken slug: the dialog's form again, as typed, the error beside
	// the slug with the suggestion; 200 so that htmx swaps it in.
	r := post(providerFields("name", "vllm", "base_url", "http://10.0.0.9/v1", "models", "kept", "key_secret", key))
	if r.status != http.StatusOK || r.header.Get("HX-Trigger") != "" {
		t.Fatalf("taken slug: %d trigger %q", r.status, r.header.Get("HX-Trigger"))
	}
	mustContain(t, "taken", r.body, `<form id="provider-dialog-form"`, "slug_taken", `data-fill-value="vllm-2"`, `value="http://10.0.0.9/v1"`, "kept")
	testkit.AssertNoSecrets(t, "dialog", r.body, key)
	// Created: the event that picks it, and the form empty again.
	r = post(providerFields("name", "GPU в Питере 🚀", "slug", "spb", "base_url", "http://10.0.0.9/v1", "models", "qwen3", "key_secret", key))
	if r.status != http.StatusOK || r.header.Get("HX-Trigger") != `{"provider-created":{"slug":"spb","label":"spb \u2014 GPU \u0432 \u041f\u0438\u0442\u0435\u0440\u0435 \ud83d\ude80"}}` {
		t.Fatalf("create: %d trigger %q %s", r.status, r.header.Get("HX-Trigger"), r.body)
	}
	mustContain(t, "fresh form", r.body, `<form id="provider-dialog-form"`, `id="name" name="name" type="text" value=""`)
	testkit.AssertNoSecrets(t, "created", r.body, key)
	p, err := h.svc.GetProvider(context.Background(), "default", "spb")
	if err != nil || len(p.Keys) != 1 || len(p.Models) != 1 {
		t.Fatalf("created %+v %v", p, err)
	}
}

// TestBrowserInlineAddProviderFromARoute is design 000's flow: in the route
// editor, "+ New provider…" opens the provider form in a dialog; saved, the
// dialog closes, the new provider is picked in that row and its models are
// offered; the route is then saved with it.
func TestBrowserInlineAddProviderFromARoute(t *testing.T) {
	h := newHarness(t, Options{})
	demoLike(t, h)
	h.svc.SetReadiness(readyFor{providerID(t, h, "demo"): {Ready: true}})
	tb := newTab(t, h)
	tb.login(h.token)
	tb.navigate("routes", "/ui/routes", chromedp.Click(chromedp.CSS(`.sidebar a[href^="/ui/routes"]`)), chromedp.WaitVisible(chromedp.CSS("#routes-table table")))
	tb.navigate("add route", "/ui/routes/_new", chromedp.Click(chromedp.CSS(`a.btn-primary`)), chromedp.WaitVisible(chromedp.CSS("#route-model")))
	tb.do("name it", chromedp.SendKeys(chromedp.CSS("#route-model"), "chat"))
	// A person picks the picker's last entry.
	tb.do("+ New provider…", chromedp.Evaluate[chromedp.Void](`(() => { const s = document.querySelector('#t0-provider');
		s.value = s.options[s.options.length - 1].value; s.dispatchEvent(new Event('change', {bubbles: true})); })()`))
	tb.waitFor("dialog open", `document.querySelector('#provider-dialog').open && document.activeElement.id === 'name'`)
	if got, err := chromedp.Run(tb.ctx, chromedp.Evaluate[string](`document.querySelector('#t0-provider option:last-child').textContent`)); err != nil || got != "+ New provider…" {
		t.Fatalf("the picker's last entry is %q %v", got, err)
	}
	tb.do("fill the provider",
		chromedp.SendKeys(chromedp.CSS("#name"), "GPU Spb"),
		chromedp.SendKeys(chromedp.CSS("#base_url"), "http://10.0.0.7:8000/v1"),
		chromedp.SendKeys(chromedp.CSS("#models"), "qwen3\nllama-3"),
	)
	tb.waitFor("slug pre-check", `document.querySelector('#slug-check').innerText.includes('available') && document.querySelector('#slug-check').innerText.includes('gpu-spb')`)
	tb.screenshot("route-new-provider-dialog")
	tb.do("save the provider", chromedp.Click(chromedp.CSS(`#provider-dialog-form button[type=submit]`)))
	tb.waitFor("dialog closed, provider picked", `!document.querySelector('#provider-dialog').open && document.querySelector('#t0-provider').value === 'gpu-spb'`)
	tb.waitFor("its models offered", `!!document.querySelector('#t0-models button[data-fill-value="qwen3"]')`+htmxSettled)
	if got, err := chromedp.Run(tb.ctx, chromedp.Evaluate[string](`document.querySelector('#t0-provider').selectedOptions[0].textContent`)); err != nil || got != "gpu-spb — GPU Spb" {
		t.Fatalf("the picked provider reads %q %v", got, err)
	}
	if _, err := h.svc.GetProvider(context.Background(), "default", "gpu-spb"); err != nil {
		t.Fatalf("provider not created: %v", err)
	}
	tb.do("take a model", chromedp.Click(chromedp.CSS(`#t0-models button[data-fill-value="qwen3"]`)))
	tb.waitFor("model filled", `document.querySelector('#t0-model').value === 'qwen3'`)
	// A second row offers the new provider too; remove it again.
	tb.do("add a row", chromedp.Click(chromedp.CSS("#add-target")))
	tb.waitFor("second row", `!!document.querySelector('#t1-provider option[value="gpu-spb"]')`+htmxSettled)
	tb.do("add a third", chromedp.Click(chromedp.CSS("#add-target")))
	tb.waitFor("third row", `!!document.querySelector('#t2-provider')`+htmxSettled)
	tb.do("remove rows", chromedp.Click(chromedp.CSS(`#t2 [data-remove-closest]`)), chromedp.Click(chromedp.CSS(`#t1 [data-remove-closest]`)))
	tb.waitFor("rows removed", `document.querySelectorAll('#targets-body .trow').length === 1`)
	tb.screenshot("route-editor")
	tb.navigate("save the route", "/ui/routes", chromedp.Click(chromedp.CSS(`#route-form button.btn-primary[type=submit]`)), chromedp.WaitVisible(chromedp.CSS(".flash")))
	if got := tb.text(".flash"); !strings.Contains(got, "Route chat created.") {
		t.Fatalf("notice %q", got)
	}
	row := tb.text("#routes-table tbody")
	if !strings.Contains(row, "chat") || !strings.Contains(row, "gpu-spb → qwen3") {
		t.Fatalf("route row: %q", row)
	}
	tb.do("the whole list", chromedp.Navigate(h.srv.URL+"/ui/routes?org=default&project=default"), chromedp.WaitVisible(chromedp.CSS("#routes-table table")))
	if got := tb.text("h1"); got != "Routes (2)" {
		t.Fatalf("heading %q", got)
	}
	tb.screenshot("routes")
	rt, err := h.svc.GetRoute(context.Background(), "default", "default", "chat")
	if err != nil || len(rt.Targets) != 1 || rt.Targets[0].Provider != "gpu-spb" || rt.Targets[0].UpstreamModel != "qwen3" {
		t.Fatalf("stored route %+v %v", rt, err)
	}
	tb.clean()
}

func TestRouteNamesAreEscapedAndMayHoldSlashes(t *testing.T) {
	h := newHarness(t, Options{})
	mustProvider(t, h, admin.ProviderInput{Name: "p", Models: []string{"<b>m</b>"}})
	ctx := context.Background()
	const evil = `<img/src=x/onerror=alert(1)>`
	for _, name := range []string{evil, "team/chat"} {
		if _, err := h.svc.CreateRoute(ctx, "default", "default", admin.RouteInput{Model: name,
			Targets: []admin.TargetInput{{Provider: "p", UpstreamModel: "<b>m</b>"}}}); err != nil {
			t.Fatal(err)
		}
	}
	b := h.browser()
	b.login(h.token)
	list := b.get("/ui/routes")
	mustContain(t, "list", list.body, "&lt;img/src=x/onerror=alert(1)&gt;", `href="/ui/routes/_edit?model=team%2Fchat&amp;org=default&amp;project=default"`,
		"&lt;b&gt;m&lt;/b&gt;")
	mustNotContain(t, "list", list.body, evil, "<b>m</b>")
	edit := b.get("/ui/routes/_edit?org=default&project=default&model=" + url.QueryEscape(evil))
	if edit.status != http.StatusOK {
		t.Fatalf("editor of %s: %d", evil, edit.status)
	}
	mustContain(t, "editor", edit.body, "Delete route &lt;img/src=x/onerror=alert(1)&gt;?", `data-fill-value="&lt;b&gt;m&lt;/b&gt;"`)
	mustNotContain(t, "editor", edit.body, evil, "<b>m</b>")
	if r := b.get("/ui/routes/_edit?org=default&project=default&model=team/chat"); r.status != http.StatusOK || !strings.Contains(r.body, `value="team/chat"`) {
		t.Fatalf("editor of team/chat: %d", r.status)
	}
}

func TestRoutesAndGroupsKeepToTheTokensOrg(t *testing.T) {
	h := newHarness(t, Options{})
	ctx := context.Background()
	if _, err := h.svc.CreateOrg(ctx, admin.OrgInput{Name: "team-b"}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.svc.CreateProject(ctx, "team-b", admin.ProjectInput{Name: "default"}); err != nil {
		t.Fatal(err)
	}
	mustProvider(t, h, admin.ProviderInput{Name: "neighbour"})
	mustGroup(t, h, "neighbour-pool", "neighbour")
	if _, err := h.svc.CreateRoute(ctx, "default", "default", admin.RouteInput{Model: "neighbour-route",
		Targets: []admin.TargetInput{{Provider: "neighbour"}}}); err != nil {
		t.Fatal(err)
	}
	b := h.browser()
	b.login(h.mintToken(`{"org":"team-b"}`))
	mustNotContain(t, "own routes", b.get("/ui/routes").body, "neighbour")
	mustNotContain(t, "own groups", b.get("/ui/groups").body, "neighbour")
	for _, path := range []string{"/ui/routes?org=default", "/ui/routes/_edit?org=default&project=default&model=neighbour-route",
		"/ui/routes/_models?org=default&row=t0&target_provider=neighbour", "/ui/routes/_target?org=default&project=default&i=1",
		"/ui/groups?org=default", "/ui/groups/neighbour-pool?org=default", "/ui/groups/_member?org=default&i=1",
		"/ui/groups/_overlap?org=default&row=m0&member_provider=neighbour"} {
		r := b.get(path)
		if r.status != http.StatusNotFound {
			t.Fatalf("%s: %d, want 404", path, r.status)
		}
		mustNotContain(t, path, r.body, "neighbour")
	}
	// Writes aimed at the other org are refused and change nothing.
	for path, form := range map[string]url.Values{
		"/ui/routes/_provider": providerFields("name", "intruder", "base_url", "http://10.0.0.5/v1"),
		"/ui/routes/_new":      routeFields("intruder", [3]string{"neighbour", "", "1"}),
		"/ui/routes/_delete?org=default&project=default&model=neighbour-route": {"org": {"default"}},
		"/ui/groups/_new":                  groupFields("intruder", "", [3]string{"neighbour", "1", ""}),
		"/ui/groups/neighbour-pool/delete": {"org": {"default"}},
	} {
		if r := b.postCSRF(path, form); r.status != http.StatusNotFound {
			t.Fatalf("POST %s: %d, want 404", path, r.status)
		}
	}
	if _, err := h.svc.GetProvider(ctx, "default", "intruder"); err == nil {
		t.Fatal("an org token created a provider in another org")
	}
	if _, err := h.svc.GetRoute(ctx, "default", "default", "neighbour-route"); err != nil {
		t.Fatal("an org token deleted a route in another org")
	}
	if _, err := h.svc.GetGroup(ctx, "default", "neighbour-pool"); err != nil {
		t.Fatal("an org token deleted a group in another org")
	}
	routes, _ := h.svc.ListRoutes(ctx, "default", "default", admin.PageRequest{})
	groups, _ := h.svc.ListGroups(ctx, "default", admin.PageRequest{})
	if len(routes.Data) != 1 || len(groups.Data) != 1 {
		t.Fatalf("an org token wrote into another org: %d routes, %d groups", len(routes.Data), len(groups.Data))
	}
}
