package ui

import (
	"cmp"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rolter/rolter/internal/admin"
	"github.com/rolter/rolter/internal/fleet"
	"github.com/rolter/rolter/internal/fleetapi"
	"github.com/rolter/rolter/internal/store"
)

// The Fleet page (design 002): the org's vLLM hosts with their state,
// "applied rev A / current rev C" with a skew badge and what the pending
// restart would change, the liveness of each box's config fetch as a
// coloured age, notes edited inline, Apply and Retire behind confirmation
// dialogs, and per host its recipe, shown and edited. Adding a host shows
// its host key once. Fleet keys are on the Settings page.
func init() {
	mount("fleet", func(u *UI) {
		u.get("/fleet", u.fleetList)
		u.get("/fleet/_new", u.hostNew)
		u.post("/fleet/_new", u.hostCreate)
		u.get("/fleet/{id}", u.hostDetail)
		u.post("/fleet/{id}", u.hostUpdate)
		u.post("/fleet/{id}/notes", u.hostNotes)
		u.post("/fleet/{id}/apply", u.hostAction(false))
		u.post("/fleet/{id}/retire", u.hostAction(true))
	})
}

// fleetPage is the data of fleet.html; Mode is "list", "new" or "detail".
type fleetPage struct {
	Mode string
	// List: the hosts shown (after the filters), the count of live hosts,
	// and the filters and sort as given.
	Hosts       []hostRow
	Live, Total int
	State, Q    string
	Sort        string
	States      []string
	// Detail: the host.
	H hostRow
	// New and detail: the form as typed and its error.
	Form hostForm
	Err  *formErr
	// ActionErr is the error of an apply, a retire or a notes edit (on the
	// list: NotesFor names the host whose notes form it belongs to).
	ActionErr *formErr
	NotesFor  int64
	NotesText string
	// Done names what the last action did, for the notice at the top.
	Done, DoneHost string
	// Minted is a new host's key, shown once.
	Minted      *minted
	Projects    []string
	SourceKinds []string
}

// hostRow is a host as the board shows it.
type hostRow struct {
	admin.HostView
}

// Retired reports a retired host.
func (h hostRow) Retired() bool { return h.State == store.HostRetired }

// StateClass is the colour of the host's state word (UI.md): serving
// green, pending amber, down red, retired grey.
func (h hostRow) StateClass() string {
	switch h.State {
	case store.HostServing:
		return "st-ok"
	case store.HostPending:
		return "st-warn"
	case store.HostDown:
		return "st-bad"
	}
	return "st-off"
}

// Addr is ip:port, bracketed for IPv6.
func (h hostRow) Addr() string {
	if strings.Contains(h.IP, ":") {
		return "[" + h.IP + "]:" + strconv.Itoa(h.Port)
	}
	return h.IP + ":" + strconv.Itoa(h.Port)
}

// Current and Applied are the short revisions.
func (h hostRow) Current() string { return short(h.Revision) }
func (h hostRow) Applied() string { return short(h.AppliedRevision) }

// CanApply: a live host whose box runs an older revision, with no apply
// requested yet.
func (h hostRow) CanApply() bool { return !h.Retired() && h.Skew && !h.ApplyRequested }

// Age is the liveness as a coarse age ("12 min ago"), "never" before the
// first config fetch.
func (h hostRow) Age() string {
	if h.Liveness.AgeSeconds == nil {
		return "never fetched"
	}
	return ago(time.Now().Add(-time.Duration(*h.Liveness.AgeSeconds) * time.Second))
}

// AgeClass colours the age (design 002): green under an hour, amber up to
// a week, red beyond, grey before the first fetch.
func (h hostRow) AgeClass() string {
	switch h.Liveness.Class {
	case "green":
		return "st-ok"
	case "amber":
		return "st-warn"
	case "red":
		return "st-bad"
	}
	return "st-off"
}

// FetchedAt is the exact time of the last config fetch, for the hover.
func (h hostRow) FetchedAt() string {
	if h.LastConfigFetch == nil {
		return "the box has not fetched its config yet"
	}
	return "last config fetch " + h.LastConfigFetch.UTC().Format("2006-01-02 15:04:05 UTC")
}

// Contract is the recipe's caller-visible parameters (the pool contract).
func (h hostRow) Contract() []fleet.Param {
	if h.Recipe.VLLM == nil {
		return nil
	}
	return fleet.ContractParams(h.Recipe.VLLM)
}

// hostForm is the host form as typed. Field names are the API's, so the
// Service's field errors land on them.
type hostForm struct {
	IP, Port, Project, ModelName, Notes                     string
	Model, Kind, Repo, Revision, URL, Ref, Path, VRAM, Disk string
	Args, KVCache                                           string
	AutoApply                                               bool
}

