package ui

import (
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/rolter/rolter/internal/admin"
	"github.com/rolter/rolter/internal/store"
)

// The Groups page (design 000, addendum): provider groups of an org, each
// one address "group-slug/model" over its members, with their weights and
// model maps. A provider may belong to several groups; the page shows that
// overlap, on the list and beside each member, since a provider shared by
// two groups takes both groups' traffic.
//
// Group slugs share the org's namespace with providers and never start
// with '_', so collection actions are "/groups/_...".
func init() {
	mount("groups", func(u *UI) {
		u.get("/groups", u.groupList)
		u.get("/groups/_new", u.groupNew)
		u.post("/groups/_new", u.groupCreate)
		// htmx fragments of the editor.
		u.get("/groups/_member", u.groupMemberRow)
		u.get("/groups/_overlap", u.groupMemberOverlap)
		u.get("/groups/{slug}", u.groupDetail)
		u.post("/groups/{slug}", u.groupUpdate)
		u.post("/groups/{slug}/delete", u.groupDelete(false))
		u.post("/groups/{slug}/purge", u.groupDelete(true))
	})
}

// groupsPage is the data of groups.html; Mode picks the view: "list",
// "new" or "detail".
type groupsPage struct {
	Mode string
	// List: the groups and the providers that are members of several.
	Groups  []groupRow
	Overlap []overlap
	// Detail: the stored group.
	G groupRow
	// New and detail: the form as typed and its error; the providers for
	// the member pickers.
	Form       groupForm
	Err        *formErr
	Providers  []providerOption
	NextRow    int
	Strategies []string
	Tristates  []string
	// Done names what the last action did (the notice at the top);
	// DoneSlug the group it did it to, PreviousSlug the slug before a slug
	// change.
	Done, DoneSlug, PreviousSlug string
}

// groupRow is a group with, per member, the other groups it is in.
type groupRow struct {
	admin.GroupView
	Members []memberRow
}

// memberRow is a stored member: its provider deleted or not, and the
// other groups the provider is a member of.
type memberRow struct {
	admin.GroupMemberView
	Deleted bool
	AlsoIn  []string
	// Map is the model map as "client → upstream" pairs, in order.
	Map []string
}

// overlap is a provider that is a member of more than one group.
type overlap struct {
	Provider string
	Groups   []string
}

// groupForm is the group form as typed.
type groupForm struct {
	Name, Slug, Strategy string
	Policy               policyForm
	Members              []memberForm
	// Edit only: a slug change must be allowed and the new slug typed
	// again, as for providers.
	AllowSlugChange bool
	ConfirmSlug     string
}

// memberForm is one member row as typed. Row is its id prefix in the
// page ("m2"); Index its position among the members sent, which the
// Service's field names use ("members[Index].weight").
type memberForm struct {
	Row, Provider, Weight, ModelMap string
	Index                           int
	// Listed: the provider is one the picker offers (live); a stored
	// member whose provider was deleted is shown apart.
	Listed bool
	Note   memberNote
}

// memberNote is what a member row says about its provider: deleted, and
// the other groups it is in. It is the "member-overlap" fragment that
// /groups/_overlap answers when the picker changes.
type memberNote struct {
	Row      string
	Provider string
	Deleted  bool
	AlsoIn   []string
}

// memberships maps each provider slug to the groups it is a member of, in
// slug order.
func memberships(groups []admin.GroupView) map[string][]string {
	in := map[string][]string{}
	for _, g := range groups {
		for _, m := range g.Members {
			in[m.Provider] = append(in[m.Provider], g.Slug)
		}
	}
	for p := range in {
		slices.Sort(in[p])
	}
	return in
}

// others are the groups of provider other than self.
func others(in map[string][]string, provider, self string) []string {
	var out []string
	for _, g := range in[provider] {
		if g != self {
			out = append(out, g)
		}
	}
	return out
}

func (u *UI) groupsView(r *request, mode string) (*view, *groupsPage, error) {
	d := &groupsPage{Mode: mode, Done: r.FormValue("done"), DoneSlug: r.FormValue("slug"), PreviousSlug: r.FormValue("from"),
		Strategies: strategies, Tristates: tristates}
	v, err := u.dataView(r, "groups", false, d)
	return v, d, err
}

