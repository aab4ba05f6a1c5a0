package gateway

import (
	"bytes"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rolter/rolter/internal/policy"
	"github.com/rolter/rolter/internal/resolve"
	"github.com/rolter/rolter/internal/snapshot"
	"github.com/rolter/rolter/internal/store"
)

// Fallback routes (issue 19). A route may name fallbacks, other routes of
// its project tried in order when every attempt on it failed before the
// first byte with a retryable class, and a context fallback, which takes a
// request too long for its pool's context. Each fallback route is admitted
// as its own route: its targets, tiers, model rewrite, metadata and policy.
// The caller's key needs only the address it sent (fallback is the
// operator's decision), the response keeps that address in model, and the
// route that served is in the x-rolter-fallback header and the usage
// record. A pinned address (provider-slug/model, x-rolter-provider) never
// falls back, nor does a request whose first byte reached the client or
// that failed by its own fault.

// FallbackHeader names the fallback route that served a request.
const FallbackHeader = "X-Rolter-Fallback"

// fallbacks are the plans, in t, of the fallback routes of plan's route,
// by name in its project of t's snapshot: the chain flattened depth first
// (a fallback's own fallbacks come before the next one's), at most
// store.MaxFallbackDepth deep, each route once and never the route
// itself. The admin API refuses cycles and deeper chains; the bounds here
// keep a table built from anything safe. Resolved per request, on the
// fallback path only: after a patch the names reach the routes' current
// plans.
func (t *table) fallbacks(plan *routePlan) []*routePlan {
	if t == nil || plan == nil || plan.src == nil || len(plan.src.Fallbacks) == 0 {
		return nil
	}
	pj := t.snap.Project(plan.src.ProjectID)
	if pj == nil {
		return nil
	}
	var out []*routePlan
	seen := map[*snapshot.Route]bool{plan.src: true}
	var walk func(names []string, depth int)
	walk = func(names []string, depth int) {
		if depth > store.MaxFallbackDepth {
			return
		}
		for _, m := range names {
			r := pj.Routes.At(m)
			if r == nil || seen[r] {
				continue
			}
			fb := t.routePlan(r)
			if fb == nil {
				continue
			}
			seen[r] = true
			out = append(out, fb)
			walk(r.Fallbacks, depth+1)
		}
	}
	walk(plan.src.Fallbacks, 1)
	return out
}

// ctxFallback is the plan, in t, of the context fallback of plan's route
// (by name in its project of t's snapshot); nil when it has none, names
// itself or the plan is pinned.
func (t *table) ctxFallback(plan *routePlan) *routePlan {
	if t == nil || plan == nil || plan.pinned || plan.src == nil || plan.src.ContextFallback == "" {
		return nil
	}
	pj := t.snap.Project(plan.src.ProjectID)
	if pj == nil {
		return nil
	}
	r := pj.Routes.At(plan.src.ContextFallback)
	if r == nil || r == plan.src {
		return nil
	}
	return t.routePlan(r)
}

// model is the client string as the plan sees it: a route's own name (a
// target without an upstream model sends it, so a fallback route sends
// its name, not the caller's), else the model the client sent.
func (p *routePlan) model(x *exchange) string {
	if p.kind == resolve.KindRoute && p.route != "" {
		return p.route
	}
	return x.model
}

// admitRoute is admit, with the context fallback: a request that the
// route's pool refuses as context_length_exceeded is admitted against its
// context fallback instead (and that one's, up to store.MaxFallbackDepth),
// which becomes x.plan. Only a route plan that is not pinned has one. A
// route that cannot take the request at all (nothing ready, draining, at
// its max_concurrency) passes it to the first of its fallback routes that
// admits it, as a failed attempt would.
func (g *Gateway) admitRoute(w http.ResponseWriter, x *exchange) (func(), *apiError) {
	release, e := g.admit(x)
	for depth := 0; e != nil && e.Code == policy.CodeContextLengthExceeded && depth < store.MaxFallbackDepth; depth++ {
		fb := x.table.ctxFallback(x.plan)
		if fb == nil {
			break
		}
		x.plan, x.facts, x.adm = fb, nil, nil
		x.fallback = fb.route
		w.Header().Set(FallbackHeader, fb.route)
		release, e = g.admit(x)
	}
	if e == nil || x.origin == nil || x.plan.pinned || !fallbackEligible(x, e) {
		return release, e
	}
	x.skip = append(x.skip, x.plan)
	plan, facts, adm := x.plan, x.facts, x.adm // the refused route's, restored when no fallback admits
	for _, fb := range x.table.fallbacks(x.origin) {
		if slices.Contains(x.skip, fb) {
			continue
		}
		x.plan, x.facts, x.adm = fb, nil, nil
		x.skip = append(x.skip, fb)
		rel, fe := g.admit(x)
		if fe != nil {
			if rel != nil {
				rel()
			}
			continue
		}
		x.fallback = fb.route
		w.Header().Set(FallbackHeader, fb.route)
		return rel, nil
	}
	x.plan, x.facts, x.adm = plan, facts, adm // the answer, its log line and span name the route that refused
	return nil, e
}

