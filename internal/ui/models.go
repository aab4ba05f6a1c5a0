package ui

import (
	"cmp"
	"context"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/rolter/rolter/internal/admin"
	"github.com/rolter/rolter/internal/policy"
	"github.com/rolter/rolter/internal/store"
)

// The Models page (design 000): every address a key of the project can
// call, grouped by what serves it — the project's route aliases, then
// provider-slug/model per provider, then group-slug/model per group — with
// context, modalities, readiness and the governing policy. It is the
// landing page.
func init() {
	mount("models", func(u *UI) { u.get("/models", u.models) })
}

// modelsPageSize is how many addresses one page shows.
const modelsPageSize = 100

// address is one row of the Models page.
type address struct {
	// Address is what a caller sends as "model".
	Address string
	// Any marks a provider with no known catalog: it takes any model
	// after its slug, and Address is "slug/".
	Any bool
	// Kind is "route", "provider" or "group"; Owner the section it is
	// listed under.
	Kind, Owner string
	// OwnerNote is shown beside the section title (a provider's name).
	OwnerNote  string
	Context    int
	Modalities []string
	// State is "ready", "not ready" or "unknown" (no probe result yet),
	// and Reason why not ready.
	State, Reason string
	Policy        store.Policy
}

// modelsPage is the data of models.html.
type modelsPage struct {
	Q     string
	Rows  []address
	Total int // matching rows, all pages
	All   int // rows before the search
	Pager pager
}

// pager is the data of the "pager" partial.
type pager struct {
	From, To, Total int
	Prev, Next      string
}

func (u *UI) models(w http.ResponseWriter, r *request) error {
	v, err := u.newView(r, "models", true)
	if err != nil {
		return err
	}
	q := strings.TrimSpace(r.FormValue("q"))
	pageNo, _ := strconv.Atoi(r.FormValue("page"))
	var all []address
	if v.Org != "" {
		if all, err = u.addresses(r.Context(), v.Org, v.Project); err != nil {
			return err
		}
	}
	rows := all
	if q != "" {
		rows = filterAddresses(all, q)
	}
	data := modelsPage{Q: q, Total: len(rows), All: len(all)}
	// A page past the last shows the last (and no arithmetic overflows).
	pageNo = min(max(pageNo, 1), max(1, (len(rows)+modelsPageSize-1)/modelsPageSize))
	from := min((pageNo-1)*modelsPageSize, len(rows))
	to := min(from+modelsPageSize, len(rows))
	data.Rows = rows[from:to]
	data.Pager = pager{From: from + 1, To: to, Total: len(rows)}
	pageLink := func(n int) string {
		return link("models", "org", v.Org, "project", v.Project, "q", q, "page", strconv.Itoa(n))
	}
	if from > 0 {
		data.Pager.Prev = pageLink(pageNo - 1)
	}
	if to < len(rows) {
		data.Pager.Next = pageLink(pageNo + 1)
	}
	v.Data = data
	if isHTMX(r) && r.Header.Get("HX-Target") == "models-table" {
		u.render(w, http.StatusOK, v, "models-table")
		return nil
	}
	u.render(w, http.StatusOK, v, "")
	return nil
}

// filterAddresses keeps the rows whose address, section or state contain
// q, ignoring case.
func filterAddresses(rows []address, q string) []address {
	q = strings.ToLower(q)
	var out []address
	for _, a := range rows {
		if strings.Contains(strings.ToLower(a.Address), q) || strings.Contains(strings.ToLower(a.Owner), q) ||
			strings.Contains(a.State, q) || a.Kind == q {
			out = append(out, a)
		}
	}
	return out
}

// all reads every page of a Service list.
func all[T any](list func(admin.PageRequest) (admin.Page[T], error)) ([]T, error) {
	var out []T
	req := admin.PageRequest{Limit: 1000}
	for {
		p, err := list(req)
		if err != nil {
			return nil, err
		}
		out = append(out, p.Data...)
		if p.NextCursor == "" {
			return out, nil
		}
		req.Cursor = p.NextCursor
	}
}

