package gateway

import (
	"sync/atomic"

	"github.com/rolter/rolter/internal/policy"
	"github.com/rolter/rolter/internal/readiness"
	"github.com/rolter/rolter/internal/resolve"
	"github.com/rolter/rolter/internal/snapshot"
	"github.com/rolter/rolter/internal/store"
)

// Route plans are built lazily (issue 21). Most routes of a large catalog
// serve rarely or never, and a plan with its targets, admission facts and
// per-deployment state costs about a kilobyte and a microsecond per route
// when the table is derived. So deriving a table keeps, per route, only
// what a request cannot do without before it names the route: its
// /v1/models entry (whether a target serves), the routed counts that keep
// its deployments' state from expiry, and its limiter; the plan is built
// by the first request that needs it and kept in the route's slot.
//
// A slot belongs to the table and to every table patched from it that
// did not derive its route anew: a patch or refresh gives a route it
// re-derives a new, empty slot, exactly where it used to build a new
// plan, so a plan built later reflects the change, and a route it did not
// reach keeps its plan (and the plan's round robin position and routable
// set) as before. A plan's inputs (the route, its providers' runtimes and
// the table's view of their readiness) are the same in every table that
// shares the slot, so it does not matter which table builds it.
//
// Deployment state (breakers, load) stays in Gateway.states by targetID,
// so a plan built after a patch finds the same breakers as the plan
// before it; the table's routed counts, eager, keep it from expiring
// whether or not a plan has been built.

// routeSlot is a route's place in a table: its plan once built, its
// limiter, which is derived with the table (a limiter is kept across
// tables by route id, and a table derived later may change its bound),
// and its /v1/models facts (routeModel).
type routeSlot struct {
	plan    atomic.Pointer[routePlan]
	limiter *policy.Limiter
	// governs is the strictest of the route's policy and those of its
	// serving targets' providers; nil when that is the route's own.
	governs *store.Policy
	// context is the pool's: the smallest known context of the serving
	// targets; 0: unknown.
	context int
	// serving: a target serves the route (ready and routable, or
	// draining), so /v1/models lists it.
	serving bool
}

// routeModel is route r's /v1/models entry; false when t does not list it
// (no target serves it, or t has no such route).
func (t *table) routeModel(r *snapshot.Route) (modelEntry, bool) {
	slot := t.routes.At(r)
	if slot == nil || !slot.serving {
		return modelEntry{}, false
	}
	e := modelEntry{ID: r.Model, Object: "model", Created: r.CreatedAt.Unix(), OwnedBy: "rolter",
		AddressKind: string(resolve.KindRoute), ContextLength: slot.context, Policy: r.Policy}
	if slot.governs != nil {
		e.Policy = *slot.governs
	}
	return e, true
}

// routePlan is route r's plan in t, built on first use; nil when t has no
// such route. Requests that race to build it get the one that was stored
// first.
func (t *table) routePlan(r *snapshot.Route) *routePlan {
	slot := t.routes.At(r)
	if slot == nil {
		return nil
	}
	if p := slot.plan.Load(); p != nil {
		return p
	}
	p := t.g.buildPlan(t, r, slot.limiter)
	if !slot.plan.CompareAndSwap(nil, p) {
		p = slot.plan.Load()
	}
	return p
}

// view is p's readiness as t was derived with it (readyView), so that a
// plan built after the table reads what the table's /v1/models entries
// and Refresh's comparison read. A provider the derivation never read is
// read live (addRoute reads every route target's, so none should be).
func (t *table) view(p *providerRT) readiness.Status {
	if st, ok := t.ready.Get(p.id); ok {
		return *st
	}
	return readyView(t.g.status(p))
}

// buildPlan derives route r's plan from t: its targets with their
// deployment state, their weights and the plan's admission facts.
func (g *Gateway) buildPlan(t *table, r *snapshot.Route, limiter *policy.Limiter) *routePlan {
	plan := &routePlan{kind: resolve.KindRoute, route: r.Model, src: r,
		strategy: g.selector(r.Strategy, "route", r.Model), rr: new(atomic.Uint64), policy: r.Policy, limiter: limiter,
		targets: make([]*targetRT, 0, len(r.Targets)), weights: make([]int, 0, len(r.Targets))}
	for _, tg := range r.Targets {
		target := g.targetOf(t.providers.At(tg.Provider.ID), tg.UpstreamModel, true)
		target.ctxLimit = tg.ContextLimit
		target.priority = tg.Priority
		target.configured = true
		target.prices = tg.Prices
		plan.targets = append(plan.targets, target)
		plan.weights = append(plan.weights, tg.Weight)
	}
	plan.facts = g.factsWith(plan, r.Model, t.view)
	return plan
}

// unmadeTargets calls fn with the provider of each route target of t that
// has no deployment state yet, because no request has built a plan over
// it: its breaker is closed, as a new one would be (the rolter_cooldown
// metric counts it so).
func (g *Gateway) unmadeTargets(t *table, fn func(p *providerRT)) {
	for id := range t.routed.All() {
		if _, ok := g.states.Load(id); !ok {
			if p := t.providers.At(id.provider); p != nil {
				fn(p)
			}
		}
	}
}
