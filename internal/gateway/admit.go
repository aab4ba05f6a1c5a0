package gateway

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/rolter/rolter/internal/jsonscan"
	"github.com/rolter/rolter/internal/policy"
	"github.com/rolter/rolter/internal/readiness"
	"github.com/rolter/rolter/internal/resolve"
	"github.com/rolter/rolter/internal/store"
)

// Readiness reports providers' live state (package readiness implements
// it). Status must be cheap: it is read per request.
type Readiness interface {
	Status(providerID int64) (readiness.Status, bool)
}

// status is a provider's readiness. Without a readiness source everything
// is ready. A provider the source does not know yet is ready when it is
// configured (passive health covers it) and not ready when its metadata
// must come from upstream: never a guessed model or context.
func (g *Gateway) status(p *providerRT) readiness.Status {
	if g.ready != nil {
		if st, ok := g.ready.Status(p.id); ok {
			return st
		}
	}
	if p.upstream {
		return readiness.Status{Reason: readiness.ReasonNoProbe, Class: readiness.ClassNotProbed}
	}
	return readiness.Status{Ready: true}
}

// contextOf is a ready target's context: discovered for upstream-metadata
// providers, else the target's or the provider's configured limit; 0 when
// unknown.
func contextOf(tg *targetRT, st readiness.Status) int {
	if tg.provider.upstream {
		return st.Facts.Context
	}
	if tg.ctxLimit > 0 {
		return tg.ctxLimit
	}
	return tg.provider.contextLimit
}

// admission is what admit decided per policy; forward reads it to send
// each attempt the body its own target's policy admits.
type admission struct {
	req  policy.Request
	lim  policy.Limits
	pool int // the pool's context; 0: unknown
	// results are, per distinct combined policy of the plan's routable
	// targets (planFacts.policies), what policy.Decide made of the body.
	results  []admitted
	policyOf []int // per target: index into results; -1 for a target not routable (planFacts.policyOf)
	base     int   // the result whose body admit returned (serve forwards it)
}

// of is the index of target i's result; -1 when the target is not
// routable or its policy refuses the request.
func (a *admission) of(i int) int {
	j := a.policyOf[i]
	if j < 0 || a.results[j].refusal != nil {
		return -1
	}
	return j
}

type admitted struct {
	policy  store.Policy
	clamp   policy.Clamp // the edits the policy's output ceiling makes
	refusal *policy.Refusal
}

// unroutable says why a ready target cannot be sent this request, in words
// fit for any client (no upstream text, no upstream model id); "" when it
// can. design 003: on an upstream-metadata provider the model sent is the
// discovered one, so a target configured with another model is never
// forwarded on a guess. A target whose upstream said it does not serve its
// model is stale until a probe shows the model again.
func (g *Gateway) unroutable(tg *targetRT, st readiness.Status, model string) string {
	if tg.provider.upstream && tg.id.model != "" && tg.id.model != st.Facts.ModelID {
		return "a target of provider " + quoteModel(tg.provider.slug) + " names a model the provider does not serve (" + reasonModelMismatch + ")"
	}
	if len(st.Stale) > 0 {
		if _, stale := st.Stale[sendModel(tg, st, model)]; stale {
			return "provider " + quoteModel(tg.provider.slug) + " answered that it no longer serves the configured model (" + reasonStale + ")"
		}
	}
	return ""
}

// Reason classes of targets that are not routable although their provider
// is ready; the admin views carry the details.
const (
	reasonModelMismatch = "model_mismatch"
	reasonStale         = "model_not_served"
)

// sendModel is the model id an attempt sends to tg: the discovered id on an
// upstream-metadata provider (design 003: always, whatever a target says),
// else the target's upstream model, else the client's string.
func sendModel(tg *targetRT, st readiness.Status, client string) string {
	switch {
	case tg.provider.upstream:
		return st.Facts.ModelID
	case tg.id.model != "":
		return tg.id.model
	}
	return client
}

