package ui

import (
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/rolter/rolter/internal/admin"
)

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

// newRouteView is the view of the editor of a new route, and the live
// providers for its pickers (see editor).
func (u *UI) newRouteView(r *request) (*view, *routesPage, map[string]*admin.ProviderView, error) {
	v, d, err := u.routesView(r, "new")
	if err != nil {
		return nil, nil, nil, err
	}
	live, err := u.editor(r, v, d)
	v.Title = "Add route"
	return v, d, live, err
}

func (u *UI) routeNew(w http.ResponseWriter, r *request) error {
	v, d, live, err := u.newRouteView(r)
	if err != nil {
		return err
	}
	d.Form = routeForm{Strategy: strategies[0], Targets: []targetForm{{Weight: "1"}}}
	d.finishRows(live, nil)
	u.render(w, http.StatusOK, v, "")
	return nil
}

func (u *UI) routeCreate(w http.ResponseWriter, r *request) error {
	v, d, live, err := u.newRouteView(r)
	if err != nil {
		return err
	}
	return u.saveRoute(w, r, v, d, live, func(in routeInput) (string, error) {
		_, err := u.svc.CreateRoute(r.Context(), v.Org, v.Project, admin.RouteInput{Model: in.Model, Strategy: in.Strategy,
			Targets: in.Targets, Policy: in.Policy, RPMLimit: in.RPMLimit, TPMLimit: in.TPMLimit,
			Fallbacks: in.Fallbacks, ContextFallback: in.ContextFallback})
		// The list, searched for the new route, so its row shows whatever
		// the project's size.
		return link("routes", "org", v.Org, "project", v.Project, "q", in.Model, "done", "created", "model", in.Model), err
	})
}

// saveRoute saves the editor as posted through save, a create or a patch
// that answers where to go next; live are the providers for the pickers.
// A form that does not parse, or that the Service refuses, is shown again
// as typed (422).
func (u *UI) saveRoute(w http.ResponseWriter, r *request, v *view, d *routesPage, live map[string]*admin.ProviderView,
	save func(routeInput) (string, error)) error {
	d.Form = readRouteForm(r)
	again := func(e *formErr) error {
		d.finishRows(live, d.R.Targets)
		return u.formAgain(w, v, &d.Err)(e)
	}
	in, fe := d.Form.input()
	if len(fe) > 0 {
		return again(fieldsErr(fe))
	}
	to, err := save(in)
	return finish(w, r, err, again, to)
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

// routeAsStored loads the editor of a stored route (see storedRoute) with
// the route's form as stored.
func (u *UI) routeAsStored(r *request, v *view, d *routesPage) error {
	live, err := u.storedRoute(r, v, d)
	if err != nil {
		return err
	}
	d.Form = routeFormOf(d.R)
	d.finishRows(live, d.R.Targets)
	return nil
}

func (u *UI) routeEdit(w http.ResponseWriter, r *request) error {
	v, d, err := u.routesView(r, "edit")
	if err != nil {
		return err
	}
	if err := u.routeAsStored(r, v, d); err != nil {
		return err
	}
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
	return u.saveRoute(w, r, v, d, live, func(in routeInput) (string, error) {
		_, err := u.svc.PatchRoute(r.Context(), v.Org, v.Project, d.Current, admin.RoutePatch{Model: &in.Model,
			Strategy: &in.Strategy, Targets: &in.Targets, Policy: &in.Policy, RPMLimit: &in.RPMLimit, TPMLimit: &in.TPMLimit,
			Fallbacks: &in.Fallbacks, ContextFallback: &in.ContextFallback})
		done := "saved"
		if in.Model != d.Current {
			done = "renamed"
		}
		return link("routes/_edit", "org", v.Org, "project", v.Project, "model", in.Model, "done", done, "from", d.Current), err
	})
}

func (u *UI) routeDelete(w http.ResponseWriter, r *request) error {
	v, d, err := u.routesView(r, "edit")
	if err != nil {
		return err
	}
	model := r.FormValue("model")
	err = u.svc.DeleteRoute(r.Context(), v.Org, v.Project, model)
	return finish(w, r, err, func(e *formErr) error {
		if err := u.routeAsStored(r, v, d); err != nil {
			return err
		}
		return u.formAgain(w, v, &d.Err)(e)
	}, link("routes", "org", v.Org, "project", v.Project, "done", "deleted", "model", model))
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

// optionLabel is how a provider reads in a picker.
func optionLabel(slug, name string) string {
	if name == "" || name == slug {
		return slug
	}
	return slug + " — " + name
}
