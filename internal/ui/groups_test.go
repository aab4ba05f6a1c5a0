package ui

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/rolter/rolter/internal/admin"
)

// groupFields is the group form: base fields, then members as rows of
// provider, weight, model map.
func groupFields(name, slug string, rows ...[3]string) url.Values {
	f := url.Values{"org": {"default"}, "name": {name}, "slug": {slug}, "strategy": {"weighted"}}
	for _, r := range rows {
		f.Add("member_provider", r[0])
		f.Add("member_weight", r[1])
		f.Add("member_model_map", r[2])
	}
	return f
}

func mustGroup(t *testing.T, h *harness, slug string, members ...string) {
	t.Helper()
	in := admin.GroupInput{Slug: slug, Name: slug}
	for _, m := range members {
		in.Members = append(in.Members, admin.GroupMemberInput{Provider: m})
	}
	if _, err := h.svc.CreateGroup(context.Background(), "default", in); err != nil {
		t.Fatal(err)
	}
}

func TestGroupCreateShowsMembersAndOverlap(t *testing.T) {
	h := newHarness(t, Options{})
	for _, p := range []string{"alpha", "beta", "gamma"} {
		mustProvider(t, h, admin.ProviderInput{Name: p})
	}
	mustGroup(t, h, "pool-a", "alpha", "gamma")
	b := h.browser()
	b.login(h.token)
	r := b.get("/ui/groups/_new")
	mustContain(t, "new", r.body, "Add group", `id="slug-check"`, `<option value="alpha">alpha</option>`, `id="add-member"`)

	form := groupFields("Big pool", "", [3]string{"alpha", "2", "gpt-4o = qwen3\n small=llama-3 "}, [3]string{"", "1", ""}, [3]string{"beta", "1", ""})
	form.Set("policy.max_output_tokens", "1024")
	r = b.postCSRF("/ui/groups/_new", form)
	if r.status != http.StatusSeeOther || r.header.Get("Location") != "/ui/groups/big-pool?done=created&org=default" {
		t.Fatalf("create: %d %q %s", r.status, r.header.Get("Location"), r.body)
	}
	g, err := h.svc.GetGroup(context.Background(), "default", "big-pool")
	if err != nil {
		t.Fatal(err)
	}
	if len(g.Members) != 2 || g.Members[0].Provider != "alpha" || g.Members[0].Weight != 2 || g.Members[0].ModelMap["gpt-4o"] != "qwen3" ||
		g.Members[0].ModelMap["small"] != "llama-3" || g.Members[1].Provider != "beta" || g.Policy.MaxOutputTokens != 1024 {
		t.Fatalf("stored %+v", g)
	}
	detail := b.get(r.header.Get("Location"))
	mustContain(t, "detail", detail.body, "Group created.", "callers use <code>big-pool/…</code>", `<option value="alpha" selected>alpha</option>`,
		"gpt-4o = qwen3\nsmall = llama-3</textarea>", `<span class="tag tag-warn">also in</span> <span class="addr">pool-a</span>`,
		"in no other group", "Delete group big-pool?", "Callers using big-pool/… will get 404")

	list := b.get("/ui/groups")
	mustContain(t, "list", list.body, `Groups <span class="count">(2)</span>`, `<span class="mono">gpt-4o → qwen3, small → llama-3</span>`,
		`title="this provider is also a member of pool-a">also in pool-a</span>`, `title="this provider is also a member of big-pool">also in big-pool</span>`,
		`Overlap <span class="count">(1)</span>`, `2 groups: <a class="addr" href="/ui/groups/big-pool?org=default">big-pool</a>, <a class="addr" href="/ui/groups/pool-a?org=default">pool-a</a>`)
	mustNotContain(t, "list", list.body, "also in big-pool, pool-a")
}

