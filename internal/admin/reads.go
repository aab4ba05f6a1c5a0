package admin

import (
	"context"
	"errors"
	"strconv"

	"github.com/rolter/rolter/internal/snapshot"
	"github.com/rolter/rolter/internal/store"
)

// The Service's reads. Every view the admin API, the web UI and the CLI
// show comes from these methods, so a scope rule or a view change holds on
// all of them; no caller reads the store itself.

// PageRequest asks for one page of a list: at most Limit rows (0: the
// default, 100; at most 1000) after Cursor, the NextCursor of the previous
// page ("" for the first).
type PageRequest struct {
	Limit  int
	Cursor string
}

// Page is one page of a list and the cursor of the next ("" on the last).
type Page[T any] struct {
	Data       []T    `json:"data"`
	NextCursor string `json:"next_cursor,omitempty"`
}

const (
	defaultLimit = 100
	maxLimit     = 1000
)

// LimitRule and cursorRule are the messages of a bad page request.
// LimitRule is exported for a layer that parses the limit from text (the
// admin API's ?limit=) and refuses what is not a number the same way.
var (
	LimitRule  = "must be an integer from 1 to " + strconv.Itoa(maxLimit)
	cursorRule = "is not a cursor this API returned"
)

// check validates the request into fe and returns the store page: one row
// more than the limit, so that the answer knows whether a next page exists.
func (p PageRequest) check(fe fieldErrors) (store.Page, int) {
	limit := p.Limit
	switch {
	case limit == 0:
		limit = defaultLimit
	case limit < 1 || limit > maxLimit:
		fe.add("limit", "%s", LimitRule)
	}
	var after int64
	if p.Cursor != "" {
		n, err := strconv.ParseInt(p.Cursor, 10, 64)
		if err != nil || n < 0 {
			fe.add("cursor", "%s", cursorRule)
		}
		after = n
	}
	return store.Page{Limit: limit + 1, After: after}, limit
}

// Problems names, by field, what is wrong with p, as a list call would
// report it; empty when nothing is.
func (p PageRequest) Problems() map[string]string {
	fe := fieldErrors{}
	p.check(fe)
	return fe
}

// paginate trims rows to limit and sets the cursor from the last row's id.
func paginate[S, T any](rows []S, limit int, id func(S) int64, view func(S) T) Page[T] {
	out := Page[T]{Data: make([]T, 0, min(len(rows), limit))}
	if len(rows) > limit {
		rows = rows[:limit]
		out.NextCursor = strconv.FormatInt(id(rows[len(rows)-1]), 10)
	}
	for _, r := range rows {
		out.Data = append(out.Data, view(r))
	}
	return out
}

// listUnder reads one page of the rows under parent (an org's or a
// project's id) and shows them with view: the shape of every list.
func listUnder[S, T any](ctx context.Context, pr PageRequest, what string, parent int64,
	rows func(context.Context, int64, store.Page) ([]S, error), id func(S) int64, view func(S) T) (Page[T], error) {
	fe := fieldErrors{}
	page, limit := pr.check(fe)
	if err := fe.err(); err != nil {
		return Page[T]{}, err
	}
	got, err := rows(ctx, parent, page)
	if err != nil {
		return Page[T]{}, fromStore(err, what)
	}
	return paginate(got, limit, id, view), nil
}

// Authorize checks a presented admin token against the serving snapshot
// (so a store outage does not lock operators out) and returns its scope.
func (s *Service) Authorize(token string) (snapshot.AdminScope, bool) {
	if s.snap == nil {
		return snapshot.AdminScope{}, false
	}
	snap := s.snap.Current()
	if snap == nil {
		return snapshot.AdminScope{}, false
	}
	return snap.AdminAuthorize(token, s.now())
}

// requireGlobal refuses an org-scoped caller what only a global token may
// do, as not found (an org token must not learn what exists beyond its
// org).
func requireGlobal(ctx context.Context, what string) error {
	if !ScopeOf(ctx).Global() {
		return notFound("%s not found", what)
	}
	return nil
}

