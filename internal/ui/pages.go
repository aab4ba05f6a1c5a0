package ui

import (
	"net/http"
	"slices"

	"github.com/rolter/rolter/internal/admin"
)

// navPage is one entry of the left navigation. Name is its URL segment
// (/ui/<name>) and the name of its template file.
type navPage struct {
	Name, Title string
	// Blurb is the one line under the page title that says what it is for.
	Blurb string
}

// nav is the left navigation, in order (UI.md). Every entry is listed from
// the start; one whose page is not built yet shows a "coming" placeholder.
var nav = []navPage{
	{"models", "Models", "Every address a key can call: route aliases, provider-slug/model and group-slug/model."},
	{"providers", "Providers", "Upstream servers and APIs, their key pools, readiness and discovered metadata."},
	{"routes", "Routes", "Model aliases of a project and the targets they balance over."},
	{"groups", "Groups", "Provider groups: members with weights and model maps."},
	{"fleet", "Fleet", "Serving hosts, their revisions and liveness, fleet keys."},
	{"keys", "Keys", "Virtual keys of a project: mint, revoke, allowlists and limits."},
	{"usage", "Usage", "Requests, tokens, errors and latency over time."},
	{"settings", "Settings", "Admin tokens and fleet keys."},
}

// mounts holds the built pages: a page file registers its handlers from
// init with mount, so adding a page touches no shared list.
var mounts = map[string]func(*UI){}

// mount registers the function that adds a nav page's handlers (u.get and
// u.post under "/<name>"). Call it from the page file's init.
func mount(name string, fn func(*UI)) {
	if _, dup := mounts[name]; dup {
		panic("ui: page " + name + " mounted twice")
	}
	mounts[name] = fn
}

// sharedMounts add endpoints that belong to no one nav page (the slug
// check providers and groups share).
var sharedMounts []func(*UI)

// mountShared registers such an endpoint; call it from the file's init.
func mountShared(fn func(*UI)) { sharedMounts = append(sharedMounts, fn) }

func navEntry(name string) navPage {
	for _, p := range nav {
		if p.Name == name {
			return p
		}
	}
	return navPage{Name: name, Title: name}
}

func navLinks(active string) []navLink {
	out := make([]navLink, len(nav))
	for i, p := range nav {
		out[i] = navLink{Name: p.Name, Title: p.Title, URL: link(p.Name), Active: p.Name == active}
	}
	return out
}

// newView prepares a page's view: the navigation, the org the request is
// about and the orgs the token may see. withProject adds the project
// selector (pages whose data belongs to one project). The org is ?org=
// (or the form's org) when the token may see it, else "default" or the
// first; an org the token may not see is a 404, as in the admin API.
func (u *UI) newView(r *request, page string, withProject bool) (*view, error) {
	e := navEntry(page)
	// The switchers lead to the page's root: an item of one org (a
	// provider's page) does not exist in another.
	v := &view{Page: page, Title: e.Title, Nav: navLinks(page), Scope: r.sess.scopeLabel(), CSRF: r.sess.csrf,
		Path: link(page)}
	orgs, err := u.svc.ListOrgs(r.Context(), admin.PageRequest{Limit: 1000})
	if err != nil {
		return nil, err
	}
	for _, o := range orgs.Data {
		v.Orgs = append(v.Orgs, o.Name)
	}
	v.Org, err = choose(v.Orgs, r.FormValue("org"), func(org string) error {
		_, err := u.svc.GetOrg(r.Context(), org)
		return err
	})
	if err != nil {
		return nil, err
	}
	if !withProject || v.Org == "" {
		return v, nil
	}
	projects, err := u.svc.ListProjects(r.Context(), v.Org, admin.PageRequest{Limit: 1000})
	if err != nil {
		return nil, err
	}
	v.Projects = []string{}
	for _, p := range projects.Data {
		v.Projects = append(v.Projects, p.Name)
	}
	v.Project, err = choose(v.Projects, r.FormValue("project"), func(project string) error {
		_, err := u.svc.GetProject(r.Context(), v.Org, project)
		return err
	})
	if err != nil {
		return nil, err
	}
	return v, nil
}

// dataView is newView for a page whose data, d, belongs to one org
// (withProject: one project of it): a token that sees none gets a 404.
func (u *UI) dataView(r *request, page string, withProject bool, d any) (*view, error) {
	v, err := u.newView(r, page, withProject)
	if err != nil {
		return nil, err
	}
	switch {
	case withProject && (v.Org == "" || v.Project == ""):
		return nil, &admin.Error{Kind: admin.ErrNotFound, Code: admin.CodeNotFound, Message: "this token sees no project"}
	case v.Org == "":
		return nil, &admin.Error{Kind: admin.ErrNotFound, Code: admin.CodeNotFound, Message: "this token sees no org"}
	}
	v.Data = d
	return v, nil
}

// itemView is the view of an item's page: the page's view in mode
// "detail" (pageView), and the item the path names, loaded into it by
// item.
func itemView[D any](r *request, pageView func(*request, string) (*view, *D, error), item func(*request, *view, *D) error) (*view, *D, error) {
	v, d, err := pageView(r, "detail")
	if err == nil {
		err = item(r, v, d)
	}
	return v, d, err
}

// choose picks the org (or project) a page is about among listed, those
// its switcher offers: asked (the request's value) when given, else
// "default" when listed, else the first ("" for none). An asked one that
// is not listed (past the switcher's first page, or not visible) is
// checked by get: the Service decides, so an org token gets a 404 for
// others.
func choose(listed []string, asked string, get func(name string) error) (string, error) {
	switch {
	case asked != "":
		if !slices.Contains(listed, asked) {
			if err := get(asked); err != nil {
				return "", err
			}
		}
		return asked, nil
	case slices.Contains(listed, "default"):
		return "default", nil
	case len(listed) > 0:
		return listed[0], nil
	}
	return "", nil
}

// coming is the placeholder of a nav page not built yet.
func (u *UI) coming(p navPage) handler {
	return func(w http.ResponseWriter, r *request) error {
		v, err := u.newView(r, p.Name, false)
		if err != nil {
			return err
		}
		v.Page, v.Data = "coming", p
		u.render(w, http.StatusOK, v, "")
		return nil
	}
}

// isHTMX reports an htmx request, which gets a fragment instead of the
// whole page.
func isHTMX(r *request) bool { return r.Header.Get("HX-Request") == "true" }
