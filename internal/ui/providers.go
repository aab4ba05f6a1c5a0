package ui

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rolter/rolter/internal/admin"
	"github.com/rolter/rolter/internal/secret"
	"github.com/rolter/rolter/internal/store"
)

// The Providers page: the list, a create form, and per provider its
// readiness and discovered metadata, an edit form (a slug change needs an
// explicit confirmation), the key pool, soft delete and purge.
//
// Collection actions sit under "/providers/_..." : '_' is never in a slug,
// so no provider's page can be shadowed by them.
func init() {
	mount("providers", func(u *UI) {
		u.get("/providers", u.providerList)
		u.get("/providers/_new", u.providerNew)
		u.post("/providers/_new", u.providerCreate)
		u.get("/providers/{slug}", u.providerDetail)
		u.post("/providers/{slug}", u.providerUpdate)
		u.post("/providers/{slug}/delete", u.providerDelete(false))
		u.post("/providers/{slug}/purge", u.providerDelete(true))
		u.post("/providers/{slug}/keys", u.providerAddKey)
		u.post("/providers/{slug}/keys/{id}/delete", u.providerRemoveKey)
		u.post("/providers/{slug}/keys/{id}/weight", u.providerKeyWeight)
	})
}

// providersPage is the data of providers.html, whose Mode picks the view:
// "list", "new" or "detail".
type providersPage struct {
	Mode string
	// List.
	Providers []admin.ProviderView
	Live      int
	// Detail: the stored provider.
	P admin.ProviderView
	// New and detail: the edit form as typed and its error.
	Form providerForm
	Err  *formErr
	// Detail: the add-key form and its error; an error of a delete, purge
	// or key removal.
	KeyWeight string
	KeyErr    *formErr
	ActionErr *formErr
	// Done names what the last action did, for the notice at the top;
	// PreviousSlug is the slug before a slug change.
	Done, PreviousSlug string
	Kinds              []string
	Metadata           []string
	Tristates          []string
}

// providerForm is the provider form as typed: every field a string, so a
// value that does not parse is shown back as it was.
type providerForm struct {
	Name, Slug, Kind, BaseURL, MetadataSource, ContextLimit, Models string
	FirstByteTimeout, IdleTimeout, ForwardHeaders                   string
	MaxOutputTokens, Tools, Media, MaxConcurrency                   string
	// Create only: the first pool key's weight (its secret is never
	// shown back).
	KeyWeight string
	// Edit only: a slug change must be allowed and the new slug typed
	// again.
	AllowSlugChange bool
	ConfirmSlug     string
}

// newProvidersPage is the page's data in mode, with the form's choices.
func newProvidersPage(mode string) *providersPage {
	return &providersPage{Mode: mode, Kinds: store.ProviderKinds, Metadata: []string{store.MetadataConfigured, store.MetadataUpstream},
		Tristates: tristates}
}

func (u *UI) providersView(r *request, mode string) (*view, *providersPage, error) {
	d := newProvidersPage(mode)
	d.Done, d.PreviousSlug = r.FormValue("done"), r.FormValue("from")
	v, err := u.dataView(r, "providers", false, d)
	return v, d, err
}

func (u *UI) providerList(w http.ResponseWriter, r *request) error {
	v, d, err := u.providersView(r, "list")
	if err != nil {
		return err
	}
	d.Providers, err = all(func(p admin.PageRequest) (admin.Page[admin.ProviderView], error) {
		return u.svc.ListProviders(r.Context(), v.Org, p)
	})
	if err != nil {
		return err
	}
	slices.SortFunc(d.Providers, func(a, b admin.ProviderView) int { return strings.Compare(a.Slug, b.Slug) })
	for _, p := range d.Providers {
		if p.DeletedAt == nil {
			d.Live++
		}
	}
	u.render(w, http.StatusOK, v, "")
	return nil
}

func (u *UI) providerNew(w http.ResponseWriter, r *request) error {
	v, d, err := u.providersView(r, "new")
	if err != nil {
		return err
	}
	d.Form = newProviderForm()
	u.render(w, http.StatusOK, v, "")
	return nil
}

func (u *UI) providerCreate(w http.ResponseWriter, r *request) error {
	v, d, err := u.providersView(r, "new")
	if err != nil {
		return err
	}
	d.Form = readProviderForm(r)
	again := u.formAgain(w, v, &d.Err)
	in, fe := d.Form.createInput(r)
	if len(fe) > 0 {
		return again(fieldsErr(fe))
	}
	p, err := u.svc.CreateProvider(r.Context(), v.Org, in)
	return finish(w, r, err, again, providerLink(v, p.Slug, "done", "created"))
}

// provider loads the stored provider the path names into d.
func (u *UI) provider(r *request, v *view, d *providersPage) error {
	p, err := u.svc.GetProvider(r.Context(), v.Org, r.PathValue("slug"))
	if err != nil {
		return err
	}
	d.P, v.Title = p, "Provider "+p.Slug
	return nil
}