// ListOrgs lists the orgs the caller may see: every org for a global
// token, its own for an org token.
func (s *Service) ListOrgs(ctx context.Context, pr PageRequest) (Page[OrgView], error) {
	fe := fieldErrors{}
	page, limit := pr.check(fe)
	if err := fe.err(); err != nil {
		return Page[OrgView]{}, err
	}
	var rows []store.Org
	var err error
	if sc := ScopeOf(ctx); sc.Global() {
		rows, err = s.st.ListOrgs(ctx, page)
	} else {
		o, gerr := s.st.GetOrg(ctx, sc.Org)
		switch {
		case gerr == nil && o.ID == sc.OrgID && o.ID > page.After:
			rows = []store.Org{*o}
		case gerr != nil && !errors.Is(gerr, store.ErrNotFound):
			err = gerr
		}
	}
	if err != nil {
		return Page[OrgView]{}, fromStore(err, "orgs")
	}
	return paginate(rows, limit, func(o store.Org) int64 { return o.ID }, orgView), nil
}

// GetOrg returns one org.
func (s *Service) GetOrg(ctx context.Context, org string) (OrgView, error) {
	o, err := s.org(ctx, org)
	if err != nil {
		return OrgView{}, err
	}
	return orgView(*o), nil
}

// ListProjects lists an org's projects.
func (s *Service) ListProjects(ctx context.Context, org string, pr PageRequest) (Page[ProjectView], error) {
	o, err := s.org(ctx, org)
	if err != nil {
		return Page[ProjectView]{}, err
	}
	return listUnder(ctx, pr, "projects", o.ID, s.st.ListProjects, func(p store.Project) int64 { return p.ID },
		func(p store.Project) ProjectView { return projectView(*o, p) })
}

// GetProject returns one project.
func (s *Service) GetProject(ctx context.Context, org, project string) (ProjectView, error) {
	o, p, err := s.project(ctx, org, project)
	if err != nil {
		return ProjectView{}, err
	}
	return projectView(*o, *p), nil
}

// ListProviders lists an org's providers, soft-deleted ones included, with
// their live readiness.
func (s *Service) ListProviders(ctx context.Context, org string, pr PageRequest) (Page[ProviderView], error) {
	o, err := s.org(ctx, org)
	if err != nil {
		return Page[ProviderView]{}, err
	}
	return listUnder(ctx, pr, "providers", o.ID, s.st.ListProviders, func(p store.Provider) int64 { return p.ID },
		s.providerView)
}

// GetProvider returns one provider with its key pool (ids and weights,
// never secrets) and live readiness.
func (s *Service) GetProvider(ctx context.Context, org, slug string) (ProviderView, error) {
	_, p, err := s.provider(ctx, org, slug)
	if err != nil {
		return ProviderView{}, err
	}
	return s.providerView(*p), nil
}

// ListGroups lists an org's provider groups.
func (s *Service) ListGroups(ctx context.Context, org string, pr PageRequest) (Page[GroupView], error) {
	o, err := s.org(ctx, org)
	if err != nil {
		return Page[GroupView]{}, err
	}
	return listUnder(ctx, pr, "groups", o.ID, s.st.ListGroups, func(g store.Group) int64 { return g.ID }, groupView)
}

// GetGroup returns one provider group.
func (s *Service) GetGroup(ctx context.Context, org, slug string) (GroupView, error) {
	_, g, err := s.group(ctx, org, slug)
	if err != nil {
		return GroupView{}, err
	}
	return groupView(*g), nil
}

// CheckSlug says whether slug is free for a new provider or group of the
// org, with a free suggestion when it is not: taken by a live provider or
// group, or reserved by a deleted one until it is purged (design 000 §3).
func (s *Service) CheckSlug(ctx context.Context, org, slug string) (SlugCheck, error) {
	o, err := s.org(ctx, org)
	if err != nil {
		return SlugCheck{}, err
	}
	if !slugPattern.MatchString(slug) {
		return SlugCheck{}, fieldErrors{"slug": slugRule}.err()
	}
	state, reason, err := s.slugState(ctx, o.ID, slug)
	if err != nil {
		return SlugCheck{}, err
	}
	out := SlugCheck{Slug: slug, Available: state == SlugAvailable, State: state, Reason: reason}
	if !out.Available {
		if out.Suggestion, err = s.suggestSlug(ctx, o.ID, slug); err != nil {
			return SlugCheck{}, err
		}
	}
	return out, nil
}