func TestGroupFormShowsErrorsBesideTheirRowAndKeepsInput(t *testing.T) {
	h := newHarness(t, Options{})
	mustProvider(t, h, admin.ProviderInput{Name: "alpha"})
	mustGroup(t, h, "pool-a", "alpha")
	b := h.browser()
	b.login(h.token)
	for _, c := range []struct {
		name string
		form url.Values
		want []string
	}{
		{"model map", groupFields("Typed", "", [3]string{"alpha", "1", "no equals sign"}),
			[]string{`id="err-members[0].model_map"`, "write each line as client-model = upstream-model", "no equals sign</textarea>", `value="Typed"`}},
		{"weight", groupFields("Typed", "", [3]string{"alpha", "lots", ""}),
			[]string{`id="err-members[0].weight"`, "must be a whole number", `value="lots"`}},
		{"unknown provider", groupFields("Typed", "", [3]string{"alpha", "1", ""}, [3]string{"ghost", "1", ""}),
			[]string{`id="err-members[1].provider"`, "no such provider", `<code class="code">unknown_provider</code>`, `<option value="ghost" selected>ghost (unknown)</option>`}},
		{"twice", groupFields("Typed", "", [3]string{"alpha", "1", ""}, [3]string{"alpha", "2", ""}),
			[]string{`id="err-members[1].provider"`, "repeats members[0].provider"}},
		{"nested", groupFields("Typed", "", [3]string{"pool-a", "1", ""}),
			[]string{"groups cannot contain groups", `id="err-members[0].provider"`}},
		{"no members", groupFields("Typed", ""),
			[]string{`id="err-members"`, "needs at least one member"}},
		{"slug taken", groupFields("Typed", "alpha", [3]string{"alpha", "1", ""}),
			[]string{"slug_taken", `data-fill-value="alpha-2"`}},
	} {
		r := b.postCSRF("/ui/groups/_new", c.form)
		if r.status != http.StatusUnprocessableEntity {
			t.Fatalf("%s: %d", c.name, r.status)
		}
		mustContain(t, c.name, r.body, c.want...)
	}
	groups, _ := h.svc.ListGroups(context.Background(), "default", admin.PageRequest{})
	if len(groups.Data) != 1 {
		t.Fatalf("bad input created groups: %v", groups.Data)
	}
}

func TestGroupEditSlugChangeAndDelete(t *testing.T) {
	h := newHarness(t, Options{})
	mustProvider(t, h, admin.ProviderInput{Name: "alpha"})
	mustProvider(t, h, admin.ProviderInput{Name: "beta"})
	mustGroup(t, h, "pool", "alpha")
	ctx := context.Background()
	b := h.browser()
	b.login(h.token)
	edit := func(slug string, kv ...string) response {
		f := groupFields("Pool", slug, [3]string{"alpha", "1", ""}, [3]string{"beta", "5", "m = n"})
		for i := 0; i+1 < len(kv); i += 2 {
			f.Set(kv[i], kv[i+1])
		}
		return b.postCSRF("/ui/groups/pool", f)
	}
	if r := edit("pool"); r.status != http.StatusSeeOther {
		t.Fatalf("save: %d %s", r.status, r.body)
	}
	if g, err := h.svc.GetGroup(ctx, "default", "pool"); err != nil || len(g.Members) != 2 || g.Members[1].Weight != 5 {
		t.Fatalf("members not replaced: %+v %v", g, err)
	}
	r := edit("pool-2")
	mustContain(t, "immutable", r.body, "slug_immutable", `value="pool-2"`)
	r = edit("pool-2", "allow_slug_change", "on", "confirm_slug", "pool2")
	mustContain(t, "confirm", r.body, `id="err-confirm_slug"`, "type the new slug again")
	if _, err := h.svc.GetGroup(ctx, "default", "pool"); err != nil {
		t.Fatal("a refused slug change changed the group")
	}
	r = edit("pool-2", "allow_slug_change", "on", "confirm_slug", "pool-2")
	if r.status != http.StatusSeeOther {
		t.Fatalf("slug change: %d %s", r.status, r.body)
	}
	mustContain(t, "changed", b.get(r.header.Get("Location")).body, "Slug changed: addresses <code>pool/…</code> no longer resolve")
	r = b.postCSRF("/ui/groups/pool-2/delete", url.Values{"org": {"default"}})
	if r.status != http.StatusSeeOther {
		t.Fatalf("delete: %d %s", r.status, r.body)
	}
	// design 000 §3: a deleted group stays listed, its slug reserved,
	// until the Purge button frees it.
	mustContain(t, "deleted", b.get(r.header.Get("Location")).body, "Group <code>pool-2</code> deleted. Its slug stays reserved",
		`pool-2</a> <span class="status st-off">deleted</span>`)
	r = b.get("/ui/groups/pool-2?org=default")
	mustContain(t, "deleted page", r.body, `id="purge-group"`, "/ui/groups/pool-2/purge")
	if strings.Contains(r.body, `id="delete-group"`) {
		t.Fatal("a deleted group's page offers Delete again")
	}
	r = b.postCSRF("/ui/groups/pool-2/purge", url.Values{"org": {"default"}})
	if r.status != http.StatusSeeOther {
		t.Fatalf("purge: %d %s", r.status, r.body)
	}
	mustContain(t, "purged", b.get(r.header.Get("Location")).body, "Group <code>pool-2</code> purged; its slug is free", "No group yet")
	if r = b.get("/ui/groups/pool-2"); r.status != http.StatusNotFound {
		t.Fatalf("purged group's page: %d", r.status)
	}
}

