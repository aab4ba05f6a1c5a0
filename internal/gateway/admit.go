package gateway

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/rolter/rolter/internal/metadata"
	"github.com/rolter/rolter/internal/policy"
)

// Readiness reports providers' live state (package metadata implements
// it). Status must be cheap: it is read per request.
type Readiness interface {
	Status(providerID int64) (metadata.Status, bool)
}

// status is a provider's readiness. Without a readiness source everything
// is ready. A provider the source does not know yet is ready when it is
// configured (passive health covers it) and not ready when its metadata
// must come from upstream: never a guessed model or context.
func (g *Gateway) status(p *providerRT) metadata.Status {
	if g.ready != nil {
		if st, ok := g.ready.Status(p.id); ok {
			return st
		}
	}
	if p.upstream {
		return metadata.Status{Reason: metadata.ReasonNoProbe, Class: metadata.ClassNotProbed}
	}
	return metadata.Status{Ready: true}
}

// contextOf is a ready target's context: discovered for upstream-metadata
// providers, else the target's or the provider's configured limit; 0 when
// unknown.
func contextOf(tg *targetRT, st metadata.Status) int {
	if tg.provider.upstream {
		return st.Facts.Context
	}
	if tg.ctxLimit > 0 {
		return tg.ctxLimit
	}
	return tg.provider.contextLimit
}

// admit marks targets that are not routable, applies the route policy and
// context admission, and takes a concurrency slot. It may rewrite the body
// (max tokens defaulted or clamped). release, when set, must be called when
// the request ends.
func (g *Gateway) admit(x *exchange, body []byte) ([]byte, func(), *apiError) {
	plan := x.plan
	x.down = make([]bool, len(plan.targets))
	pool, ready := 0, 0
	reason := ""
	for i, tg := range plan.targets {
		st := g.status(tg.provider)
		if !st.Ready {
			x.down[i] = true
			if reason == "" {
				// The class only: st.Reason may quote an upstream's error
				// text (a connection string, an internal address). The
				// details are logged and in the admin readiness view.
				reason = "provider " + quoteModel(tg.provider.slug) + " is not ready (" + string(st.Class) +
					"); the operator's readiness view says why"
			}
			continue
		}
		ready++
		// A pool advertises and admits against its smallest member, so
		// identical requests behave the same on any member (design 002).
		if c := contextOf(tg, st); c > 0 && (pool == 0 || c < pool) {
			pool = c
		}
	}
	if ready == 0 {
		return nil, nil, newError(http.StatusServiceUnavailable, "metadata_unavailable", reason)
	}
	out := body
	if x.endpoint != "/embeddings" && x.endpoint != countTokens { // these have no output to bound
		req, err := policy.Inspect(body, x.endpoint)
		if err != nil {
			var ref *policy.Refusal
			if errors.As(err, &ref) { // its own stable code, e.g. invalid_value for max_tokens
				return nil, nil, newError(ref.Status, ref.Code, ref.Message)
			}
			return nil, nil, newError(http.StatusBadRequest, "invalid_request", "the request body could not be read: "+err.Error())
		}
		var refusal *policy.Refusal
		if out, refusal = policy.Admit(body, x.endpoint, req, plan.policy, pool); refusal != nil {
			return nil, nil, newError(refusal.Status, refusal.Code, refusal.Message)
		}
	}
	// max_concurrency bounds every endpoint of the route.
	if plan.limiter != nil {
		if !plan.limiter.Acquire() {
			e := newError(http.StatusTooManyRequests, "concurrency_limited",
				"route "+quoteModel(plan.route)+" is at its max_concurrency of "+strconv.Itoa(plan.policy.MaxConcurrency)+" requests in flight")
			e.retryAfter = 1
			return nil, nil, e
		}
		return out, plan.limiter.Release, nil
	}
	return out, nil, nil
}
