package gateway

import (
	"fmt"
	"strings"
	"time"

	"github.com/rolter/rolter/internal/balancer"
	"github.com/rolter/rolter/internal/cooldown"
	"github.com/rolter/rolter/internal/snapshot"
)

// table is the gateway's view of one snapshot: everything a request needs,
// resolved once per configuration change. Runtime state (breakers, in-flight
// counts, latency) lives in objects carried over from the previous table by
// identity, so a configuration change does not forget health.
type table struct {
	snap      *snapshot.Snapshot
	routes    map[*snapshot.Route]*routePlan
	providers map[int64]*providerRT  // by provider id
	targets   map[targetID]*targetRT // by (provider, upstream model)
	keys      map[int64]*keyRT       // by provider key id
}

// routePlan is a route ready to balance.
type routePlan struct {
	route    *snapshot.Route
	selector balancer.Selector
	targets  []*targetRT
	weights  []int // per target, from the route
}

// targetID is the identity of a deployment: a provider serving a model.
// Routes that send the same model to the same provider share its health.
type targetID struct {
	provider int64
	model    string
}

// targetRT is the runtime state of one deployment.
type targetRT struct {
	id       targetID
	provider *providerRT
	stats    *balancer.Stats
	breaker  *cooldown.Breaker
}

// providerRT is a provider with its endpoint facts and key pool.
type providerRT struct {
	id               int64
	slug             string
	kind             string
	base             string // base_url without trailing slash
	firstByteTimeout time.Duration
	idleTimeout      time.Duration
	keys             []*keyRT
}

// keyRT is one pool key; auth is the precomputed header value.
type keyRT struct {
	id      int64
	weight  int
	auth    string
	breaker *cooldown.Breaker
}

// buildTable derives a table from s, reusing runtime state from prev.
func (g *Gateway) buildTable(s *snapshot.Snapshot, prev *table) *table {
	t := &table{snap: s, routes: map[*snapshot.Route]*routePlan{}, providers: map[int64]*providerRT{},
		targets: map[targetID]*targetRT{}, keys: map[int64]*keyRT{}}
	if prev == nil {
		prev = &table{targets: map[targetID]*targetRT{}, keys: map[int64]*keyRT{}}
	}
	provider := func(p *snapshot.Provider) *providerRT {
		if rt := t.providers[p.ID]; rt != nil {
			return rt
		}
		rt := &providerRT{id: p.ID, slug: p.Slug, kind: p.Kind, base: strings.TrimRight(p.BaseURL, "/"),
			firstByteTimeout: g.cfg.FirstByteTimeout, idleTimeout: g.cfg.IdleTimeout}
		if d := time.Duration(p.Settings.FirstByteTimeout); d > 0 {
			rt.firstByteTimeout = d
		}
		if d := time.Duration(p.Settings.IdleTimeout); d > 0 {
			rt.idleTimeout = d
		}
		for _, k := range p.Keys {
			kr := &keyRT{id: k.ID, weight: k.Weight, auth: "Bearer " + k.Secret.Reveal()}
			if old := prev.keys[k.ID]; old != nil {
				kr.breaker = old.breaker
			} else {
				kr.breaker = cooldown.New(g.cfg.Cooldown, g.clock)
			}
			rt.keys = append(rt.keys, kr)
			t.keys[k.ID] = kr
		}
		t.providers[p.ID] = rt
		return rt
	}
	target := func(p *snapshot.Provider, model string) *targetRT {
		id := targetID{p.ID, model}
		if tr := t.targets[id]; tr != nil {
			return tr
		}
		tr := &targetRT{id: id, provider: provider(p)}
		if old := prev.targets[id]; old != nil {
			tr.stats, tr.breaker = old.stats, old.breaker
		} else {
			tr.stats, tr.breaker = &balancer.Stats{}, cooldown.New(g.cfg.Cooldown, g.clock)
		}
		t.targets[id] = tr
		return tr
	}
	s.EachRoute(func(r *snapshot.Route) {
		sel, err := balancer.New(r.Strategy)
		if err != nil { // the admin API validates strategies; stay up regardless
			g.log.Error("route has an unknown strategy; using weighted", "route", r.Model, "err", err)
			sel, _ = balancer.New("")
		}
		plan := &routePlan{route: r, selector: sel}
		for _, tg := range r.Targets {
			plan.targets = append(plan.targets, target(tg.Provider, tg.UpstreamModel))
			plan.weights = append(plan.weights, tg.Weight)
		}
		t.routes[r] = plan
	})
	return t
}

func (t *targetRT) String() string { return fmt.Sprintf("%s/%s", t.provider.slug, t.id.model) }
