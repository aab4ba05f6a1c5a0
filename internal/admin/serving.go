package admin

import (
	"cmp"
	"context"
	"slices"

	"github.com/rolter/rolter/internal/snapshot"
)

// Serving is what an org serves now, read from the routing snapshot the
// request path uses (no store query): its live providers with readiness,
// its groups, one project's routes with their targets' readiness, and
// each provider's catalog (its configured models and the upstream models
// the org's routes send it). It is the source of an address list such as
// the web console's Models page, which must stay fast with 10,000 routes.
type Serving struct {
	Providers []ProviderView
	Groups    []GroupView
	// Routes are the project's, by model.
	Routes []RouteView
	// Catalog maps a provider slug to the models it is known to serve,
	// sorted; empty: any model.
	Catalog map[string][]string
}

// Serving reads the org's serving state for project. Without a snapshot
// (a process that serves no requests) it is ErrUnavailable.
func (s *Service) Serving(ctx context.Context, org, project string) (Serving, error) {
	if err := CheckOrgScope(ctx, org); err != nil {
		return Serving{}, err
	}
	sn := s.currentSnapshot()
	if sn == nil {
		return Serving{}, &Error{Kind: ErrUnavailable, Code: CodeStoreUnavailable, Message: "no routing snapshot is loaded yet; retry"}
	}
	o := sn.Org(org)
	if o == nil {
		return Serving{}, notFound("org %s not found", quote(org))
	}
	if err := checkOrgID(ctx, &o.Org); err != nil {
		return Serving{}, err
	}
	pj := o.Projects.At(project)
	if pj == nil {
		return Serving{}, notFound("project %s not found in org %s", quote(project), quote(org))
	}
	out := Serving{Catalog: make(map[string][]string, o.Providers.Len())}
	for slug, p := range o.Providers.All() {
		out.Providers = append(out.Providers, s.providerView(p.Provider))
		out.Catalog[slug] = p.Catalog
	}
	slices.SortFunc(out.Providers, func(a, b ProviderView) int { return cmp.Compare(a.Slug, b.Slug) })
	for _, g := range o.Groups.All() {
		out.Groups = append(out.Groups, groupView(g.Group))
	}
	slices.SortFunc(out.Groups, func(a, b GroupView) int { return cmp.Compare(a.Slug, b.Slug) })
	out.Routes = make([]RouteView, 0, pj.Routes.Len())
	for _, rt := range pj.Routes.All() {
		out.Routes = append(out.Routes, s.targetReadiness(org, routeView(rt.Row())))
	}
	slices.SortFunc(out.Routes, func(a, b RouteView) int { return cmp.Compare(a.Model, b.Model) })
	return out, nil
}

// currentSnapshot is the serving snapshot, or nil in a process that serves
// no requests or before the first load.
func (s *Service) currentSnapshot() *snapshot.Snapshot {
	if s.snap == nil {
		return nil
	}
	return s.snap.Current()
}
