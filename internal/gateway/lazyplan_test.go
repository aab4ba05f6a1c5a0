package gateway

import (
	"context"
	"io"
	"net/http"
	"sync"
	"testing"

	"github.com/rolter/rolter/internal/cooldown"
	"github.com/rolter/rolter/internal/snapshot"
	"github.com/rolter/rolter/internal/store"
)

// routeOf is route model of the harness's project in the gateway's table.
func (h *harness) routeOf(model string) (*table, *snapshot.Route) {
	h.t.Helper()
	t := h.gw.table.Load()
	r := t.snap.Org("default").Projects.At("default").Routes.At(model)
	if r == nil {
		h.t.Fatalf("no route %q", model)
	}
	return t, r
}

// built reports whether route model's plan has been built in the current
// table.
func (h *harness) built(model string) bool {
	t, r := h.routeOf(model)
	return t.routes.At(r).plan.Load() != nil
}

// TestLazyPlanFollowsPatch: a route's plan is built by its first request,
// not with the table, and a plan built after a patch, or built before one
// and so derived anew, sends requests where the patch says.
func TestLazyPlanFollowsPatch(t *testing.T) {
	h := newHarness(t, Config{})
	ctx := context.Background()
	ok := func(w http.ResponseWriter, r *http.Request, _ []byte) { _, _ = io.WriteString(w, `{}`) }
	a, b := newUpstream(t, ok), newUpstream(t, ok)
	pid := h.provider("p", a.base(), store.ProviderSettings{})
	h.route("m", "", store.Target{ProviderID: pid, UpstreamModel: "x", Weight: 1})
	if h.built("m") {
		t.Fatal("the plan was built before any request")
	}
	if _, ok := h.gw.states.Load(targetID{pid, "x"}); ok {
		t.Fatal("the target's state was made before any request")
	}
	send := func(want *upstream) {
		t.Helper()
		before := want.count()
		resp := h.post("/v1/chat/completions", `{"model":"m"}`)
		if body := readAll(t, resp); resp.StatusCode != 200 {
			t.Fatalf("status %d body %s", resp.StatusCode, body)
		}
		if want.count() != before+1 {
			t.Fatalf("the request did not reach %s", want.base())
		}
	}
	move := func(to *upstream) {
		p, err := h.db.GetProvider(ctx, h.org.ID, "p")
		must(t, err)
		p.BaseURL = to.base()
		must(t, h.db.UpdateProvider(ctx, p))
		h.reload()
	}

	move(b) // patched before the plan was ever built
	if h.built("m") {
		t.Fatal("the patch built the plan")
	}
	send(b)
	if !h.built("m") {
		t.Fatal("the request did not keep the plan it built")
	}
	move(a) // patched after: the built plan is not the new table's
	if h.built("m") {
		t.Fatal("the plan over a patched provider was kept")
	}
	send(a)
	send(a)
	if a.count() != 2 || b.count() != 1 {
		t.Fatalf("a served %d, b %d", a.count(), b.count())
	}
}