func (u *UI) providerDetail(w http.ResponseWriter, r *request) error {
	v, d, err := itemView(r, u.providersView, u.provider)
	if err != nil {
		return err
	}
	d.Form, d.KeyWeight = formOf(d.P), "1"
	u.render(w, http.StatusOK, v, "")
	return nil
}

func (u *UI) providerUpdate(w http.ResponseWriter, r *request) error {
	v, d, err := itemView(r, u.providersView, u.provider)
	if err != nil {
		return err
	}
	d.Form, d.KeyWeight = readProviderForm(r), "1"
	in, fe := d.Form.input()
	patch := admin.ProviderPatch{Name: &in.Name, Kind: &in.Kind, BaseURL: &in.BaseURL, MetadataSource: &in.MetadataSource,
		ContextLimit: &in.ContextLimit, Models: &in.Models, FirstByteTimeout: &in.FirstByteTimeout, IdleTimeout: &in.IdleTimeout,
		ForwardHeaders: &in.ForwardHeaders, Policy: &in.Policy}
	if in.Slug != d.P.Slug {
		patch.Slug = &in.Slug
		// UI.md: a slug change needs the person to type the new slug
		// again, beside the service's own allow_slug_change.
		if d.Form.AllowSlugChange && d.Form.ConfirmSlug != in.Slug {
			fe["confirm_slug"] = "type the new slug again to confirm the change"
		}
	}
	again := u.formAgain(w, v, &d.Err)
	if len(fe) > 0 {
		return again(fieldsErr(fe))
	}
	p, err := u.svc.UpdateProvider(r.Context(), v.Org, d.P.Slug, patch, d.Form.AllowSlugChange)
	done := "updated"
	if p.Slug != d.P.Slug {
		done = "slug-changed"
	}
	return finish(w, r, err, again, providerLink(v, p.Slug, "done", done, "from", d.P.Slug))
}

func (u *UI) providerDelete(purge bool) handler {
	return func(w http.ResponseWriter, r *request) error {
		v, d, err := u.providersView(r, "detail")
		if err != nil {
			return err
		}
		slug := r.PathValue("slug")
		err = u.svc.DeleteProvider(r.Context(), v.Org, slug, purge, false)
		done := "deleted"
		if purge {
			done = "purged"
		}
		return finish(w, r, err, u.detailAgain(w, r, v, d, &d.ActionErr), link("providers", "org", v.Org, "done", done, "slug", slug))
	}
}

func (u *UI) providerAddKey(w http.ResponseWriter, r *request) error {
	v, d, err := u.providersView(r, "detail")
	if err != nil {
		return err
	}
	again := u.detailAgain(w, r, v, d, &d.KeyErr)
	fe := map[string]string{}
	d.KeyWeight = r.PostForm.Get("weight")
	weight, _ := parseWeight(fe, "weight", d.KeyWeight)
	if len(fe) > 0 {
		return again(fieldsErr(fe))
	}
	in := admin.KeyInput{Secret: secret.New(strings.TrimSpace(r.PostForm.Get("secret"))), Weight: weight}
	_, err = u.svc.AddProviderKey(r.Context(), v.Org, r.PathValue("slug"), in)
	return finish(w, r, err, again, providerLink(v, r.PathValue("slug"), "done", "key-added"))
}

func (u *UI) providerRemoveKey(w http.ResponseWriter, r *request) error {
	v, d, err := u.providersView(r, "detail")
	if err != nil {
		return err
	}
	err = u.svc.DeleteProviderKey(r.Context(), v.Org, r.PathValue("slug"), r.PathValue("id"))
	return finish(w, r, err, u.detailAgain(w, r, v, d, &d.ActionErr), providerLink(v, r.PathValue("slug"), "done", "key-removed"))
}

func (u *UI) providerKeyWeight(w http.ResponseWriter, r *request) error {
	v, d, err := u.providersView(r, "detail")
	if err != nil {
		return err
	}
	again := u.detailAgain(w, r, v, d, &d.ActionErr)
	fe := map[string]string{}
	weight, _ := parseWeight(fe, "weight", r.PostForm.Get("weight"))
	if len(fe) > 0 {
		return again(fieldsErr(fe))
	}
	_, err = u.svc.SetProviderKeyWeight(r.Context(), v.Org, r.PathValue("slug"), r.PathValue("id"), admin.KeyWeightInput{Weight: weight})
	return finish(w, r, err, again, providerLink(v, r.PathValue("slug"), "done", "key-weight"))
}

// providerLink is a link to a provider's page in v's org.
func providerLink(v *view, slug string, kv ...string) string {
	return link("providers/"+url.PathEscape(slug), append([]string{"org", v.Org}, kv...)...)
}

// detailAgain is finish's again for an action on the provider page: the
// page once more with the error at *at, the edit form as stored (what was
// typed in another form is not lost because it was never sent).
func (u *UI) detailAgain(w http.ResponseWriter, r *request, v *view, d *providersPage, at **formErr) func(*formErr) error {
	return func(e *formErr) error {
		if err := u.provider(r, v, d); err != nil {
			return err
		}
		d.Form = formOf(d.P)
		if d.KeyWeight == "" {
			d.KeyWeight = "1"
		}
		*at = e
		u.render(w, http.StatusUnprocessableEntity, v, "")
		return nil
	}
}

