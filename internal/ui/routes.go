package ui

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"html/template"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/rolter/rolter/internal/admin"
	"github.com/rolter/rolter/internal/store"
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
}

// targetForm is one target row as typed.
type targetForm struct {
	// Row is the row's id prefix in the page ("t3"); Index its position
	// among the targets sent, which the Service's field names use
	// ("targets[Index].weight").
	Row                                   string
	Index                                 int
	Provider, UpstreamModel, Weight       string
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

// policyForm is a policy (store.Policy) as typed; routes and groups share
// it.
type policyForm struct {
	MaxOutputTokens, MaxConcurrency, Tools, Media string
}

func policyFormOf(p store.Policy) policyForm {
	return policyForm{MaxOutputTokens: num(p.MaxOutputTokens), MaxConcurrency: num(p.MaxConcurrency), Tools: p.Tools, Media: p.Media}
}

func readPolicyForm(r *request) policyForm {
	f := func(name string) string { return strings.TrimSpace(r.PostForm.Get(name)) }
	return policyForm{MaxOutputTokens: f("policy.max_output_tokens"), MaxConcurrency: f("policy.max_concurrency"),
		Tools: f("policy.tools"), Media: f("policy.media")}
}

// policy parses the numbers, naming a bad one by the Service's field name.
func (f policyForm) policy(fe map[string]string) store.Policy {
	return store.Policy{MaxOutputTokens: parseInt(fe, "policy.max_output_tokens", f.MaxOutputTokens),
		MaxConcurrency: parseInt(fe, "policy.max_concurrency", f.MaxConcurrency), Tools: f.Tools, Media: f.Media}
}

// num is a number as a form shows it: empty for 0 ("not set").
func num(n int) string {
	if n == 0 {
		return ""
	}
	return strconv.Itoa(n)
}

func (u *UI) routesView(r *request, mode string) (*view, *routesPage, error) {
	v, err := u.newView(r, "routes", true)
	if err != nil {
		return nil, nil, err
	}
	if v.Org == "" || v.Project == "" {
		return nil, nil, &admin.Error{Kind: admin.ErrNotFound, Code: admin.CodeNotFound, Message: "this token sees no project"}
	}
	d := &routesPage{Mode: mode, Done: r.FormValue("done"), DoneModel: r.FormValue("model"), DoneFrom: r.FormValue("from"), Strategies: strategies,
		Tristates: []string{"", "allow", "deny"}}
	v.Data = d
	return v, d, nil
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

// providers reads the org's providers, by slug.
func (u *UI) providers(r *request, org string) ([]admin.ProviderView, error) {
	ps, err := all(func(p admin.PageRequest) (admin.Page[admin.ProviderView], error) {
		return u.svc.ListProviders(r.Context(), org, p)
	})
	slices.SortFunc(ps, func(a, b admin.ProviderView) int { return strings.Compare(a.Slug, b.Slug) })
	return ps, err
}

// liveProviders are the org's providers that are not deleted, by slug.
func (u *UI) liveProviders(r *request, org string) (map[string]*admin.ProviderView, error) {
	ps, err := u.providers(r, org)
	if err != nil {
		return nil, err
	}
	live := map[string]*admin.ProviderView{}
	for i := range ps {
		if ps[i].DeletedAt == nil {
			live[ps[i].Slug] = &ps[i]
		}
	}
	return live, nil
}

// pickers reads the live providers and lists them for the pickers.
func (u *UI) pickers(r *request, org string) (map[string]*admin.ProviderView, []providerOption, error) {
	live, err := u.liveProviders(r, org)
	if err != nil {
		return nil, nil, err
	}
	opts := make([]providerOption, 0, len(live))
	for _, p := range live {
		opts = append(opts, providerOption{Slug: p.Slug, Label: optionLabel(p.Slug, p.Name)})
	}
	slices.SortFunc(opts, func(a, b providerOption) int { return strings.Compare(a.Slug, b.Slug) })
	return live, opts, nil
}

// editor loads what every editor view needs: the providers for the
// pickers and the add-provider dialog's empty form.
func (u *UI) editor(r *request, v *view, d *routesPage) (map[string]*admin.ProviderView, error) {
	live, opts, err := u.pickers(r, v.Org)
	if err != nil {
		return nil, err
	}
	d.Providers = opts
	d.Dialog, err = u.providerDialog(v, newProviderForm(), nil)
	return live, err
}

func (u *UI) routeNew(w http.ResponseWriter, r *request) error {
	v, d, err := u.routesView(r, "new")
	if err != nil {
		return err
	}
	live, err := u.editor(r, v, d)
	if err != nil {
		return err
	}
	v.Title = "Add route"
	d.Form = routeForm{Strategy: strategies[0], Targets: []targetForm{{Weight: "1"}}}
	d.finishRows(live, nil)
	u.render(w, http.StatusOK, v, "")
	return nil
}

func (u *UI) routeCreate(w http.ResponseWriter, r *request) error {
	v, d, err := u.routesView(r, "new")
	if err != nil {
		return err
	}
	live, err := u.editor(r, v, d)
	if err != nil {
		return err
	}
	v.Title = "Add route"
	d.Form = readRouteForm(r)
	again := func(e *formErr) error {
		d.finishRows(live, nil)
		return u.formAgain(w, v, &d.Err)(e)
	}
	in, fe := d.Form.input()
	if len(fe) > 0 {
		return again(fieldsErr(fe))
	}
	_, err = u.svc.CreateRoute(r.Context(), v.Org, v.Project, admin.RouteInput{Model: in.Model, Strategy: in.Strategy,
		Targets: in.Targets, Policy: in.Policy, RPMLimit: in.RPMLimit, TPMLimit: in.TPMLimit})
	// The list, searched for the new route, so its row shows whatever the
	// project's size.
	return finish(w, r, err, again, link("routes", "org", v.Org, "project", v.Project, "q", in.Model, "done", "created", "model", in.Model))
}

// route loads the stored route ?model= names (the form's "current" on a
// save) into d.
func (u *UI) route(r *request, v *view, d *routesPage) error {
	model := r.FormValue("current")
	if model == "" {
		model = r.FormValue("model")
	}
	rt, err := u.svc.GetRoute(r.Context(), v.Org, v.Project, model)
	if err != nil {
		return err
	}
	d.Current, d.R, v.Title = rt.Model, rt, "Route "+rt.Model
	return nil
}

// storedRoute loads the editor of a stored route: the route (see route)
// and what the editor needs (see editor).
func (u *UI) storedRoute(r *request, v *view, d *routesPage) (map[string]*admin.ProviderView, error) {
	if err := u.route(r, v, d); err != nil {
		return nil, err
	}
	return u.editor(r, v, d)
}

func (u *UI) routeEdit(w http.ResponseWriter, r *request) error {
	v, d, err := u.routesView(r, "edit")
	if err != nil {
		return err
	}
	live, err := u.storedRoute(r, v, d)
	if err != nil {
		return err
	}
	d.Form = routeFormOf(d.R)
	d.finishRows(live, d.R.Targets)
	u.render(w, http.StatusOK, v, "")
	return nil
}

func (u *UI) routeUpdate(w http.ResponseWriter, r *request) error {
	v, d, err := u.routesView(r, "edit")
	if err != nil {
		return err
	}
	live, err := u.storedRoute(r, v, d)
	if err != nil {
		return err
	}
	d.Form = readRouteForm(r)
	again := func(e *formErr) error {
		d.finishRows(live, d.R.Targets)
		return u.formAgain(w, v, &d.Err)(e)
	}
	in, fe := d.Form.input()
	if len(fe) > 0 {
		return again(fieldsErr(fe))
	}
	_, err = u.svc.PatchRoute(r.Context(), v.Org, v.Project, d.Current, admin.RoutePatch{Model: &in.Model,
		Strategy: &in.Strategy, Targets: &in.Targets, Policy: &in.Policy, RPMLimit: &in.RPMLimit, TPMLimit: &in.TPMLimit})
	done := "saved"
	if in.Model != d.Current {
		done = "renamed"
	}
	return finish(w, r, err, again, link("routes/_edit", "org", v.Org, "project", v.Project, "model", in.Model, "done", done, "from", d.Current))
}

func (u *UI) routeDelete(w http.ResponseWriter, r *request) error {
	v, d, err := u.routesView(r, "edit")
	if err != nil {
		return err
	}
	model := r.FormValue("model")
	err = u.svc.DeleteRoute(r.Context(), v.Org, v.Project, model)
	return finish(w, r, err, func(e *formErr) error {
		live, err := u.storedRoute(r, v, d)
		if err != nil {
			return err
		}
		d.Form = routeFormOf(d.R)
		d.finishRows(live, d.R.Targets)
		return u.formAgain(w, v, &d.Err)(e)
	}, link("routes", "org", v.Org, "project", v.Project, "done", "deleted", "model", model))
}

// routeInput is the form converted for the Service.
type routeInput struct {
	Model, Strategy    string
	Targets            []admin.TargetInput
	Policy             store.Policy
	RPMLimit, TPMLimit int
}

func readRouteForm(r *request) routeForm {
	f := func(name string) string { return strings.TrimSpace(r.PostForm.Get(name)) }
	form := routeForm{Model: f("model"), Strategy: f("strategy"), RPMLimit: f("rpm_limit"), TPMLimit: f("tpm_limit"),
		Policy: readPolicyForm(r)}
	col := func(name string, i int) string {
		vs := r.PostForm[name]
		if i < len(vs) {
			return strings.TrimSpace(vs[i])
		}
		return ""
	}
	for i := range r.PostForm["target_provider"] {
		t := targetForm{Provider: col("target_provider", i), UpstreamModel: col("target_model", i), Weight: col("target_weight", i),
			ContextLimit: col("target_context", i), InputPrice: col("target_input_price", i), OutputPrice: col("target_output_price", i)}
		if t.Provider == newProviderOption {
			t.Provider = ""
		}
		// A row with neither a provider nor a model is an unused one.
		if t.Provider != "" || t.UpstreamModel != "" {
			form.Targets = append(form.Targets, t)
		}
	}
	return form
}

func routeFormOf(rt admin.RouteView) routeForm {
	f := routeForm{Model: rt.Model, Strategy: rt.Strategy, RPMLimit: num(rt.RPMLimit), TPMLimit: num(rt.TPMLimit),
		Policy: policyFormOf(rt.Policy)}
	for _, t := range rt.Targets {
		tf := targetForm{Provider: t.Provider, UpstreamModel: t.UpstreamModel, Weight: strconv.Itoa(t.Weight), ContextLimit: num(t.ContextLimit)}
		if t.Prices != nil {
			tf.InputPrice, tf.OutputPrice = t.Prices.Input.PerMillion(), t.Prices.Output.PerMillion()
		}
		f.Targets = append(f.Targets, tf)
	}
	return f
}

// input converts the form; what cannot be parsed is named by the
// Service's own field names, the rest is the Service's to judge.
func (f routeForm) input() (routeInput, map[string]string) {
	fe := map[string]string{}
	in := routeInput{Model: f.Model, Strategy: f.Strategy, Policy: f.Policy.policy(fe), Targets: []admin.TargetInput{},
		RPMLimit: parseInt(fe, "rpm_limit", f.RPMLimit), TPMLimit: parseInt(fe, "tpm_limit", f.TPMLimit)}
	for i, t := range f.Targets {
		field := fmt.Sprintf("targets[%d]", i)
		ti := admin.TargetInput{Provider: t.Provider, UpstreamModel: t.UpstreamModel,
			ContextLimit: parseInt(fe, field+".context_limit", t.ContextLimit)}
		ti.Weight, _ = parseWeight(fe, field+".weight", t.Weight)
		// Both prices empty: the provider's. One alone is the Service's
		// "is required" on the other.
		if t.InputPrice != "" || t.OutputPrice != "" {
			ti.Prices = &admin.PricesInput{Input: admin.Decimal(t.InputPrice), Output: admin.Decimal(t.OutputPrice)}
		}
		in.Targets = append(in.Targets, ti)
	}
	return in, fe
}

// finishRows numbers the rows and fills each one's model hint; at least
// one row is shown. saved are the stored route's targets, whose live
// routability a row that is one of them shows.
func (d *routesPage) finishRows(live map[string]*admin.ProviderView, saved []admin.TargetView) {
	if len(d.Form.Targets) == 0 {
		d.Form.Targets = []targetForm{{Weight: "1"}}
	}
	for i := range d.Form.Targets {
		t := &d.Form.Targets[i]
		t.Row, t.Index = "t"+strconv.Itoa(i), i
		t.Hint = hintFor(t.Row, t.Provider, live)
		for _, s := range saved {
			if s.Provider == t.Provider && s.UpstreamModel == t.UpstreamModel && s.Routable != nil {
				t.Hint.State, t.Hint.Reason = "not ready", s.Reason
				if *s.Routable {
					t.Hint.State, t.Hint.Reason = "ready", ""
				}
				break
			}
		}
	}
	d.NextRow = len(d.Form.Targets)
}

// hintFor is what a row says once provider is picked: its models and its
// readiness.
func hintFor(row, provider string, live map[string]*admin.ProviderView) modelHint {
	h := modelHint{Row: row, Provider: provider}
	p := live[provider]
	if p == nil {
		return h
	}
	h.Known = true
	h.Models, _ = catalog(p, nil)
	switch {
	case p.MetadataSource == store.MetadataUpstream && len(h.Models) > 0:
		h.Source = "discovered"
	case p.MetadataSource == store.MetadataUpstream:
		h.Source = "pending"
	case len(h.Models) > 0:
		h.Source = "configured"
	default:
		h.Source = "any"
	}
	h.State, h.Reason = providerState(p, "")
	return h
}

// rowPattern is the row id an htmx fragment is for: only "t" and digits,
// since it becomes element ids.
var rowPattern = rowIDPattern("t")

// rowIDPattern matches an editor row's id: prefix and a row number.
func rowIDPattern(prefix string) *regexp.Regexp {
	return regexp.MustCompile(`^` + prefix + `[0-9]{1,4}$`)
}

// routeTargetRow is a new, empty target row (the "+ Add target" button),
// with the button again, numbered for the row after it.
func (u *UI) routeTargetRow(w http.ResponseWriter, r *request) error {
	v, d, err := u.routesView(r, "new")
	if err != nil {
		return err
	}
	n, err := strconv.Atoi(r.FormValue("i"))
	if err != nil || n < 0 || n > 9999 {
		return &admin.Error{Kind: admin.ErrInvalid, Code: admin.CodeValidation, Message: "the row number must be from 0 to 9999"}
	}
	if _, d.Providers, err = u.pickers(r, v.Org); err != nil {
		return err
	}
	d.Form.Targets = []targetForm{{Row: "t" + strconv.Itoa(n), Index: n, Weight: "1", Hint: modelHint{Row: "t" + strconv.Itoa(n)}}}
	d.NextRow = n + 1
	u.render(w, http.StatusOK, v, "target-row-added")
	return nil
}

// routeTargetModels answers a provider picker's change: the models the
// picked provider offers and its readiness, for the row ?row= names.
func (u *UI) routeTargetModels(w http.ResponseWriter, r *request) error {
	v, err := u.newView(r, "routes", false)
	if err != nil {
		return err
	}
	row := r.FormValue("row")
	if !rowPattern.MatchString(row) {
		return &admin.Error{Kind: admin.ErrInvalid, Code: admin.CodeValidation, Message: "row must be t followed by a number"}
	}
	live, err := u.liveProviders(r, v.Org)
	if err != nil {
		return err
	}
	v.Data = hintFor(row, r.FormValue("target_provider"), live)
	u.render(w, http.StatusOK, v, "target-models-answer")
	return nil
}

// providerDialog is the inline add-provider form: the Providers page's own
// fields (its "provider-fields" template, rendered from that page's set so
// that both forms are one), and the optional first pool key.
type providerDialog struct {
	Fields    template.HTML
	Err       *formErr
	KeyWeight string
}

func newProviderForm() providerForm {
	return providerForm{Kind: store.KindVLLM, MetadataSource: store.MetadataConfigured, KeyWeight: "1"}
}

// providerDialog renders the provider fields as typed, with err beside
// them.
func (u *UI) providerDialog(v *view, form providerForm, err *formErr) (providerDialog, error) {
	pv := *v
	pv.Page = "providers"
	pv.Data = &providersPage{Mode: "new", Form: form, Err: err, Kinds: store.ProviderKinds,
		Metadata: []string{store.MetadataConfigured, store.MetadataUpstream}, Tristates: []string{"", "allow", "deny"}}
	var b bytes.Buffer
	if err := u.tmpl.pages["providers"].ExecuteTemplate(&b, "provider-fields", &pv); err != nil {
		return providerDialog{}, fmt.Errorf("ui: provider fields: %w", err)
	}
	// html/template escaped every value in it as it rendered.
	return providerDialog{Fields: template.HTML(b.String()), Err: err, KeyWeight: form.KeyWeight}, nil //nolint:gosec // G203: the output of html/template
}

// providerCreated is the event the dialog's answer raises (HX-Trigger):
// app.js adds the provider to every picker, picks it in the row that
// opened the dialog, closes the dialog, and the row then asks for its
// models.
type providerCreated struct {
	Slug  string `json:"slug"`
	Label string `json:"label"`
}

// routeNewProvider creates a provider from the editor's dialog. It answers
// with the dialog's form: as typed with the errors beside the fields (200,
// so htmx swaps it in), or empty again after a create, with the event
// that picks the new provider.
func (u *UI) routeNewProvider(w http.ResponseWriter, r *request) error {
	v, err := u.newView(r, "routes", false)
	if err != nil {
		return err
	}
	form := readProviderForm(r)
	in, fe := form.createInput(r)
	var ferr *formErr
	if len(fe) > 0 {
		ferr = fieldsErr(fe)
	} else {
		p, err := u.svc.CreateProvider(r.Context(), v.Org, in)
		if e, ok := asFormErr(err); ok {
			ferr = e
		} else if err != nil {
			return err
		}
		if ferr == nil {
			if !isHTMX(r) {
				seeOther(w, r, providerLink(v, p.Slug, "done", "created"))
				return nil
			}
			ev, err := json.Marshal(map[string]providerCreated{"provider-created": {Slug: p.Slug, Label: optionLabel(p.Slug, p.Name)}})
			if err != nil {
				return err
			}
			w.Header().Set("HX-Trigger", asciiJSON(ev))
			form = newProviderForm()
		}
	}
	d := &routesPage{}
	if d.Dialog, err = u.providerDialog(v, form, ferr); err != nil {
		return err
	}
	v.Data = d
	u.render(w, http.StatusOK, v, "provider-dialog-form")
	return nil
}

// asciiJSON escapes every non-ASCII character of a JSON text as \uXXXX:
// a browser reads a response header's bytes as Latin-1, so a name in UTF-8
// would arrive garbled.
func asciiJSON(b []byte) string {
	var out strings.Builder
	for _, r := range string(b) {
		switch {
		case r < utf8.RuneSelf:
			out.WriteRune(r)
		case r > 0xFFFF:
			hi, lo := utf16.EncodeRune(r)
			fmt.Fprintf(&out, "\\u%04x\\u%04x", hi, lo)
		default:
			fmt.Fprintf(&out, "\\u%04x", r)
		}
	}
	return out.String()
}

// optionLabel is how a provider reads in a picker.
func optionLabel(slug, name string) string {
	if name == "" || name == slug {
		return slug
	}
	return slug + " — " + name
}
