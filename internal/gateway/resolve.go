package gateway

import (
	"net/http"
	"strings"
	"time"

	"github.com/rolter/rolter/internal/resolve"
	"github.com/rolter/rolter/internal/secret"
	"github.com/rolter/rolter/internal/snapshot"
)

// authenticate finds the caller's virtual key: Authorization: Bearer or
// x-api-key (Anthropic SDKs send the latter).
func authenticate(s *snapshot.Snapshot, r *http.Request, now time.Time) (*snapshot.VirtualKey, bool) {
	tok := r.Header.Get("x-api-key")
	if v, ok := secret.Bearer(r.Header.Get("Authorization")); ok {
		tok = v
	}
	if tok == "" || s == nil {
		return nil, false
	}
	return s.Authenticate(tok, now)
}

// allowed checks the key's model allowlist against the address the client
// sent. An entry is an exact model, "prefix/*" for everything under a
// provider or group slug, or "*".
func allowed(k *snapshot.VirtualKey, model string) bool {
	if len(k.Models) == 0 {
		return true
	}
	for _, m := range k.Models {
		if m == model || m == "*" {
			return true
		}
		if p, ok := strings.CutSuffix(m, "/*"); ok && strings.HasPrefix(model, p+"/") {
			return true
		}
	}
	return false
}

// resolve maps the client's model string to a plan in the key's scope
// (package resolve has the rules), then applies x-rolter-provider.
func (g *Gateway) resolve(t *table, k *snapshot.VirtualKey, model, pin string) (*routePlan, *apiError) {
	a, ok := resolve.Resolve(k.Project, model)
	var plan *routePlan
	if ok {
		plan = g.plan(t, a)
	}
	if plan == nil || len(plan.targets) == 0 {
		return nil, newError(http.StatusNotFound, "model_not_found",
			"model "+quoteModel(model)+" does not exist or has no serving target; GET /v1/models lists the models this key can use")
	}
	if a.Kind == resolve.KindProvider {
		// design 003: a pinned upstream-metadata provider serves its one
		// discovered model; another name is never forwarded on a guess.
		if p := plan.targets[0].provider; p.upstream {
			if st := g.status(p); st.Ready && st.Facts.ModelID != a.Model {
				return nil, newError(http.StatusNotFound, "model_not_found",
					"provider "+quoteModel(p.slug)+" serves "+quoteModel(st.Facts.ModelID)+", not "+quoteModel(a.Model)+
						"; address it as "+quoteModel(p.slug+"/"+st.Facts.ModelID))
			}
		}
	}
	if pin != "" {
		if plan = plan.only(pin); len(plan.targets) == 0 {
			return nil, newError(http.StatusBadRequest, "provider_not_in_route",
				"x-rolter-provider names "+quoteModel(pin)+", which serves no target of "+quoteModel(model))
		}
	}
	return plan, nil
}

func quoteModel(m string) string {
	if len(m) > 120 {
		m = m[:120] + "…"
	}
	return `"` + m + `"`
}