func TestGroupEditorFragments(t *testing.T) {
	h := newHarness(t, Options{})
	mustProvider(t, h, admin.ProviderInput{Name: "alpha"})
	mustProvider(t, h, admin.ProviderInput{Name: "gone"})
	mustGroup(t, h, "pool-a", "alpha", "gone")
	mustGroup(t, h, "pool-b", "alpha")
	if err := h.svc.DeleteProvider(context.Background(), "default", "gone", false, false); err != nil {
		t.Fatal(err)
	}
	b := h.browser()
	b.login(h.token)
	r := b.get("/ui/groups/_member?org=default&i=2")
	mustContain(t, "row", r.body, `<div class="trow trow-members" id="m2">`, `<option value="alpha">alpha</option>`,
		`id="add-member" class="btn btn-small" hx-swap-oob="true"`, `hx-get="/ui/groups/_member?i=3&amp;org=default"`)
	mustNotContain(t, "row", r.body, `<option value="gone"`)
	r = b.get("/ui/groups/_overlap?org=default&row=m2&member_provider=alpha&current=pool-a")
	mustContain(t, "overlap", r.body, `<div class="hint" id="m2-overlap"`, `also in</span> <span class="addr">pool-b</span>`)
	mustNotContain(t, "overlap", r.body, ">pool-a<")
	if r = b.get("/ui/groups/_overlap?org=default&row=x&member_provider=alpha"); r.status != http.StatusBadRequest {
		t.Fatalf("bad row id: %d", r.status)
	}
	// A deleted provider stays a member, shown as such.
	r = b.get("/ui/groups/pool-a")
	mustContain(t, "deleted member", r.body, `<option value="gone" selected>gone (deleted)</option>`, "kept; routing skips it")
	mustContain(t, "list", b.get("/ui/groups").body, `<span class="addr">gone</span> <span class="muted">×1</span> <span class="status st-off">deleted</span>`)
}