// addresses lists what a key of project can call in org, the way
// /v1/models does (internal/gateway/models.go, docs/addressing.md), but
// with the addresses that are not serving now too, marked with why.
func (u *UI) addresses(ctx context.Context, org, project string) ([]address, error) {
	// From the routing snapshot, as /v1/models reads it: no store query, so
	// the page stays fast with 10,000 routes.
	sv, err := u.svc.Serving(ctx, org, project)
	if err != nil {
		return nil, err
	}
	providers, groups, routes := sv.Providers, sv.Groups, sv.Routes
	// A provider's catalog holds the upstream models the org's routes send
	// it, in any project, as the snapshot's does.
	sent := map[string]map[string]bool{}
	for slug, models := range sv.Catalog {
		sent[slug] = make(map[string]bool, len(models))
		for _, m := range models {
			sent[slug][m] = true
		}
	}
	live := map[string]*admin.ProviderView{}
	for i := range providers {
		if providers[i].DeletedAt == nil {
			live[providers[i].Slug] = &providers[i]
		}
	}
	var out []address
	routeNames := map[string]bool{}
	for _, rt := range routes {
		routeNames[rt.Model] = true
		out = append(out, routeAddress(rt, live, project))
	}
	var pinned, fanned []address
	for _, p := range live {
		for _, a := range providerAddresses(p, sent[p.Slug]) {
			if !routeNames[a.Address] { // a route of the same name shadows it
				pinned = append(pinned, a)
			}
		}
	}
	for _, g := range groups {
		for _, a := range groupAddresses(g, live, sent) {
			if !routeNames[a.Address] {
				fanned = append(fanned, a)
			}
		}
	}
	byOwner := func(a, b address) int {
		return cmp.Or(cmp.Compare(a.Owner, b.Owner), cmp.Compare(a.Address, b.Address))
	}
	slices.SortFunc(out, byOwner)
	slices.SortFunc(pinned, byOwner)
	slices.SortFunc(fanned, byOwner)
	return append(append(out, pinned...), fanned...), nil
}

// catalog is what a provider is known to serve, and its context: the
// discovered model for upstream metadata, else its configured models
// plus the upstream models routes send it. Empty: any model.
func catalog(p *admin.ProviderView, sent map[string]bool) (models []string, context int) {
	if p.MetadataSource == store.MetadataUpstream {
		if p.Readiness != nil && p.Readiness.ModelID != "" {
			return []string{p.Readiness.ModelID}, p.Readiness.Context
		}
		return nil, 0
	}
	if len(p.Models) == 0 {
		return nil, p.ContextLimit
	}
	set := map[string]bool{}
	for _, m := range p.Models {
		set[m] = true
	}
	for m := range sent {
		set[m] = true
	}
	for m := range set {
		models = append(models, m)
	}
	slices.Sort(models)
	return models, p.ContextLimit
}

// providerState is the readiness word of a provider for model ("" for the
// provider as a whole).
func providerState(p *admin.ProviderView, model string) (state, reason string) {
	rd := p.Readiness
	switch {
	case rd == nil:
		return "unknown", "no probe result yet"
	case rd.State != "ready":
		return "not ready", rd.Reason
	}
	if why, stale := rd.StaleModels[model]; stale {
		return "not ready", "stale: " + why
	}
	return "ready", ""
}

func providerAddresses(p *admin.ProviderView, sent map[string]bool) []address {
	models, ctx := catalog(p, sent)
	var mods []string
	if p.Readiness != nil {
		mods = p.Readiness.Modalities
	}
	note := p.Name
	if len(models) == 0 {
		state, reason := providerState(p, "")
		if p.MetadataSource == store.MetadataUpstream {
			// Nothing discovered yet: no address until a probe names the model.
			return []address{{Address: p.Slug + "/", Any: true, Kind: "provider", Owner: p.Slug, OwnerNote: note,
				State: state, Reason: cmp.Or(reason, "the served model is not discovered yet"), Policy: p.Policy}}
		}
		return []address{{Address: p.Slug + "/", Any: true, Kind: "provider", Owner: p.Slug, OwnerNote: note, Context: ctx,
			Modalities: mods, State: state, Reason: reason, Policy: p.Policy}}
	}
	out := make([]address, 0, len(models))
	for _, m := range models {
		state, reason := providerState(p, m)
		out = append(out, address{Address: p.Slug + "/" + m, Kind: "provider", Owner: p.Slug, OwnerNote: note, Context: ctx,
			Modalities: mods, State: state, Reason: reason, Policy: p.Policy})
	}
	return out
}

