package gateway

import (
	"context"
	"net/http"
	"time"

	"github.com/rolter/rolter/internal/money"
	"github.com/rolter/rolter/internal/snapshot"
	"github.com/rolter/rolter/internal/spend"
	"github.com/rolter/rolter/internal/store"
)

// Spend on the request path: checkBudget runs after resolve and before
// anything is forwarded; charge runs in account, once per request, and
// prices the tokens at the target that served them.

const codeBudgetExceeded = "budget_exceeded"

// budgets are the budgets that apply to key k: its own, then its
// project's. nil when neither has one (no allocation).
func budgets(k *snapshot.VirtualKey) []spend.Limit {
	var out []spend.Limit
	if k.Budget.Period != "" {
		out = append(out, spend.Limit{Scope: spend.Scope{Kind: spend.KindKey, ID: k.ID}, Name: k.Name, Budget: k.Budget})
	}
	if pj := k.Project; pj != nil && pj.Budget.Period != "" {
		out = append(out, spend.Limit{Scope: spend.Scope{Kind: spend.KindProject, ID: pj.ID}, Name: pj.Name, Budget: pj.Budget})
	}
	return out
}

// checkBudget refuses with 429 budget_exceeded when the key's or its
// project's budget for the current period is spent. The answer names the
// reset time in the message, in Retry-After (seconds) and in
// x-rolter-budget-reset (RFC 3339).
func (g *Gateway) checkBudget(w http.ResponseWriter, r *http.Request, x *exchange) *apiError {
	if g.spend == nil {
		return nil
	}
	limits := budgets(x.key)
	if limits == nil {
		return nil
	}
	ex := g.spend.Check(r.Context(), limits)
	if ex == nil {
		return nil
	}
	e := newError(http.StatusTooManyRequests, codeBudgetExceeded, ex.Error())
	e.retryAfter = max(1, int((ex.Reset.Sub(g.clock.Now())+time.Second-1)/time.Second))
	w.Header().Set("X-Rolter-Budget-Reset", ex.Reset.UTC().Format(time.RFC3339))
	return e
}

// prices are what the target's tokens cost: its own prices, else its
// provider's; nil when neither is priced.
func (t *targetRT) pricing() *store.Prices {
	if t.prices != nil {
		return t.prices
	}
	return t.provider.prices
}

// charge sets the record's cost and adds it to the budgets. A request
// that reached no provider costs 0; one served by an unpriced target has
// no cost (nil): its tokens are counted, never priced at zero.
func (g *Gateway) charge(x *exchange, rec *store.UsageRecord) {
	var cost money.Amount
	if x.target != nil {
		p := x.target.pricing()
		if p == nil {
			return
		}
		cost = money.Cost(x.promptTokens, x.outputTokens, p.Input, p.Output)
	}
	rec.Cost = &cost
	if g.spend != nil && cost > 0 {
		if limits := budgets(x.key); limits != nil {
			g.spend.Add(context.Background(), limits, cost)
		}
	}
}