// ListHosts lists an org's fleet hosts with their live probe results.
func (s *Service) ListHosts(ctx context.Context, org string, pr PageRequest) (Page[HostView], error) {
	o, err := s.org(ctx, org)
	if err != nil {
		return Page[HostView]{}, err
	}
	return listUnder(ctx, pr, "hosts", o.ID, s.st.ListHosts, func(x store.Host) int64 { return x.ID },
		func(x store.Host) HostView { return s.hostView(&x, s.projectName(org, x.ProjectID)) })
}

// GetHost returns one fleet host.
func (s *Service) GetHost(ctx context.Context, org, id string) (HostView, error) {
	_, x, err := s.host(ctx, org, id)
	if err != nil {
		return HostView{}, err
	}
	return s.hostView(x, s.projectName(org, x.ProjectID)), nil
}

// ListFleetKeys lists an org's fleet keys (never their secrets).
func (s *Service) ListFleetKeys(ctx context.Context, org string, pr PageRequest) (Page[FleetKeyView], error) {
	o, err := s.org(ctx, org)
	if err != nil {
		return Page[FleetKeyView]{}, err
	}
	return listUnder(ctx, pr, "fleet keys", o.ID, s.st.ListFleetKeys, func(k store.FleetKey) int64 { return k.ID },
		fleetKeyView)
}

// ListRoutes lists a project's routes with their targets' readiness.
func (s *Service) ListRoutes(ctx context.Context, org, project string, pr PageRequest) (Page[RouteView], error) {
	_, pj, err := s.project(ctx, org, project)
	if err != nil {
		return Page[RouteView]{}, err
	}
	return listUnder(ctx, pr, "routes", pj.ID, s.st.ListRoutes, func(r store.Route) int64 { return r.ID },
		func(rt store.Route) RouteView { return s.targetReadiness(org, routeView(rt)) })
}

// GetRoute returns one route.
func (s *Service) GetRoute(ctx context.Context, org, project, model string) (RouteView, error) {
	_, rt, err := s.route(ctx, org, project, model)
	if err != nil {
		return RouteView{}, err
	}
	return s.targetReadiness(org, routeView(*rt)), nil
}

// ListKeys lists a project's virtual keys (never their secrets).
func (s *Service) ListKeys(ctx context.Context, org, project string, pr PageRequest) (Page[VirtualKeyView], error) {
	_, pj, err := s.project(ctx, org, project)
	if err != nil {
		return Page[VirtualKeyView]{}, err
	}
	return listUnder(ctx, pr, "virtual keys", pj.ID, s.st.ListVirtualKeys, func(k store.VirtualKey) int64 { return k.ID },
		keyView)
}

// GetKey returns one virtual key.
func (s *Service) GetKey(ctx context.Context, org, project, id string) (VirtualKeyView, error) {
	k, err := s.virtualKey(ctx, org, project, id)
	if err != nil {
		return VirtualKeyView{}, err
	}
	return keyView(*k), nil
}

// ListTokens lists the admin tokens (never their secrets); global tokens
// only.
func (s *Service) ListTokens(ctx context.Context, pr PageRequest) (Page[AdminTokenView], error) {
	if err := requireGlobal(ctx, "admin tokens"); err != nil {
		return Page[AdminTokenView]{}, err
	}
	fe := fieldErrors{}
	page, limit := pr.check(fe)
	if err := fe.err(); err != nil {
		return Page[AdminTokenView]{}, err
	}
	rows, err := s.st.ListAdminTokens(ctx, page)
	if err != nil {
		return Page[AdminTokenView]{}, fromStore(err, "admin tokens")
	}
	return paginate(rows, limit, func(a store.AdminToken) int64 { return a.ID }, tokenView), nil
}

// GetToken returns one admin token; global tokens only.
func (s *Service) GetToken(ctx context.Context, id string) (AdminTokenView, error) {
	a, err := s.adminToken(ctx, id)
	if err != nil {
		return AdminTokenView{}, err
	}
	return tokenView(*a), nil
}
