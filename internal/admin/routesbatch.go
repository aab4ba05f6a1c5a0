package admin

import (
	"context"

	"github.com/rolter/rolter/internal/store"
)

// Batched route creates (issue 21): an apply that creates many routes of
// one project (an import of 10,000) checks each exactly as CreateRoute
// does, with the same functions, but reads what those checks need once
// per batch instead of once per route (the org and project, each provider
// once by slug, the project's fleet hosts, its fallback graph), and
// writes the checked routes a batch at a time (routesWriter). One route
// created through CreateRoute took about a dozen statements (savepoints,
// lookups, the inserts); a batch of routeBatchSize takes a handful.

// routeBatchSize is how many checked routes a routeBatch writes at once.
const routeBatchSize = 1000

// routesWriter is the store's bulk insert of routes, with the contract of
// CreateRoute for each: the routes and their targets are inserted in one
// transaction (a savepoint of the caller's), their ids and times set; a
// model taken in its project fails the whole call with the error
// CreateRoute gives. A store without it gets one CreateRoute per route.
type routesWriter interface {
	CreateRoutes(ctx context.Context, rs []*store.Route) error
}

// routeBatch creates routes in one project of one org.
type routeBatch struct {
	s       *Service
	org     *store.Org
	project *store.Project
	// providers are the org's providers looked up so far, by slug: nil
	// for a slug with no live provider; allProviders when they are all
	// of them (readProviders).
	providers    map[string]*store.Provider
	allProviders bool
	// pools are the project's live fleet hosts by model; nil until read.
	pools map[string][]store.Host
	// graph is the project's fallback graph (checkFallbackGraph),
	// pending routes included; nil until a route with fallbacks needs
	// it.
	graph map[string][]string
	// pending are the routes checked and not yet written.
	pending []*store.Route
}

// preloadProviders is how many routes a batch must be about to create for
// it to read every provider of the org at once (a query per 1,000), not
// each one its routes name (a query or two each).
const preloadProviders = 100

// newRouteBatch starts a batch of creates in org's project, which must
// exist; routes is how many it is about to create.
func (s *Service) newRouteBatch(ctx context.Context, org, project string, routes int) (*routeBatch, error) {
	o, pj, err := s.project(ctx, org, project)
	if err != nil {
		return nil, err
	}
	b := &routeBatch{s: s, org: o, project: pj, providers: map[string]*store.Provider{}}
	if routes >= preloadProviders {
		if err := b.readProviders(ctx); err != nil {
			return nil, err
		}
	}
	return b, nil
}

// readProviders reads every provider of the org; a slug then not found
// has none (a deleted one is nil, as liveProviderBySlug has it).
func (b *routeBatch) readProviders(ctx context.Context) error {
	page := store.Page{Limit: 1000}
	for {
		rows, err := b.s.st.ListProviders(ctx, b.org.ID, page)
		if err != nil {
			return fromStore(err, "providers")
		}
		for i := range rows {
			p := &rows[i]
			if p.DeletedAt != nil {
				p = nil
			}
			b.providers[rows[i].Slug] = p
		}
		if len(rows) < page.Limit {
			b.allProviders = true
			return nil
		}
		page.After = rows[len(rows)-1].ID
	}
}

// add checks in as CreateRoute does and queues it; nothing is written
// until flush. The checks see the queued routes as written.
func (b *routeBatch) add(ctx context.Context, in RouteInput) error {
	s, r := b.s, newRoute(b.project, in)
	if err := resolveRouteWith(r, in.Targets, func(slug string) (*store.Provider, error) { return b.provider(ctx, slug) }); err != nil {
		return err
	}
	edges, err := checkFallbackFields(r)
	if err != nil {
		return err
	}
	if len(edges) > 0 || b.graph != nil {
		if err := b.readGraph(ctx); err != nil {
			return err
		}
		prev, had := b.graph[r.Model]
		if err := checkFallbackGraph(r, edges, b.graph); err != nil {
			if had {
				b.graph[r.Model] = prev
			} else {
				delete(b.graph, r.Model)
			}
			return err
		}
	}
	if b.pools == nil {
		if err := b.readPools(ctx); err != nil {
			return err
		}
	}
	if hosts := b.pools[r.Model]; len(hosts) > 0 {
		if err := s.checkPoolTargets(ctx, b.org.ID, r, nil, hosts); err != nil {
			return err
		}
	}
	b.pending = append(b.pending, r)
	return nil
}

// provider is the live provider of the org with slug, read once.
func (b *routeBatch) provider(ctx context.Context, slug string) (*store.Provider, error) {
	if p, ok := b.providers[slug]; ok || b.allProviders {
		return p, nil
	}
	p, err := b.s.liveProviderBySlug(ctx, b.org.ID, slug)
	if err != nil {
		return nil, err
	}
	b.providers[slug] = p
	return p, nil
}

// readGraph reads the project's fallback graph, with the pending routes.
func (b *routeBatch) readGraph(ctx context.Context) error {
	if b.graph != nil {
		return nil
	}
	rs, err := b.s.allRoutes(ctx, b.project.ID)
	if err != nil {
		return err
	}
	b.graph = make(map[string][]string, len(rs)+len(b.pending))
	for i := range rs {
		b.graph[rs[i].Model] = fallbackEdges(&rs[i])
	}
	for _, r := range b.pending {
		b.graph[r.Model] = fallbackEdges(r)
	}
	return nil
}

// readPools reads the live hosts of the project's pools
// (store.Store.ListPoolHosts, for every model at once).
func (b *routeBatch) readPools(ctx context.Context) error {
	hosts, err := allHosts(ctx, b.s.st, b.org.ID)
	if err != nil {
		return err
	}
	b.pools = map[string][]store.Host{}
	for _, h := range hosts {
		if h.ProjectID == b.project.ID && h.State != store.HostRetired {
			b.pools[h.ModelName] = append(b.pools[h.ModelName], h)
		}
	}
	return nil
}

// flush writes the pending routes, in one store call when the store has
// routesWriter; on failure nothing of them is written (CreateOnly's
// caller then creates them one at a time, to tell which failed and why).
// They are pending no more either way.
func (b *routeBatch) flush(ctx context.Context) ([]*store.Route, error) {
	rs := b.pending
	b.pending = nil
	if len(rs) == 0 {
		return nil, nil
	}
	var err error
	if w, ok := b.s.st.(routesWriter); ok {
		err = w.CreateRoutes(ctx, rs)
	} else {
		err = b.s.st.Tx(ctx, func(st store.Store) error {
			for _, r := range rs {
				if err := st.CreateRoute(ctx, r); err != nil {
					return err
				}
			}
			return nil
		})
	}
	if err != nil {
		// The graph may hold routes that were not written.
		b.graph = nil
	}
	return rs, b.s.committed(ctx, fromStore(err, "route"))
}

// newRoute is the route in creates in project, before its checks.
func newRoute(pj *store.Project, in RouteInput) *store.Route {
	return &store.Route{ProjectID: pj.ID, Model: in.Model, Strategy: in.Strategy, Policy: in.Policy,
		RPMLimit: in.RPMLimit, TPMLimit: in.TPMLimit, Fallbacks: in.Fallbacks, ContextFallback: in.ContextFallback}
}
