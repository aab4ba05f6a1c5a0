package readiness

import (
	"context"
	"encoding/json"
	"maps"
)

// Stale models.
//
// A configured target whose upstream answers that it does not serve the
// model (a 404 "model_not_found" or "does not exist") has a stale
// configuration: the model was swapped or renamed at an unchanged endpoint.
// The gateway fails over and calls MarkStale; the mark takes that
// (provider, model) out of routing, and shows in Status.Stale (the admin
// readiness view), until a probe of the provider lists the model again:
// while a provider has marks, each of its probes also reads GET
// {base}/models and clears the marks of the models it lists. A
// configuration change that resets the provider's state (kind, base URL,
// metadata source) clears them too.

// maxStale bounds the marks of one provider. Only configured models are
// marked, so the bound is never reached by honest configurations; beyond it
// a mark is dropped (the gateway still fails over per request).
const maxStale = 1024

// MarkStale records that the provider's upstream said it does not serve
// model, with reason for the admin view. It reports whether the mark is new;
// a new mark is announced like any other change (OnChange). Safe for
// concurrent use; it takes no lock a probe holds.
func (c *Cache) MarkStale(providerID int64, model, reason string) bool {
	e, ok := (*c.entries.Load())[providerID]
	if !ok {
		return false
	}
	e.staleMu.Lock()
	cur := e.stale.Load()
	if _, dup := (*cur)[model]; dup || len(*cur) >= maxStale {
		e.staleMu.Unlock()
		return false
	}
	next := maps.Clone(*cur)
	if next == nil {
		next = map[string]string{}
	}
	next[model] = reason
	e.stale.Store(&next)
	e.staleMu.Unlock()
	c.log.Warn("metadata: upstream does not serve a configured model; target out of routing until a probe lists it",
		"provider", providerID, "model", model)
	c.announce()
	return true
}

// clearListed drops the marks of the models a probe saw listed, and
// reports whether any went.
func (e *entry) clearListed(listed func(model string) bool) bool {
	e.staleMu.Lock()
	defer e.staleMu.Unlock()
	cur := *e.stale.Load()
	var next map[string]string
	for m, why := range cur {
		if listed(m) {
			continue
		}
		if next == nil {
			next = map[string]string{}
		}
		next[m] = why
	}
	if len(next) == len(cur) {
		return false
	}
	e.stale.Store(&next)
	return true
}

// recheckStale lists the provider's models when it has stale marks, and
// clears the marks of those listed. It reports whether any mark went. A
// failed listing keeps the marks. models, when not nil, is a GET /models
// body already read (a fed reading): it is used instead of a request.
func (c *Cache) recheckStale(ctx context.Context, e *entry, p Provider, o observation, models []byte) bool {
	if len(*e.stale.Load()) == 0 {
		return false
	}
	if p.Upstream {
		// The probe has just read the one model it serves.
		if !o.ok() {
			return false
		}
		return e.clearListed(func(m string) bool { return m == o.facts.ModelID })
	}
	body := models
	if body == nil {
		var err error
		// A request after the probe's: the last, for a self-hosted server.
		if body, _, err = c.get(ctx, p, p.BaseURL+"/models", c.closeConns && selfHosted(p.Kind)); err != nil {
			return false
		}
	}
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if json.Unmarshal(body, &list) != nil {
		return false
	}
	ids := make(map[string]bool, len(list.Data))
	for _, d := range list.Data {
		ids[d.ID] = true
	}
	return e.clearListed(func(m string) bool { return ids[m] })
}