// groupAddresses is the union of the live members' models and model_map
// keys; context is the smallest known among ready members (the pool
// rule), the policy the strictest of the group's and the members'.
func groupAddresses(g admin.GroupView, live map[string]*admin.ProviderView, sent map[string]map[string]bool) []address {
	type acc struct {
		ctx          int
		pol          store.Policy
		ready, known bool
		reasons      []string
		mods         map[string]bool
	}
	union := map[string]*acc{}
	for _, m := range g.Members {
		p := live[m.Provider]
		if p == nil {
			continue
		}
		models, ctx := catalog(p, sent[p.Slug])
		anyModel := len(models) == 0 && p.MetadataSource != store.MetadataUpstream
		for client, up := range m.ModelMap {
			if anyModel || slices.Contains(models, up) {
				models = append(models[:len(models):len(models)], client)
			}
		}
		for _, name := range models {
			a := union[name]
			if a == nil {
				a = &acc{pol: g.Policy, mods: map[string]bool{}}
				union[name] = a
			}
			state, reason := providerState(p, name)
			a.pol = policy.Strictest(a.pol, p.Policy)
			switch state {
			case "ready":
				a.ready = true
				if ctx > 0 && (a.ctx == 0 || ctx < a.ctx) {
					a.ctx = ctx
				}
				if p.Readiness != nil {
					for _, md := range p.Readiness.Modalities {
						a.mods[md] = true
					}
				}
			case "not ready":
				a.known = true
				a.reasons = append(a.reasons, p.Slug+": "+reason)
			}
		}
	}
	out := make([]address, 0, len(union))
	for name, a := range union {
		state, reason := "unknown", "no member has a probe result yet"
		switch {
		case a.ready:
			state, reason = "ready", ""
		case a.known:
			state, reason = "not ready", strings.Join(a.reasons, "; ")
		}
		mods := make([]string, 0, len(a.mods))
		for m := range a.mods {
			mods = append(mods, m)
		}
		slices.Sort(mods)
		out = append(out, address{Address: g.Slug + "/" + name, Kind: "group", Owner: g.Slug, OwnerNote: g.Name,
			Context: a.ctx, Modalities: mods, State: state, Reason: reason, Policy: a.pol})
	}
	return out
}

// routeAddress is a route alias: ready when a target is routable; its
// context the smallest among routable targets and its policy the
// strictest of the route's and theirs, as /v1/models computes them.
func routeAddress(rt admin.RouteView, live map[string]*admin.ProviderView, project string) address {
	a := address{Address: rt.Model, Kind: "route", Owner: "routes of project " + project, Policy: rt.Policy}
	mods := map[string]bool{}
	var reasons []string
	known := false
	for _, t := range rt.Targets {
		p := live[t.Provider]
		if p == nil {
			reasons = append(reasons, t.Provider+": deleted")
			known = true
			continue
		}
		routable := t.Routable != nil && *t.Routable
		if t.Routable == nil {
			continue
		}
		known = true
		if !routable || t.Weight == 0 {
			reasons = append(reasons, t.Provider+": "+cmp.Or(t.Reason, "weight 0"))
			continue
		}
		a.State = "ready"
		a.Policy = policy.Strictest(a.Policy, p.Policy)
		_, ctx := catalog(p, nil)
		if t.ContextLimit > 0 {
			ctx = t.ContextLimit
		}
		if ctx > 0 && (a.Context == 0 || ctx < a.Context) {
			a.Context = ctx
		}
		if p.Readiness != nil {
			for _, m := range p.Readiness.Modalities {
				mods[m] = true
			}
		}
	}
	switch {
	case a.State == "ready":
	case known:
		a.State, a.Reason = "not ready", strings.Join(reasons, "; ")
	default:
		a.State, a.Reason = "unknown", "no probe result yet"
	}
	for m := range mods {
		a.Modalities = append(a.Modalities, m)
	}
	slices.Sort(a.Modalities)
	return a
}