// groupsAndProviders reads the org's groups (by slug) and its providers,
// for the overlap and the pickers.
func (u *UI) groupsAndProviders(r *request, org string) ([]admin.GroupView, []admin.ProviderView, error) {
	groups, err := all(func(p admin.PageRequest) (admin.Page[admin.GroupView], error) {
		return u.svc.ListGroups(r.Context(), org, p)
	})
	if err != nil {
		return nil, nil, err
	}
	slices.SortFunc(groups, func(a, b admin.GroupView) int { return strings.Compare(a.Slug, b.Slug) })
	providers, err := u.providers(r, org)
	return groups, providers, err
}

// rowOf is a stored group as the page shows it.
func rowOf(g admin.GroupView, in map[string][]string, deleted map[string]bool) groupRow {
	row := groupRow{GroupView: g}
	for _, m := range g.Members {
		mr := memberRow{GroupMemberView: m, Deleted: deleted[m.Provider], AlsoIn: others(in, m.Provider, g.Slug)}
		for _, from := range slices.Sorted(maps.Keys(m.ModelMap)) {
			mr.Map = append(mr.Map, from+" → "+m.ModelMap[from])
		}
		row.Members = append(row.Members, mr)
	}
	return row
}

func deletedSet(providers []admin.ProviderView) map[string]bool {
	out := map[string]bool{}
	for _, p := range providers {
		if p.DeletedAt != nil {
			out[p.Slug] = true
		}
	}
	return out
}

func (u *UI) groupList(w http.ResponseWriter, r *request) error {
	v, d, err := u.groupsView(r, "list")
	if err != nil {
		return err
	}
	groups, providers, err := u.groupsAndProviders(r, v.Org)
	if err != nil {
		return err
	}
	in, deleted := memberships(groups), deletedSet(providers)
	for _, g := range groups {
		d.Groups = append(d.Groups, rowOf(g, in, deleted))
	}
	for _, p := range slices.Sorted(maps.Keys(in)) {
		if len(in[p]) > 1 {
			d.Overlap = append(d.Overlap, overlap{Provider: p, Groups: in[p]})
		}
	}
	u.render(w, http.StatusOK, v, "")
	return nil
}

// editor fills the pickers and finishes the form's rows: numbered, each
// with what it says about its provider.
func (d *groupsPage) editor(groups []admin.GroupView, providers []admin.ProviderView, self string) {
	for _, p := range providers {
		if p.DeletedAt == nil {
			d.Providers = append(d.Providers, providerOption{Slug: p.Slug, Label: optionLabel(p.Slug, p.Name)})
		}
	}
	if len(d.Form.Members) == 0 {
		d.Form.Members = []memberForm{{Weight: "1"}}
	}
	in, deleted := memberships(groups), deletedSet(providers)
	for i := range d.Form.Members {
		m := &d.Form.Members[i]
		m.Row, m.Index = "m"+strconv.Itoa(i), i
		m.Listed = slices.ContainsFunc(d.Providers, func(o providerOption) bool { return o.Slug == m.Provider })
		m.Note = memberNote{Row: m.Row, Provider: m.Provider, Deleted: deleted[m.Provider], AlsoIn: others(in, m.Provider, self)}
	}
	d.NextRow = len(d.Form.Members)
}

// newGroupEditor reads the org's groups and providers and fills the
// editor of a new group with them (see editor).
func (u *UI) newGroupEditor(r *request, v *view, d *groupsPage) error {
	groups, providers, err := u.groupsAndProviders(r, v.Org)
	if err != nil {
		return err
	}
	d.editor(groups, providers, "")
	return nil
}

func (u *UI) groupNew(w http.ResponseWriter, r *request) error {
	v, d, err := u.groupsView(r, "new")
	if err != nil {
		return err
	}
	v.Title = "Add group"
	d.Form = groupForm{Strategy: strategies[0]}
	if err := u.newGroupEditor(r, v, d); err != nil {
		return err
	}
	u.render(w, http.StatusOK, v, "")
	return nil
}

func (u *UI) groupCreate(w http.ResponseWriter, r *request) error {
	v, d, err := u.groupsView(r, "new")
	if err != nil {
		return err
	}
	v.Title = "Add group"
	d.Form = readGroupForm(r)
	again := func(e *formErr) error {
		if err := u.newGroupEditor(r, v, d); err != nil {
			return err
		}
		return u.formAgain(w, v, &d.Err)(e)
	}
	in, fe := d.Form.input()
	if len(fe) > 0 {
		return again(fieldsErr(fe))
	}
	g, err := u.svc.CreateGroup(r.Context(), v.Org, admin.GroupInput{Slug: in.Slug, Name: in.Name, Strategy: in.Strategy,
		Members: in.Members, Policy: in.Policy})
	return finish(w, r, err, again, groupLink(v, g.Slug, "done", "created"))
}

