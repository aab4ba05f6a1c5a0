package ui

import (
	"cmp"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/rolter/rolter/internal/admin"
)

// The Routes page: a project's model aliases, searchable and paged on the
// server (a project may hold 10,000), and the route editor with its
// targets, policy and limits. In the editor each target row's provider
// picker ends with "+ New provider…", which opens the Providers page's
// form in a dialog (design 000, inline add-provider); once it is saved the
// new provider is picked in that row and the model field offers its
// models.
//
// A route is named by its model, which may hold '/' or start with '_', so
// the editor takes it in the query (?model=) rather than the path, and
// every collection action is "/routes/_...".
func init() {
	mount("routes", func(u *UI) {
		u.get("/routes", u.routeList)
		u.get("/routes/_new", u.routeNew)
		u.post("/routes/_new", u.routeCreate)
		u.get("/routes/_edit", u.routeEdit)
		u.post("/routes/_edit", u.routeUpdate)
		u.post("/routes/_delete", u.routeDelete)
		// htmx fragments of the editor.
		u.get("/routes/_target", u.routeTargetRow)
		u.get("/routes/_models", u.routeTargetModels)
		u.post("/routes/_provider", u.routeNewProvider)
	})
}

// routesPageSize is how many routes one list page shows.
const routesPageSize = 50

// newProviderOption is the value of a provider picker's last entry,
// "+ New provider…"; no slug can start with '_'.
const newProviderOption = "_new"

// strategies are the balancing strategies a route or a group may name
// (SPEC §4), first the default. The Service is the judge: a name it does
// not know comes back as its validation error on the field.
var strategies = []string{"weighted", "round_robin", "least_busy", "latency"}

// routesPage is the data of routes.html; Mode picks the view: "list",
// "new" or "edit".
type routesPage struct {
	Mode string
	// List.
	Q, Sort    string
	Rows       []routeRow
	Total, All int
	Pager      pager
	// SortLinks are the header links, by column ("model", "updated").
	SortLinks map[string]string
	// Done names what the last action did (the notice at the top),
	// DoneModel which route, and DoneFrom its name before a rename.
	Done, DoneModel, DoneFrom string

	// Editor. Current is the stored route's name ("" when new) and R the
	// stored route.
	Current   string
	R         admin.RouteView
	Form      routeForm
	Err       *formErr
	Providers []providerOption
	// NextRow numbers the next target row a "+ Add target" adds.
	NextRow    int
	Strategies []string
	Tristates  []string
	// Dialog is the inline add-provider form.
	Dialog providerDialog
}

// routeRow is one row of the list: the route and its readiness as the
// Models page computes it.
type routeRow struct {
	admin.RouteView
	State, Reason string
	// Routable counts the targets that may take traffic now.
	Routable int
}

// providerOption is one entry of a provider picker.
type providerOption struct {
	Slug, Label string
}

// routeForm is the route editor as typed: strings, so what does not parse
// is shown back as it was.
type routeForm struct {
	Model, Strategy    string
	RPMLimit, TPMLimit string
	Policy             policyForm
	Targets            []targetForm
	// Fallbacks are the fallback routes as typed, comma-separated in
	// order; ContextFallback one route or empty.
	Fallbacks, ContextFallback string
}

// targetForm is one target row as typed.
type targetForm struct {
	// Row is the row's id prefix in the page ("t3"); Index its position
	// among the targets sent, which the Service's field names use
	// ("targets[Index].weight").
	Row                                   string
	Index                                 int
	Provider, UpstreamModel, Weight       string
	Priority                              string
	ContextLimit, InputPrice, OutputPrice string
	Hint                                  modelHint
}

// modelHint is what a target row says under its model field once a
// provider is picked: the models it offers (a datalist and one-click
// picks) and whether it is ready. It is the "target-models" fragment that
// /routes/_models answers when the picker changes.
type modelHint struct {
	Row      string
	Provider string
	Known    bool // the provider exists and is live
	// Models the provider is known to serve; Source says where they come
	// from: "configured", "discovered", "any" (no catalog: any model) or
	// "pending" (upstream metadata, not probed yet).
	Models []string
	Source string
	// State and Reason are the readiness: of the saved target when the row
	// is one, else of the provider.
	State, Reason string
}

func (u *UI) routesView(r *request, mode string) (*view, *routesPage, error) {
	d := &routesPage{Mode: mode, Done: r.FormValue("done"), DoneModel: r.FormValue("model"), DoneFrom: r.FormValue("from"), Strategies: strategies,
		Tristates: tristates}
	v, err := u.dataView(r, "routes", true, d)
	return v, d, err
}

