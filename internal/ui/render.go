package ui

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"path"
	"strings"
	"time"

	"github.com/rolter/rolter/internal/admin"
	"github.com/rolter/rolter/internal/store"
)

//go:embed templates
var templateFS embed.FS

// templates are one template set per page: the shared layout.html and
// partials.html, plus the page's own file, which defines "content" (the
// page body) and any fragments it re-renders alone for htmx. Page files
// cannot collide, because each is parsed into its own set.
type templates struct {
	pages map[string]*template.Template
	// base holds only the shared files, for fragments no page owns.
	base *template.Template
}

// shared are the files every page set starts from.
var shared = []string{"templates/layout.html", "templates/partials.html"}

func mustParseTemplates(static *staticFiles) *templates {
	funcs := template.FuncMap{
		"asset":          static.url,
		"link":           link,
		"ago":            ago,
		"stamp":          func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05 UTC") },
		"join":           strings.Join,
		"field":          fieldError,
		"inc":            func(n int) int { return n + 1 },
		"dict":           dict,
		"status":         statusClass,
		"policy":         policyText,
		"readiness":      readinessWord,
		"providerStatus": providerStatus,
	}
	base := template.Must(template.New("").Funcs(funcs).ParseFS(templateFS, shared...))
	t := &templates{pages: map[string]*template.Template{}, base: base}
	files, err := fs.Glob(templateFS, "templates/*.html")
	if err != nil {
		panic(err)
	}
	for _, f := range files {
		name := strings.TrimSuffix(path.Base(f), ".html")
		if name == "layout" || name == "partials" {
			continue
		}
		set := template.Must(base.Clone()) // before base is ever executed, as Clone requires
		t.pages[name] = template.Must(set.ParseFS(templateFS, f))
	}
	return t
}

// view is what every page template gets: the layout's data, and the
// page's own in Data.
type view struct {
	// Page is the template (and, for nav pages, the nav entry) rendered.
	Page  string
	Title string
	// Nav is nil on pages outside the session (login).
	Nav      []navLink
	Scope    string
	CSRF     string
	Org      string
	Orgs     []string
	Project  string
	Projects []string // nil: the page has no project selector
	// Path is the page's root, where the org and project switchers go.
	Path string
	Data any
}

type navLink struct {
	Name, Title, URL string
	Active           bool
}

// Back is the link from an item's page, or a form, back to the page's
// list in the view's org and project.
func (v *view) Back() navLink {
	return navLink{Name: v.Page, Title: navEntry(v.Page).Title, URL: link(v.Page, "org", v.Org, "project", v.Project)}
}