// admit marks targets that are not routable, applies the policy and context
// admission per target, and takes the address's concurrency slot. A target
// is governed by the strictest of the address's own policy (route or
// group) and its provider's; one whose policy refuses the request is
// skipped, and when every routable target refuses, the first refusal is the
// answer. It decides per policy how the body's output limit is clamped or
// defaulted (x.adm); nothing is copied here: each attempt applies its
// target's edits (requestBody.splice). release, when set, must be called when the request ends.
func (g *Gateway) admit(x *exchange) (func(), *apiError) {
	plan := x.plan
	f := plan.facts
	if f == nil { // a provider or group address: its plan is the request's own
		f = g.facts(plan, plan.model(x))
		plan.facts = f
	}
	if f.ready == 0 {
		// Nothing routable as of the last rebuild: read readiness afresh
		// (only on this path), for the reason's current class and in case
		// a provider became ready since.
		f = g.facts(plan, plan.model(x))
	}
	x.facts = f
	if f.ready == 0 && f.draining > 0 {
		return nil, poolDraining(x.model)
	}
	if f.ready == 0 {
		return nil, newError(http.StatusServiceUnavailable, "metadata_unavailable", f.reason)
	}
	if x.endpoint != "/embeddings" && x.endpoint != countTokens { // these have no output to bound
		req, err := x.body.inspect.Request()
		if err != nil {
			var ref *policy.Refusal
			if errors.As(err, &ref) { // its own stable code, e.g. invalid_value for max_tokens
				return nil, newError(ref.Status, ref.Code, ref.Message)
			}
			return nil, newError(http.StatusBadRequest, "invalid_request", "the request body could not be read: "+err.Error())
		}
		// One decision per distinct policy, not per target: targets that
		// share a combined policy share one body. A target whose policy
		// refuses is skipped (another may serve); when every policy
		// refuses, the first target's refusal is the answer.
		a := &admission{req: req, lim: x.body.inspect.Limits(), pool: f.pool, policyOf: f.policyOf,
			results: make([]admitted, len(f.policies)), base: -1}
		var first *policy.Refusal
		for j, p := range f.policies {
			clamp, refusal := policy.Decide(a.req, a.lim, p, a.pool)
			a.results[j] = admitted{policy: p, clamp: clamp, refusal: refusal}
			switch {
			case refusal != nil && first == nil:
				first = refusal
			case refusal == nil && a.base < 0:
				a.base = j
			}
		}
		if a.base < 0 {
			return nil, newError(first.Status, first.Code, first.Message)
		}
		x.adm = a
	}
	// max_concurrency of the route or group bounds every endpoint of the
	// address; each provider's own bounds its attempts (forward).
	if plan.limiter != nil {
		if !plan.limiter.Acquire() {
			what := "route " + quoteModel(plan.route)
			if plan.kind != resolve.KindRoute {
				what = "group of " + quoteModel(x.model)
			}
			e := newError(http.StatusTooManyRequests, "concurrency_limited",
				what+" is at its max_concurrency of "+strconv.Itoa(plan.policy.MaxConcurrency)+" requests in flight")
			e.retryAfter = 1
			return nil, e
		}
		return plan.limiter.Release, nil
	}
	return nil, nil
}

// admittedBody is the client's body as target policy j admitted it (the
// output clamp made), for a translation; the body itself when there is
// nothing to clamp.
func (x *exchange) admittedBody(j int) []byte {
	if x.adm == nil || j < 0 {
		return x.body.raw
	}
	c := &x.adm.results[j].clamp
	if !c.Changes() {
		return x.body.raw
	}
	return jsonscan.Splice(nil, x.body.raw, c.Edits(nil))
}

// clampFor is target i's output clamp; nil when none applies.
func (x *exchange) clampFor(i int) *policy.Clamp {
	j := -1
	if x.adm != nil {
		j = x.adm.of(i)
	}
	if j < 0 {
		return nil
	}
	return &x.adm.results[j].clamp
}

// translateInput is what translate reads: the body as the first routable
// target's policy admitted it, copied only when some target needs a
// translation and the clamp changes the body.
func (x *exchange) translateInput() []byte {
	if x.adm == nil {
		return x.body.raw
	}
	if x.translator() != nil {
		return x.admittedBody(x.adm.base)
	}
	return x.body.raw
}