// routeList is the list: every route of the project, filtered by ?q=
// (route name, provider or upstream model), sorted by ?sort= and cut to
// ?page=, all on the server, so a project of 10,000 routes sends the
// browser one page. The routes come from the routing snapshot
// (Service.Serving), as the Models page's do: no store query.
func (u *UI) routeList(w http.ResponseWriter, r *request) error {
	v, d, err := u.routesView(r, "list")
	if err != nil {
		return err
	}
	sv, err := u.svc.Serving(r.Context(), v.Org, v.Project)
	if err != nil {
		return err
	}
	routes := sv.Routes
	d.Q, d.Sort, d.All = strings.TrimSpace(r.FormValue("q")), r.FormValue("sort"), len(routes)
	if !slices.Contains(routeSorts, d.Sort) {
		d.Sort = ""
	}
	rows := filterRoutes(routes, d.Q)
	sortRoutes(rows, d.Sort)
	d.Total = len(rows)
	pageNo, _ := strconv.Atoi(r.FormValue("page"))
	// A page past the last shows the last (and no arithmetic overflows).
	pageNo = min(max(pageNo, 1), max(1, (len(rows)+routesPageSize-1)/routesPageSize))
	from := min((pageNo-1)*routesPageSize, len(rows))
	to := min(from+routesPageSize, len(rows))
	listLink := func(sort string, page int) string {
		p := ""
		if page > 1 {
			p = strconv.Itoa(page)
		}
		return link("routes", "org", v.Org, "project", v.Project, "q", d.Q, "sort", sort, "page", p)
	}
	d.Pager = pager{From: from + 1, To: to, Total: len(rows)}
	if from > 0 {
		d.Pager.Prev = listLink(d.Sort, pageNo-1)
	}
	if to < len(rows) {
		d.Pager.Next = listLink(d.Sort, pageNo+1)
	}
	d.SortLinks = map[string]string{"model": listLink("", 0), "updated": listLink("-updated", 0)}
	switch d.Sort {
	case "":
		d.SortLinks["model"] = listLink("-model", 0)
	case "-updated":
		d.SortLinks["updated"] = listLink("updated", 0)
	}
	if to > from {
		live := map[string]*admin.ProviderView{}
		for i := range sv.Providers {
			live[sv.Providers[i].Slug] = &sv.Providers[i]
		}
		for _, rt := range rows[from:to] {
			a := routeAddress(rt, live, v.Project)
			row := routeRow{RouteView: rt, State: a.State, Reason: a.Reason}
			for _, t := range rt.Targets {
				if t.Routable != nil && *t.Routable && t.Weight > 0 {
					row.Routable++
				}
			}
			d.Rows = append(d.Rows, row)
		}
	}
	if isHTMX(r) && r.Header.Get("HX-Target") == "routes-table" {
		u.render(w, http.StatusOK, v, "routes-table")
		return nil
	}
	u.render(w, http.StatusOK, v, "")
	return nil
}

// filterRoutes keeps the routes whose name, a target's provider or a
// target's upstream model contains q, ignoring case.
func filterRoutes(routes []admin.RouteView, q string) []admin.RouteView {
	if q == "" {
		return routes
	}
	q = strings.ToLower(q)
	has := func(s string) bool { return strings.Contains(strings.ToLower(s), q) }
	var out []admin.RouteView
	for _, rt := range routes {
		match := has(rt.Model)
		for _, t := range rt.Targets {
			match = match || has(t.Provider) || has(t.UpstreamModel)
		}
		if match {
			out = append(out, rt)
		}
	}
	return out
}

// routeSorts are the orders of ?sort= ("" is by name); another value is
// taken as "".
var routeSorts = []string{"", "-model", "updated", "-updated"}

// sortRoutes orders the list: by name (default, or "-model" descending)
// or by last change ("updated", "-updated" newest first).
func sortRoutes(rows []admin.RouteView, by string) {
	byName := func(a, b admin.RouteView) int { return strings.Compare(a.Model, b.Model) }
	switch by {
	case "-model":
		slices.SortFunc(rows, func(a, b admin.RouteView) int { return byName(b, a) })
	case "updated":
		slices.SortFunc(rows, func(a, b admin.RouteView) int { return cmp.Or(a.UpdatedAt.Compare(b.UpdatedAt), byName(a, b)) })
	case "-updated":
		slices.SortFunc(rows, func(a, b admin.RouteView) int { return cmp.Or(b.UpdatedAt.Compare(a.UpdatedAt), byName(a, b)) })
	default:
		slices.SortFunc(rows, byName)
	}
}