// readHostForm reads the host form as typed.
func readHostForm(r *request) hostForm {
	f := func(name string) string { return strings.TrimSpace(r.PostForm.Get(name)) }
	return hostForm{IP: f("ip"), Port: f("port"), Project: f("project"), ModelName: f("model_name"), Notes: r.PostForm.Get("notes"),
		Model: f("recipe.vllm.model"), Kind: f("recipe.vllm.source.kind"), Repo: f("recipe.vllm.source.repo"),
		Revision: f("recipe.vllm.source.revision"), URL: f("recipe.vllm.source.url"), Ref: f("recipe.vllm.source.ref"),
		Path: f("recipe.vllm.source.path"), VRAM: f("recipe.vllm.vram_gb"), Disk: f("recipe.vllm.disk_gb"),
		Args: r.PostForm.Get("recipe.vllm.args"), KVCache: f("recipe.vllm.kv_cache"), AutoApply: r.PostForm.Get("auto_apply") == "on"}
}

// hostFormOf fills the form from a stored host.
func hostFormOf(h admin.HostView) hostForm {
	f := hostForm{IP: h.IP, Port: strconv.Itoa(h.Port), Project: h.Project, ModelName: h.ModelName, Notes: h.Notes, AutoApply: h.AutoApply}
	if v := h.Recipe.VLLM; v != nil {
		num := func(x float64) string { return strconv.FormatFloat(x, 'g', -1, 64) }
		f.Model, f.Kind, f.Repo, f.Revision = v.Model, v.Source.Kind, v.Source.Repo, v.Source.Revision
		f.URL, f.Ref, f.Path, f.VRAM, f.Disk = v.Source.URL, v.Source.Ref, v.Source.Path, num(v.VRAMGB), num(v.DiskGB)
		f.Args = strings.Join(v.Args, "\n")
		f.KVCache = v.KVCache
	}
	return f
}

// recipe converts the form's recipe and port; what does not parse is
// reported by the API's field name, the rest is the Service's to judge.
// argLines maps each argument to its line, for the args' errors.
func (f hostForm) recipe(fe map[string]string) (rc fleetapi.Recipe, port int, argLines []int) {
	port = parseInt(fe, "port", f.Port)
	gb := func(field, s string) float64 {
		if s == "" {
			return 0
		}
		x, err := strconv.ParseFloat(s, 64)
		if err != nil {
			fe[field] = "must be a number of GB, e.g. 12 or 12.5"
		}
		return x
	}
	v := &fleetapi.VLLM{Model: f.Model, Source: fleetapi.Source{Kind: f.Kind, Repo: f.Repo, Revision: f.Revision, URL: f.URL,
		Ref: f.Ref, Path: f.Path}, VRAMGB: gb("recipe.vllm.vram_gb", f.VRAM), DiskGB: gb("recipe.vllm.disk_gb", f.Disk), KVCache: f.KVCache}
	v.Args, argLines = listLines(f.Args)
	return fleetapi.Recipe{VLLM: v}, port, argLines
}

// hostFormAgain is finish's again for the host form: the errors of
// single arguments are folded onto the args field. argLines maps each
// argument to its line.
func (u *UI) hostFormAgain(w http.ResponseWriter, r *request, v *view, d *fleetPage, argLines []int) func(*formErr) error {
	return u.listFormAgain(w, r, v, &d.Err, "recipe.vllm.args", argLines)
}

// fleetStates are the list's state filter: "" is every live host.
var fleetStates = []string{"", store.HostServing, store.HostPending, store.HostDown, store.HostRetired, "all"}

func (u *UI) fleetView(r *request, mode string) (*view, *fleetPage, error) {
	d := &fleetPage{Mode: mode, Done: r.FormValue("done"), DoneHost: r.FormValue("host"), States: fleetStates,
		SourceKinds: []string{fleetapi.SourceHF, fleetapi.SourceURL, fleetapi.SourceRegistry, fleetapi.SourceLocal}}
	v, err := u.dataView(r, "fleet", false, d)
	return v, d, err
}

func (u *UI) fleetList(w http.ResponseWriter, r *request) error {
	v, d, err := u.fleetView(r, "list")
	if err != nil {
		return err
	}
	if err := u.loadHosts(r, v, d); err != nil {
		return err
	}
	u.render(w, http.StatusOK, v, "")
	return nil
}

