package ui

import (
	"context"
	"net/http"
	"reflect"
	"testing"

	"github.com/rolter/rolter/internal/admin"
)

// Issue 19: the route editor writes target priorities, fallback routes
// and the context fallback; the list and the editor show them; a cycle is
// refused with its stable code and the input kept.
func TestRouteEditorFallbacksAndPriorities(t *testing.T) {
	h := newHarness(t, Options{})
	mustProvider(t, h, admin.ProviderInput{Name: "alpha"})
	mustProvider(t, h, admin.ProviderInput{Name: "beta"})
	ctx := context.Background()
	for _, m := range []string{"big", "spare"} {
		if _, err := h.svc.CreateRoute(ctx, "default", "default", admin.RouteInput{Model: m, Targets: []admin.TargetInput{{Provider: "beta"}}}); err != nil {
			t.Fatal(err)
		}
	}
	b := h.browser()
	b.login(h.token)
	mustContain(t, "new", b.get("/ui/routes/_new?org=default&project=default").body,
		`name="fallbacks"`, `name="context_fallback"`, `name="target_priority"`, "<span>Priority</span>")

	form := routeFields("chat", [3]string{"alpha", "m1", "1"}, [3]string{"beta", "gpt-4o", "1"})
	form["target_priority"] = []string{"", "2"}
	form.Set("fallbacks", "spare,  big")
	form.Set("context_fallback", "big")
	r := b.postCSRF("/ui/routes/_new", form)
	if r.status != http.StatusSeeOther {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	rt, err := h.svc.GetRoute(ctx, "default", "default", "chat")
	if err != nil || !reflect.DeepEqual(rt.Fallbacks, []string{"spare", "big"}) || rt.ContextFallback != "big" ||
		rt.Targets[0].Priority != 0 || rt.Targets[1].Priority != 2 {
		t.Fatalf("stored %+v %v", rt, err)
	}
	list := b.get(r.header.Get("Location"))
	mustContain(t, "list", list.body, `<span class="muted" title="priority tier: lower is preferred">tier 2</span>`,
		`<span class="muted">then</span> <span class="addr">spare</span>, <span class="addr">big</span>`,
		`<span class="muted">too long:</span> <span class="addr">big</span>`)
	edit := b.get("/ui/routes/_edit?org=default&project=default&model=chat")
	mustContain(t, "edit", edit.body, `value="spare, big"`, `id="route-context-fallback" name="context_fallback" type="text" value="big"`,
		`name="target_priority" type="number" min="0" value="2"`)

	// big -> chat -> big is a cycle: refused, the input kept.
	form = routeFields("big", [3]string{"beta", "", "1"})
	form.Set("current", "big")
	form.Set("fallbacks", "chat")
	r = b.postCSRF("/ui/routes/_edit", form)
	if r.status != http.StatusUnprocessableEntity {
		t.Fatalf("cycle: %d", r.status)
	}
	mustContain(t, "cycle", r.body, `<code class="code">fallback_cycle</code>`, `value="chat"`)
	if rt, _ := h.svc.GetRoute(ctx, "default", "default", "big"); len(rt.Fallbacks) != 0 {
		t.Fatalf("a refused save changed fallbacks: %v", rt.Fallbacks)
	}
	// Clearing the fields clears them.
	form = routeFields("chat", [3]string{"alpha", "m1", "1"})
	form.Set("current", "chat")
	if r = b.postCSRF("/ui/routes/_edit", form); r.status != http.StatusSeeOther {
		t.Fatalf("clear: %d %s", r.status, r.body)
	}
	if rt, _ := h.svc.GetRoute(ctx, "default", "default", "chat"); len(rt.Fallbacks) != 0 || rt.ContextFallback != "" {
		t.Fatalf("after clearing: %+v", rt)
	}
}