// render writes the whole page, or with fragment set only that template
// of the page's set (an htmx swap). It renders into a buffer first, so a
// template failure is a clean 500, never half a page.
func (u *UI) render(w http.ResponseWriter, status int, v *view, fragment string) {
	set := u.tmpl.pages[v.Page]
	if set == nil {
		panic("ui: no template " + v.Page)
	}
	name := "layout"
	if fragment != "" {
		name = fragment
	}
	var b bytes.Buffer
	if err := set.ExecuteTemplate(&b, name, v); err != nil {
		u.log.Error("ui template failed", "page", v.Page, "template", name, "err", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(b.Bytes())
}

// renderPartial writes one template of partials.html alone: a fragment
// several pages share (the slug check).
func (u *UI) renderPartial(w http.ResponseWriter, name string, data any) {
	var b bytes.Buffer
	if err := u.tmpl.base.ExecuteTemplate(&b, name, data); err != nil {
		u.log.Error("ui template failed", "template", name, "err", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = w.Write(b.Bytes())
}

// errorPage is the data of error.html.
type errorPage struct {
	Status  int
	Code    string
	Message string
}

// renderError shows an error page; with a session it keeps the
// navigation.
func (u *UI) renderError(w http.ResponseWriter, r *http.Request, ss *session, status int, code, msg string) {
	v := &view{Page: "error", Title: http.StatusText(status), Data: errorPage{Status: status, Code: code, Message: msg}}
	if ss != nil {
		v.Nav, v.CSRF, v.Scope = navLinks(""), ss.csrf, ss.scopeLabel()
	}
	if r.Header.Get("HX-Request") == "true" {
		u.render(w, status, v, "content")
		return
	}
	u.render(w, status, v, "")
}

// link builds a UI URL: the path under Prefix and query pairs, leaving out
// empty values, so a template writes {{link "providers" "org" .Org "q" .Q}}.
func link(p string, kv ...string) string {
	q := url.Values{}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] != "" {
			q.Set(kv[i], kv[i+1])
		}
	}
	u := Prefix + "/" + strings.TrimPrefix(p, "/")
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	return u
}

// dict makes a map for passing several values to a partial.
func dict(kv ...any) (map[string]any, error) {
	if len(kv)%2 != 0 {
		return nil, errors.New("dict: odd number of arguments")
	}
	m := make(map[string]any, len(kv)/2)
	for i := 0; i < len(kv); i += 2 {
		k, ok := kv[i].(string)
		if !ok {
			return nil, fmt.Errorf("dict: key %v is not a string", kv[i])
		}
		m[k] = kv[i+1]
	}
	return m, nil
}

// ago is a coarse age, "12 min ago".
func ago(t time.Time) string {
	d := time.Since(t)
	switch {
	case d < time.Minute:
		return "just now"
	case d < time.Hour:
		return fmt.Sprintf("%d min ago", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%d h ago", int(d.Hours()))
	}
	return fmt.Sprintf("%d days ago", int(d.Hours()/24))
}

// statusClass maps a state word to its colour class (UI.md: a word plus a
// colour, never colour alone).
func statusClass(state string) string {
	switch state {
	case "ready", "healthy", "available", "active":
		return "st-ok"
	case "draining", "pending", "cooling", "unknown":
		return "st-warn"
	case "not_ready", "not ready", "down", "refused", "taken":
		return "st-bad"
	}
	return "st-off"
}

// formErr is an admin error as a form shows it: the message and code at
// the top, and each field's message next to that field.
type formErr struct {
	Code       string
	Message    string
	Fields     map[string]string
	Suggestion string
}

// asFormErr turns a Service error into what a form shows; ok is false for
// an error that is not the caller's (internal, store unavailable), which
// the handler returns as an error page instead.
func asFormErr(err error) (*formErr, bool) {
	var ae *admin.Error
	if !errors.As(err, &ae) || !(errors.Is(ae, admin.ErrInvalid) || errors.Is(ae, admin.ErrConflict) || errors.Is(ae, admin.ErrNotFound)) {
		return nil, false
	}
	return &formErr{Code: ae.Code, Message: ae.Message, Fields: ae.Fields, Suggestion: ae.Suggestion}, true
}

// finish ends a form post with the Service's answer err. No error: a
// redirect to to (post/redirect/get); to is followed only then, so it may
// be built from the answer. An error that is the caller's to fix
// (asFormErr) goes to again, which shows the page once more with it; any
// other is returned, as an error page.
func finish(w http.ResponseWriter, r *request, err error, again func(*formErr) error, to string) error {
	if e, ok := asFormErr(err); ok {
		return again(e)
	} else if err != nil {
		return err
	}
	seeOther(w, r, to)
	return nil
}

// formAgain is finish's again for a page whose form shows its error at
// *at: the page rendered once more (422), the form as typed.
func (u *UI) formAgain(w http.ResponseWriter, v *view, at **formErr) func(*formErr) error {
	return func(e *formErr) error {
		*at = e
		u.render(w, http.StatusUnprocessableEntity, v, "")
		return nil
	}
}

// fromList reports an action pressed on a row of a list (?from=list): it
// returns to the list rather than to the item's page.
func fromList(r *request) bool { return r.URL.Query().Get("from") == "list" }

// actionAgain is finish's again for an action on one item (a revoke, an
// apply) that the Service refused: the page it was pressed on once more,
// with the error at *at (422). That is the list when fromList (list loads
// it, and *mode becomes "list"), else the item's page (item loads it).
func (u *UI) actionAgain(w http.ResponseWriter, r *request, v *view, mode *string, at **formErr, list, item func() error) func(*formErr) error {
	return func(e *formErr) error {
		load := item
		if fromList(r) {
			*mode, load = "list", list
		}
		if err := load(); err != nil {
			return err
		}
		*at = e
		u.render(w, http.StatusUnprocessableEntity, v, "")
		return nil
	}
}

// seeOther ends a successful form post with a redirect (post/redirect/get),
// so reloading the page does not repeat the action.
func seeOther(w http.ResponseWriter, r *request, to string) {
	http.Redirect(w, r.Request, to, http.StatusSeeOther)
}

// fieldError is the message a form error names for field, "" for none;
// templates call it as {{field .Err "base_url"}}.
func fieldError(fe *formErr, field string) string {
	if fe == nil {
		return ""
	}
	return fe.Fields[field]
}

// readinessWord is the word for an API readiness state.
func readinessWord(state string) string { return strings.ReplaceAll(state, "_", " ") }

// providerStatus is a provider's status word: deleted, its readiness, or
// unknown before the first probe.
func providerStatus(p admin.ProviderView) string {
	switch {
	case p.DeletedAt != nil:
		return "deleted"
	case p.Readiness != nil:
		return readinessWord(p.Readiness.State)
	}
	return "unknown"
}

// policyText is a governing policy in a few words.
func policyText(p store.Policy) string {
	var parts []string
	if p.MaxOutputTokens > 0 {
		parts = append(parts, fmt.Sprintf("max output %d", p.MaxOutputTokens))
	}
	if p.Tools == "deny" {
		parts = append(parts, "no tools")
	}
	if p.Media == "deny" {
		parts = append(parts, "no media")
	}
	if p.MaxConcurrency > 0 {
		parts = append(parts, fmt.Sprintf("≤%d concurrent", p.MaxConcurrency))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, " · ")
}