// TestBreakerSurvivesLazyRebuild: a route target's breaker outlives a
// patch that derives its route anew, although the new plan is only built
// later, and its state does not expire while a route targets it.
func TestBreakerSurvivesLazyRebuild(t *testing.T) {
	h := newHarness(t, Config{})
	ctx := context.Background()
	ok := func(w http.ResponseWriter, r *http.Request, _ []byte) { _, _ = io.WriteString(w, `{}`) }
	sick, well := newUpstream(t, ok), newUpstream(t, ok)
	p1 := h.provider("sick", sick.base(), store.ProviderSettings{})
	p2 := h.provider("well", well.base(), store.ProviderSettings{})
	r := &store.Route{ProjectID: h.proj.ID, Model: "m", Strategy: "round_robin",
		Targets: []store.Target{{ProviderID: p1, UpstreamModel: "x", Weight: 1}, {ProviderID: p2, UpstreamModel: "x", Weight: 1}}}
	must(t, h.db.CreateRoute(ctx, r))
	h.reload()
	tt, sr := h.routeOf("m")
	plan := tt.routePlan(sr)
	plan.targets[0].breaker.Trip()
	st := plan.targets[0].deployState

	r.Policy.MaxOutputTokens = 100
	must(t, h.db.UpdateRoute(ctx, r))
	h.reload()
	if h.built("m") {
		t.Fatal("the patched route's plan was kept")
	}
	for range 6 {
		resp := h.post("/v1/chat/completions", `{"model":"m"}`)
		if body := readAll(t, resp); resp.StatusCode != 200 {
			t.Fatalf("status %d body %s", resp.StatusCode, body)
		}
	}
	if sick.count() != 0 || well.count() != 6 {
		t.Fatalf("the cooling target served %d requests (the other %d)", sick.count(), well.count())
	}
	tt, sr = h.routeOf("m")
	if got := tt.routePlan(sr).targets[0]; got.deployState != st || got.breaker.State() != cooldown.StateCooling {
		t.Fatalf("the rebuilt plan's target has state %p (%s), want %p", got.deployState, got.breaker.State(), st)
	}

	// Routed state never expires; once no route targets it, it does.
	h.clock.Advance(3 * stateTTL)
	h.gw.sweep(h.clock.Now().UnixNano(), stateTTL)
	if v, ok := h.gw.states.Load(targetID{p1, "x"}); !ok || v != st {
		t.Fatal("a route target's state expired")
	}
	r.Targets = r.Targets[1:]
	must(t, h.db.UpdateRoute(ctx, r))
	h.reload()
	h.clock.Advance(2 * stateTTL)
	h.gw.sweep(h.clock.Now().UnixNano(), stateTTL)
	if _, ok := h.gw.states.Load(targetID{p1, "x"}); ok {
		t.Fatal("the state of a deployment no route targets did not expire")
	}
}

// TestLazyPlanRace: requests that build a route's plan at once share one,
// and its targets hold the gateway's deployment state.
func TestLazyPlanRace(t *testing.T) {
	h := newHarness(t, Config{})
	pid := h.provider("p", deadURL(t), store.ProviderSettings{})
	h.route("m", "", store.Target{ProviderID: pid, UpstreamModel: "x", Weight: 1}, store.Target{ProviderID: pid, UpstreamModel: "y", Weight: 1})
	tt, r := h.routeOf("m")
	const n = 16
	plans := make([]*routePlan, n)
	var start, done sync.WaitGroup
	start.Add(1)
	for i := range n {
		done.Add(1)
		go func() {
			defer done.Done()
			start.Wait()
			plans[i] = tt.routePlan(r)
		}()
	}
	start.Done()
	done.Wait()
	for i, p := range plans {
		if p != plans[0] {
			t.Fatalf("request %d got another plan", i)
		}
	}
	for _, tg := range plans[0].targets {
		if v, ok := h.gw.states.Load(tg.id); !ok || v.(*deployState) != tg.deployState {
			t.Fatalf("target %v does not hold the gateway's state", tg.id)
		}
	}
}

// TestRefusalTripsUnbuiltTargets: a refused connection takes every route
// target of its provider out of routing, those of routes whose plan no
// request has built yet included.
func TestRefusalTripsUnbuiltTargets(t *testing.T) {
	h := newHarness(t, Config{})
	pid := h.provider("dead", deadURL(t), store.ProviderSettings{})
	h.route("a", "", store.Target{ProviderID: pid, UpstreamModel: "x", Weight: 1})
	h.route("b", "", store.Target{ProviderID: pid, UpstreamModel: "y", Weight: 1})
	resp := h.post("/v1/chat/completions", `{"model":"a"}`)
	if body := readAll(t, resp); resp.StatusCode != 502 {
		t.Fatalf("status %d body %s", resp.StatusCode, body)
	}
	if h.built("b") {
		t.Fatal("route b's plan was built")
	}
	tt, r := h.routeOf("b")
	if st := tt.routePlan(r).targets[0].breaker.State(); st != cooldown.StateCooling {
		t.Fatalf("route b's target is %s after its provider refused", st)
	}
}