// loadHosts fills the list: every host of the org, filtered by state and
// the search text, sorted.
func (u *UI) loadHosts(r *request, v *view, d *fleetPage) error {
	hosts, err := all(func(p admin.PageRequest) (admin.Page[admin.HostView], error) {
		return u.svc.ListHosts(r.Context(), v.Org, p)
	})
	if err != nil {
		return err
	}
	d.State, d.Q, d.Sort = r.URL.Query().Get("state"), strings.TrimSpace(r.URL.Query().Get("q")), r.URL.Query().Get("sort")
	q := strings.ToLower(d.Q)
	d.Total = len(hosts)
	d.Hosts = make([]hostRow, 0, len(hosts))
	for _, h := range hosts {
		if h.State != store.HostRetired {
			d.Live++
		}
		switch {
		case d.State == "" && h.State == store.HostRetired,
			d.State != "" && d.State != "all" && h.State != d.State:
			continue
		}
		if q != "" && !strings.Contains(strings.ToLower(strings.Join([]string{strconv.FormatInt(h.ID, 10), h.IP,
			h.ModelName, h.Project, h.Notes, h.Provider, h.State}, "\x00")), q) {
			continue
		}
		d.Hosts = append(d.Hosts, hostRow{h})
	}
	slices.SortStableFunc(d.Hosts, hostOrder(d.Sort))
	return nil
}

// hostOrder sorts the board: by id (the default), model name, state, or
// liveness (stalest first, never-fetched last).
func hostOrder(by string) func(a, b hostRow) int {
	byID := func(a, b hostRow) int { return cmp.Compare(a.ID, b.ID) }
	switch by {
	case "model":
		return func(a, b hostRow) int {
			if c := strings.Compare(a.ModelName, b.ModelName); c != 0 {
				return c
			}
			return byID(a, b)
		}
	case "state":
		return func(a, b hostRow) int {
			if c := strings.Compare(a.State, b.State); c != 0 {
				return c
			}
			return byID(a, b)
		}
	case "liveness":
		age := func(h hostRow) int64 {
			if h.Liveness.AgeSeconds == nil {
				return -1
			}
			return *h.Liveness.AgeSeconds
		}
		return func(a, b hostRow) int {
			if c := cmp.Compare(age(b), age(a)); c != 0 {
				return c
			}
			return byID(a, b)
		}
	}
	return byID
}

// hostBack is where an action on a host returns: its page, or the board
// when the action was taken there.
func hostBack(r *request, v *view, id string, done string) string {
	if fromList(r) {
		return link("fleet", "org", v.Org, "done", done, "host", id)
	}
	return link("fleet/"+id, "org", v.Org, "done", done)
}

// newHostView is the view of the add-host form, with the org's projects
// for its picker.
func (u *UI) newHostView(r *request) (*view, *fleetPage, error) {
	v, d, err := u.fleetView(r, "new")
	if err == nil {
		d.Projects, err = u.projectNames(r, v.Org)
	}
	return v, d, err
}

func (u *UI) hostNew(w http.ResponseWriter, r *request) error {
	v, d, err := u.newHostView(r)
	if err != nil {
		return err
	}
	d.Form = hostForm{Port: "8000", Project: "default", Kind: fleetapi.SourceHF}
	u.render(w, http.StatusOK, v, "")
	return nil
}

func (u *UI) projectNames(r *request, org string) ([]string, error) {
	ps, err := all(func(p admin.PageRequest) (admin.Page[admin.ProjectView], error) {
		return u.svc.ListProjects(r.Context(), org, p)
	})
	if err != nil {
		return nil, err
	}
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.Name
	}
	return out, nil
}

func (u *UI) hostCreate(w http.ResponseWriter, r *request) error {
	v, d, err := u.newHostView(r)
	if err != nil {
		return err
	}
	d.Form = readHostForm(r)
	fe := map[string]string{}
	rc, port, argLines := d.Form.recipe(fe)
	again := u.hostFormAgain(w, r, v, d, argLines)
	if len(fe) > 0 {
		return again(fieldsErr(fe))
	}
	h, err := u.svc.CreateHost(r.Context(), v.Org, admin.HostInput{IP: d.Form.IP, Port: port, Project: d.Form.Project,
		ModelName: d.Form.ModelName, Recipe: rc, Notes: d.Form.Notes, AutoApply: d.Form.AutoApply})
	if e, ok := asFormErr(err); ok {
		return again(e)
	} else if err != nil {
		return err
	}
	// The key is in the create answer only: show it now, on the new
	// host's page, and never again.
	key := h.APIKey
	h.APIKey = ""
	d.Mode, d.H, d.Form, d.Done = "detail", hostRow{h}, hostFormOf(h), "created"
	v.Title = "Host " + strconv.FormatInt(h.ID, 10)
	d.Minted = &minted{Title: "Host key of host " + strconv.FormatInt(h.ID, 10), Secret: key,
		Note: "vLLM on the box requires this key and the gateway sends it; the box receives it with its assignment, so you need it only to call the box's vLLM directly."}
	id := strconv.FormatInt(h.ID, 10)
	u.renderMinted(w, r, v, link("fleet/"+id, "org", v.Org))
	return nil
}