func readProviderForm(r *request) providerForm {
	f := func(name string) string { return strings.TrimSpace(r.PostForm.Get(name)) }
	return providerForm{Name: f("name"), Slug: f("slug"), Kind: f("kind"), BaseURL: f("base_url"),
		MetadataSource: f("metadata_source"), ContextLimit: f("context_limit"), Models: r.PostForm.Get("models"),
		FirstByteTimeout: f("first_byte_timeout"), IdleTimeout: f("idle_timeout"), ForwardHeaders: r.PostForm.Get("forward_headers"),
		MaxOutputTokens: f("policy.max_output_tokens"), Tools: f("policy.tools"), Media: f("policy.media"),
		MaxConcurrency: f("policy.max_concurrency"), KeyWeight: f("keys[0].weight"),
		AllowSlugChange: r.PostForm.Get("allow_slug_change") == "on", ConfirmSlug: f("confirm_slug")}
}

// formOf fills the edit form from a stored provider.
func formOf(p admin.ProviderView) providerForm {
	dur := func(d store.Duration) string {
		if d == 0 {
			return ""
		}
		return time.Duration(d).String()
	}
	return providerForm{Name: p.Name, Slug: p.Slug, Kind: p.Kind, BaseURL: p.BaseURL, MetadataSource: p.MetadataSource,
		ContextLimit: num(p.ContextLimit), Models: strings.Join(p.Models, "\n"), FirstByteTimeout: dur(p.FirstByteTimeout),
		IdleTimeout: dur(p.IdleTimeout), ForwardHeaders: strings.Join(p.ForwardHeaders, "\n"),
		MaxOutputTokens: num(p.Policy.MaxOutputTokens), Tools: p.Policy.Tools, Media: p.Policy.Media,
		MaxConcurrency: num(p.Policy.MaxConcurrency)}
}

// createInput is input plus the optional first pool key of a create
// (the Providers page's form, and the route editor's add-provider
// dialog). The key's secret is read from the request, never kept in the
// form, so it is never shown back.
func (f providerForm) createInput(r *request) (admin.ProviderInput, map[string]string) {
	in, fe := f.input()
	key := secret.New(strings.TrimSpace(r.PostForm.Get("key_secret")))
	if !key.IsZero() {
		if weight, ok := parseWeight(fe, "keys[0].weight", f.KeyWeight); ok {
			in.Keys = []admin.KeyInput{{Secret: key, Weight: weight}}
		}
	}
	return in, fe
}

// input converts the form to the service's input. What cannot even be
// parsed (a number, a duration) is reported by field name, as the service
// names its fields; everything else is the service's to judge.
func (f providerForm) input() (admin.ProviderInput, map[string]string) {
	fe := map[string]string{}
	in := admin.ProviderInput{Name: f.Name, Slug: f.Slug, Kind: f.Kind, BaseURL: f.BaseURL, MetadataSource: f.MetadataSource,
		Models: lines(f.Models), ForwardHeaders: lines(f.ForwardHeaders)}
	in.ContextLimit = parseInt(fe, "context_limit", f.ContextLimit)
	in.Policy.MaxOutputTokens = parseInt(fe, "policy.max_output_tokens", f.MaxOutputTokens)
	in.Policy.MaxConcurrency = parseInt(fe, "policy.max_concurrency", f.MaxConcurrency)
	in.Policy.Tools, in.Policy.Media = f.Tools, f.Media
	in.FirstByteTimeout = parseDuration(fe, "first_byte_timeout", f.FirstByteTimeout)
	in.IdleTimeout = parseDuration(fe, "idle_timeout", f.IdleTimeout)
	return in, fe
}

// lines splits a textarea (or a comma-separated line) into its non-empty
// entries.
func lines(s string) []string {
	var out []string
	for _, l := range strings.FieldsFunc(s, func(r rune) bool { return r == '\n' || r == '\r' || r == ',' }) {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}

func parseInt(fe map[string]string, field, s string) int {
	if s == "" {
		return 0
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		fe[field] = "must be a whole number"
	}
	return n
}

func parseWeight(fe map[string]string, field, s string) (*int, bool) {
	if s == "" {
		return nil, true
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		fe[field] = fmt.Sprintf("must be a whole number from 0 to %d", admin.MaxWeight)
		return nil, false
	}
	return &n, true
}

func parseDuration(fe map[string]string, field, s string) store.Duration {
	if s == "" {
		return 0
	}
	var d store.Duration
	if err := d.UnmarshalText([]byte(s)); err != nil {
		fe[field] = "must be a duration such as 30s or 5m"
	}
	return d
}

// fieldsErr is the form error for fields the UI could not parse; it reads
// like the service's own validation error.
func fieldsErr(fe map[string]string) *formErr {
	return &formErr{Code: admin.CodeValidation, Message: "the form has invalid fields; see below", Fields: fe}
}