// TestBrowserCreateGroupWithTwoMembersShowsOverlap: a group of two
// providers, one already in another group; the editor says so as the
// member is picked, and the list shows the overlap.
func TestBrowserCreateGroupWithTwoMembersShowsOverlap(t *testing.T) {
	h := newHarness(t, Options{})
	mustProvider(t, h, admin.ProviderInput{Name: "alpha", Models: []string{"qwen3"}})
	mustProvider(t, h, admin.ProviderInput{Name: "beta", Models: []string{"llama-3"}})
	mustGroup(t, h, "pool-a", "alpha")
	tb := newTab(t, h)
	tb.login(h.token)
	tb.navigate("groups", "/ui/groups", chromedp.Click(chromedp.CSS(`.sidebar a[href^="/ui/groups"]`)), chromedp.WaitVisible(chromedp.CSS("table")))
	tb.navigate("add group", "/ui/groups/_new", chromedp.Click(chromedp.CSS(`a.btn-primary`)), chromedp.WaitVisible(chromedp.CSS("#name")))
	// Groups share the slug namespace with providers: "alpha" is taken.
	tb.do("type a taken name", chromedp.SendKeys(chromedp.CSS("#name"), "Alpha"))
	tb.waitFor("slug conflict", `document.querySelector('#slug-check').innerText.includes('taken') && !!document.querySelector('#slug-check button[data-fill-value="alpha-2"]')`+htmxSettled)
	tb.do("accept the suggestion", chromedp.Click(chromedp.CSS(`#slug-check button[data-fill-value="alpha-2"]`)))
	tb.waitFor("suggestion taken", `document.querySelector('#slug').value === 'alpha-2' && document.querySelector('#slug-check').innerText.includes('available')`)
	pick := func(sel, value string) {
		t.Helper()
		tb.do("pick "+value, chromedp.Evaluate[chromedp.Void](`(() => { const s = document.querySelector('`+sel+`');
			s.value = '`+value+`'; s.dispatchEvent(new Event('change', {bubbles: true})); })()`))
	}
	pick("#m0-provider", "alpha")
	tb.waitFor("overlap shown", `document.querySelector('#m0-overlap').innerText.includes('also in') && document.querySelector('#m0-overlap').innerText.includes('pool-a')`+htmxSettled)
	tb.do("map a model", chromedp.SendKeys(chromedp.CSS("#m0-map"), "chat = qwen3"))
	tb.do("add a member", chromedp.Click(chromedp.CSS("#add-member")))
	tb.waitFor("second row", `!!document.querySelector('#m1-provider')`+htmxSettled)
	pick("#m1-provider", "beta")
	tb.waitFor("no overlap", `document.querySelector('#m1-overlap').innerText.includes('in no other group')`+htmxSettled)
	tb.do("weigh it", chromedp.SetValue(chromedp.CSS("#m1-weight"), "3"))
	tb.screenshot("group-editor")
	tb.navigate("save", "/ui/groups/alpha-2", chromedp.Click(chromedp.CSS(`#group-form button.btn-primary[type=submit]`)), chromedp.WaitVisible(chromedp.CSS(".flash")))
	if got := tb.text("h1"); got != "alpha-2 Alpha" {
		t.Fatalf("group page heading %q", got)
	}
	g, err := h.svc.GetGroup(context.Background(), "default", "alpha-2")
	if err != nil || len(g.Members) != 2 || g.Members[0].ModelMap["chat"] != "qwen3" || g.Members[1].Weight != 3 {
		t.Fatalf("stored group %+v %v", g, err)
	}
	tb.navigate("the list", "/ui/groups", chromedp.Click(chromedp.CSS(`.sidebar a[href^="/ui/groups"]`)), chromedp.WaitVisible(chromedp.CSS("#overlap")))
	if got := tb.text("h1"); got != "Groups (2)" {
		t.Fatalf("heading %q", got)
	}
	overlap := tb.text(`table[aria-labelledby="overlap"] tbody`)
	if !strings.Contains(overlap, "alpha") || !strings.Contains(overlap, "2 groups: alpha-2, pool-a") {
		t.Fatalf("overlap table: %q", overlap)
	}
	tb.screenshot("groups")
	tb.clean()
}

// TestSlugCheckSaysReserved: design 000 §3 — the pre-check tells a slug
// held by a deleted group or provider ("reserved (deleted group)") from
// one a live one holds ("taken"), and still offers the next free slug.
func TestSlugCheckSaysReserved(t *testing.T) {
	h := newHarness(t, Options{})
	b := h.browser()
	b.login(h.token)
	mustProvider(t, h, admin.ProviderInput{Name: "alpha"})
	ctx := context.Background()
	if _, err := h.svc.CreateGroup(ctx, "default", admin.GroupInput{Slug: "pool", Members: []admin.GroupMemberInput{{Provider: "alpha"}}}); err != nil {
		t.Fatal(err)
	}
	r := b.get("/ui/slug-check?org=default&slug=pool")
	mustContain(t, "taken", r.body, ">taken<", `data-fill-value="pool-2"`)
	if err := h.svc.DeleteGroup(ctx, "default", "pool", false, false); err != nil {
		t.Fatal(err)
	}
	r = b.get("/ui/slug-check?org=default&slug=pool")
	mustContain(t, "reserved", r.body, "reserved (deleted group)", "kept until purged", `data-fill-value="pool-2"`)
	if strings.Contains(r.body, ">taken<") {
		t.Fatalf("a reserved slug reads as taken: %s", r.body)
	}
}