// group loads the stored group the path names into d, and what the
// editor needs.
func (u *UI) group(r *request, v *view, d *groupsPage) ([]admin.GroupView, []admin.ProviderView, error) {
	g, err := u.svc.GetGroup(r.Context(), v.Org, r.PathValue("slug"))
	if err != nil {
		return nil, nil, err
	}
	groups, providers, err := u.groupsAndProviders(r, v.Org)
	if err != nil {
		return nil, nil, err
	}
	d.G, v.Title = rowOf(g, memberships(groups), deletedSet(providers)), "Group "+g.Slug
	return groups, providers, nil
}

// groupAsStored loads the stored group the path names (see group), its
// form as stored in the editor.
func (u *UI) groupAsStored(r *request, v *view, d *groupsPage) error {
	groups, providers, err := u.group(r, v, d)
	if err != nil {
		return err
	}
	d.Form = groupFormOf(d.G.GroupView)
	d.editor(groups, providers, d.G.Slug)
	return nil
}

func (u *UI) groupDetail(w http.ResponseWriter, r *request) error {
	v, _, err := itemView(r, u.groupsView, u.groupAsStored)
	if err != nil {
		return err
	}
	u.render(w, http.StatusOK, v, "")
	return nil
}

func (u *UI) groupUpdate(w http.ResponseWriter, r *request) error {
	v, d, err := u.groupsView(r, "detail")
	if err != nil {
		return err
	}
	groups, providers, err := u.group(r, v, d)
	if err != nil {
		return err
	}
	d.Form = readGroupForm(r)
	in, fe := d.Form.input()
	patch := admin.GroupPatch{Name: &in.Name, Strategy: &in.Strategy, Members: &in.Members, Policy: &in.Policy}
	if in.Slug != d.G.Slug {
		patch.Slug = &in.Slug
		// UI.md: a slug change needs the new slug typed again, beside the
		// Service's own allow_slug_change.
		if d.Form.AllowSlugChange && d.Form.ConfirmSlug != in.Slug {
			fe["confirm_slug"] = "type the new slug again to confirm the change"
		}
	}
	again := func(e *formErr) error {
		d.editor(groups, providers, d.G.Slug)
		return u.formAgain(w, v, &d.Err)(e)
	}
	if len(fe) > 0 {
		return again(fieldsErr(fe))
	}
	g, err := u.svc.UpdateGroup(r.Context(), v.Org, d.G.Slug, patch, d.Form.AllowSlugChange)
	done := "saved"
	if g.Slug != d.G.Slug {
		done = "slug-changed"
	}
	return finish(w, r, err, again, groupLink(v, g.Slug, "done", done, "from", d.G.Slug))
}

// groupDelete soft-deletes a group (its slug stays reserved) or, with
// purge, removes it and frees the slug (design 000 §3). A purge that keys'
// allowlists refuse shows their list; the console never forces it.
func (u *UI) groupDelete(purge bool) handler {
	return func(w http.ResponseWriter, r *request) error {
		v, d, err := u.groupsView(r, "detail")
		if err != nil {
			return err
		}
		slug := r.PathValue("slug")
		err = u.svc.DeleteGroup(r.Context(), v.Org, slug, purge, false)
		done := "deleted"
		if purge {
			done = "purged"
		}
		return finish(w, r, err, func(e *formErr) error {
			if err := u.groupAsStored(r, v, d); err != nil {
				return err
			}
			return u.formAgain(w, v, &d.Err)(e)
		}, link("groups", "org", v.Org, "done", done, "slug", slug))
	}
}

// groupLink is a link to a group's page in v's org.
func groupLink(v *view, slug string, kv ...string) string {
	return link("groups/"+url.PathEscape(slug), append([]string{"org", v.Org}, kv...)...)
}

// memberRowPattern is the row id an htmx fragment is for: "m" and digits,
// since it becomes element ids.
var memberRowPattern = rowIDPattern("m")

// groupMemberRow is a new, empty member row (the "+ Add member" button),
// with the button again, numbered for the row after it.
func (u *UI) groupMemberRow(w http.ResponseWriter, r *request) error {
	v, d, err := u.groupsView(r, "new")
	if err != nil {
		return err
	}
	n, err := strconv.Atoi(r.FormValue("i"))
	if err != nil || n < 0 || n > 9999 {
		return &admin.Error{Kind: admin.ErrInvalid, Code: admin.CodeValidation, Message: "the row number must be from 0 to 9999"}
	}
	_, providers, err := u.groupsAndProviders(r, v.Org)
	if err != nil {
		return err
	}
	d.editor(nil, providers, "")
	row := "m" + strconv.Itoa(n)
	d.Form.Members = []memberForm{{Row: row, Index: n, Weight: "1", Note: memberNote{Row: row}}}
	d.NextRow = n + 1
	u.render(w, http.StatusOK, v, "member-row-added")
	return nil
}