// overflowed reports whether an upstream's status may say that the prompt
// exceeds its context and the request has a context fallback to go to:
// only then is a 400 read before it is relayed.
func overflowed(x *exchange, status int) bool {
	return status == http.StatusBadRequest && x.table.ctxFallback(x.plan) != nil
}

// contextExceeded reports whether a 400 body says the prompt is too long
// for the upstream's context: OpenAI's code, or vLLM's and others' words.
func contextExceeded(body []byte) bool {
	return bytes.Contains(body, []byte(policy.CodeContextLengthExceeded)) ||
		bytes.Contains(bytes.ToLower(body), []byte("maximum context length"))
}

// errOverflow is the answer when an upstream said the prompt exceeds its
// context and no context fallback could serve: the upstream's body is not
// relayed (it was read to decide), so the gateway says it in its words.
func errOverflow() *apiError {
	return newError(http.StatusBadRequest, policy.CodeContextLengthExceeded,
		"the upstream answered that the request exceeds its context length, and no context fallback could serve it")
}

// overflowed moves a request whose upstream said the prompt exceeds its
// context (a pool whose context rolter does not know, else admission
// would have) to the route's context fallback, as admission does. It
// returns the error to answer with, nil when the fallback answered.
func (g *Gateway) overflowed(w http.ResponseWriter, r *http.Request, x *exchange, e *apiError, deadline time.Time) *apiError {
	for depth := 0; depth < store.MaxFallbackDepth; depth++ {
		fb := x.table.ctxFallback(x.plan)
		if fb == nil || slices.Contains(x.skip, fb) {
			return e
		}
		x.skip = append(x.skip, x.plan, fb)
		x.plan, x.facts, x.adm, x.translated = fb, nil, nil, nil
		release, aerr := g.admit(x)
		if aerr == nil {
			aerr = x.translate(x.translateInput())
		}
		if aerr != nil {
			if release != nil {
				release()
			}
			return aerr // its own refusal: the caller's to read
		}
		x.fallback = fb.route
		w.Header().Set(FallbackHeader, fb.route)
		next := g.forwardPlan(w, r, x, deadline)
		x.releaseAfter(release) // a stream still to relay holds it
		if next == nil || next.Code != policy.CodeContextLengthExceeded {
			return next
		}
		e = next
	}
	return e
}

// fallBack tries the fallback routes of the caller's route after every
// attempt on it failed with e, before the first byte. It returns the error
// to answer with (the last route's), nil when a fallback answered.
func (g *Gateway) fallBack(w http.ResponseWriter, r *http.Request, x *exchange, e *apiError, deadline time.Time) *apiError {
	origin := x.origin
	if origin == nil || origin.pinned || x.plan.pinned || !fallbackEligible(x, e) {
		return e
	}
	x.skip = append(x.skip, x.plan)
	for _, fb := range x.table.fallbacks(origin) {
		if !g.clock.Now().Before(deadline) {
			break // no new attempt starts after the retry deadline
		}
		if slices.Contains(x.skip, fb) {
			continue // served already, or refused at admission
		}
		x.skip = append(x.skip, fb)
		x.plan, x.facts, x.adm, x.translated = fb, nil, nil, nil
		release, aerr := g.admit(x)
		if aerr == nil {
			aerr = x.translate(x.translateInput())
		}
		if aerr != nil {
			// This fallback cannot take the request (not ready, its
			// policy refuses, at its concurrency): the next may.
			if release != nil {
				release()
			}
			g.log.Debug("fallback route skipped", "request_id", x.requestID, "route", origin.route, "fallback", fb.route, "code", aerr.Code)
			continue
		}
		x.fallback = fb.route
		w.Header().Set(FallbackHeader, fb.route)
		next := g.forwardPlan(w, r, x, deadline)
		x.releaseAfter(release) // a stream still to relay holds it
		if next == nil {
			return nil
		}
		e = next
		if !fallbackEligible(x, e) {
			break
		}
	}
	return e
}

// fallbackEligible reports whether a route's failure e may go to a
// fallback: the upstreams' or the pool's doing (unavailable, timed out,
// rate limited, refused credentials, nothing ready or free), never a 403 a
// caller's request may have earned.
func fallbackEligible(x *exchange, e *apiError) bool {
	if x.class == ClassForbidden {
		return false
	}
	switch e.status {
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return false
}

// servedMetric counts requests by the route tier and fallback route that
// served them: rolter_route_served_total{org,project,route,tier,fallback}.
func servedMetric(reg prometheus.Registerer) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "rolter_route_served_total",
		Help: "Route requests that reached a target, by the priority tier of the target that answered and the fallback route used (\"\" for none).",
	}, []string{"org", "project", "route", "tier", "fallback"})
	reg.MustRegister(c)
	return c
}

// countServed adds the request to rolter_route_served_total when a route
// target answered it.
func (g *Gateway) countServed(x *exchange, rec *store.UsageRecord) {
	if x.origin == nil || x.origin.kind != resolve.KindRoute || x.target == nil {
		return
	}
	rec.Tier, rec.Fallback = x.target.priority, x.fallback
	g.metrics.served.WithLabelValues(x.key.Project.Org.Name, x.key.Project.Name, x.origin.route,
		strconv.Itoa(x.target.priority), x.fallback).Inc()
}