// host loads the host the path names into d.
func (u *UI) host(r *request, v *view, d *fleetPage) error {
	h, err := u.svc.GetHost(r.Context(), v.Org, r.PathValue("id"))
	if err != nil {
		return err
	}
	d.H, v.Title = hostRow{h}, "Host "+strconv.FormatInt(h.ID, 10)
	return nil
}

// hostAsStored loads the host the path names, its form as stored.
func (u *UI) hostAsStored(r *request, v *view, d *fleetPage) error {
	if err := u.host(r, v, d); err != nil {
		return err
	}
	d.Form = hostFormOf(d.H.HostView)
	return nil
}

func (u *UI) hostDetail(w http.ResponseWriter, r *request) error {
	v, _, err := itemView(r, u.fleetView, u.hostAsStored)
	if err != nil {
		return err
	}
	u.render(w, http.StatusOK, v, "")
	return nil
}

// hostUpdate saves the edit form: port, recipe, notes and auto apply. The
// port and recipe are sent only when they changed, so saving a note does
// not re-check the pool contract (nor would an unchanged recipe make a new
// revision anyway).
func (u *UI) hostUpdate(w http.ResponseWriter, r *request) error {
	v, d, err := itemView(r, u.fleetView, u.host)
	if err != nil {
		return err
	}
	d.Form = readHostForm(r)
	// Identity fields are not in the edit form; show the stored ones.
	d.Form.IP, d.Form.Project, d.Form.ModelName = d.H.IP, d.H.Project, d.H.ModelName
	fe := map[string]string{}
	rc, port, argLines := d.Form.recipe(fe)
	again := u.hostFormAgain(w, r, v, d, argLines)
	if len(fe) > 0 {
		return again(fieldsErr(fe))
	}
	patch := admin.HostPatch{Notes: &d.Form.Notes, AutoApply: &d.Form.AutoApply}
	if port != d.H.Port {
		patch.Port = &port
	}
	if !reflect.DeepEqual(rc, d.H.Recipe) {
		patch.Recipe = &rc
	}
	h, err := u.svc.PatchHost(r.Context(), v.Org, r.PathValue("id"), patch)
	if e, ok := asFormErr(err); ok {
		return again(e)
	} else if err != nil {
		return err
	}
	done := "updated"
	if h.Revision != d.H.Revision {
		done = "new-revision"
	}
	seeOther(w, r, link("fleet/"+strconv.FormatInt(h.ID, 10), "org", v.Org, "done", done))
	return nil
}

// hostNotes saves a host's notes from the board's inline form. For htmx
// the answer is the notes cell alone.
func (u *UI) hostNotes(w http.ResponseWriter, r *request) error {
	v, d, err := u.fleetView(r, "list") // parses the form
	if err != nil {
		return err
	}
	notes, id := r.PostForm.Get("notes"), r.PathValue("id")
	h, err := u.svc.PatchHost(r.Context(), v.Org, id, admin.HostPatch{Notes: &notes})
	e, ok := asFormErr(err)
	if err != nil && !ok {
		return err
	}
	if isHTMX(r) {
		if e != nil {
			if d.H.HostView, err = u.svc.GetHost(r.Context(), v.Org, id); err != nil {
				return err
			}
			d.ActionErr, d.NotesFor, d.NotesText = e, d.H.ID, notes
			u.render(w, http.StatusUnprocessableEntity, v, "host-notes")
			return nil
		}
		d.H = hostRow{h}
		u.render(w, http.StatusOK, v, "host-notes")
		return nil
	}
	if e != nil {
		if err := u.loadHosts(r, v, d); err != nil {
			return err
		}
		n, _ := strconv.ParseInt(id, 10, 64)
		d.ActionErr, d.NotesFor, d.NotesText = e, n, notes
		u.render(w, http.StatusUnprocessableEntity, v, "")
		return nil
	}
	seeOther(w, r, hostBack(r, v, id, "notes"))
	return nil
}

// hostAction applies (restarts the box onto the current revision) or
// retires a host, after the confirmation dialog.
func (u *UI) hostAction(retire bool) handler {
	return func(w http.ResponseWriter, r *request) error {
		v, d, err := u.fleetView(r, "detail")
		if err != nil {
			return err
		}
		id := r.PathValue("id")
		done := "applied"
		if retire {
			done = "retired"
			_, err = u.svc.RetireHost(r.Context(), v.Org, id)
		} else {
			_, err = u.svc.ApplyHost(r.Context(), v.Org, id, r.FormValue("force") == "on")
		}
		again := u.actionAgain(w, r, v, &d.Mode, &d.ActionErr, func() error { return u.loadHosts(r, v, d) },
			func() error { return u.hostAsStored(r, v, d) })
		return finish(w, r, err, again, hostBack(r, v, id, done))
	}
}