// groupMemberOverlap answers a member picker's change: the other groups
// the picked provider is in (?current= is the group being edited).
func (u *UI) groupMemberOverlap(w http.ResponseWriter, r *request) error {
	v, err := u.newView(r, "groups", false)
	if err != nil {
		return err
	}
	row := r.FormValue("row")
	if !memberRowPattern.MatchString(row) {
		return &admin.Error{Kind: admin.ErrInvalid, Code: admin.CodeValidation, Message: "row must be m followed by a number"}
	}
	groups, providers, err := u.groupsAndProviders(r, v.Org)
	if err != nil {
		return err
	}
	p := r.FormValue("member_provider")
	v.Data = memberNote{Row: row, Provider: p, Deleted: deletedSet(providers)[p], AlsoIn: others(memberships(groups), p, r.FormValue("current"))}
	u.render(w, http.StatusOK, v, "member-overlap-answer")
	return nil
}

// groupInput is the form converted for the Service.
type groupInput struct {
	Name, Slug, Strategy string
	Members              []admin.GroupMemberInput
	Policy               store.Policy
}

func readGroupForm(r *request) groupForm {
	f := func(name string) string { return strings.TrimSpace(r.PostForm.Get(name)) }
	form := groupForm{Name: f("name"), Slug: f("slug"), Strategy: f("strategy"), Policy: readPolicyForm(r),
		AllowSlugChange: r.PostForm.Get("allow_slug_change") == "on", ConfirmSlug: f("confirm_slug")}
	col := func(name string, i int) string {
		vs := r.PostForm[name]
		if i < len(vs) {
			return vs[i]
		}
		return ""
	}
	for i := range r.PostForm["member_provider"] {
		m := memberForm{Provider: strings.TrimSpace(col("member_provider", i)), Weight: strings.TrimSpace(col("member_weight", i)),
			ModelMap: strings.TrimSpace(col("member_model_map", i))}
		// A row with neither a provider nor a model map is an unused one.
		if m.Provider != "" || m.ModelMap != "" {
			form.Members = append(form.Members, m)
		}
	}
	return form
}

func groupFormOf(g admin.GroupView) groupForm {
	f := groupForm{Name: g.Name, Slug: g.Slug, Strategy: g.Strategy, Policy: policyFormOf(g.Policy)}
	for _, m := range g.Members {
		var lines []string
		for _, from := range slices.Sorted(maps.Keys(m.ModelMap)) {
			lines = append(lines, from+" = "+m.ModelMap[from])
		}
		f.Members = append(f.Members, memberForm{Provider: m.Provider, Weight: strconv.Itoa(m.Weight), ModelMap: strings.Join(lines, "\n")})
	}
	return f
}

// input converts the form; what cannot be parsed is named by the
// Service's field names, the rest is the Service's to judge.
func (f groupForm) input() (groupInput, map[string]string) {
	fe := map[string]string{}
	in := groupInput{Name: f.Name, Slug: f.Slug, Strategy: f.Strategy, Policy: f.Policy.policy(fe), Members: []admin.GroupMemberInput{}}
	for i, m := range f.Members {
		field := fmt.Sprintf("members[%d]", i)
		mi := admin.GroupMemberInput{Provider: m.Provider, ModelMap: parseModelMap(fe, field+".model_map", m.ModelMap)}
		mi.Weight, _ = parseWeight(fe, field+".weight", m.Weight)
		in.Members = append(in.Members, mi)
	}
	return in, fe
}

// parseModelMap reads a model map typed one pair a line, "client =
// upstream": the model a caller asks for, and what this member is sent.
func parseModelMap(fe map[string]string, field, s string) map[string]string {
	out := map[string]string{}
	for _, line := range strings.Split(s, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		from, to, ok := strings.Cut(line, "=")
		from, to = strings.TrimSpace(from), strings.TrimSpace(to)
		switch _, dup := out[from]; {
		case !ok || from == "" || to == "":
			fe[field] = fmt.Sprintf("%q: write each line as client-model = upstream-model", line)
		case dup:
			fe[field] = fmt.Sprintf("%q is mapped twice; map each client model once", from)
		default:
			out[from] = to
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}
