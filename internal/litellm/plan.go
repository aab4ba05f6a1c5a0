package litellm

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/rolter/rolter/internal/admin"
	"github.com/rolter/rolter/internal/secret"
	"github.com/rolter/rolter/internal/store"
)

// Store is what the importer reads. *sqlstore.DB implements it.
type Store interface {
	// Load returns the whole state with provider key secrets opened; the
	// importer recognises providers it created before by their keys.
	Load(ctx context.Context) (*store.State, error)
	// SlugTaken reports whether slug is claimed in the org's namespace.
	SlugTaken(ctx context.Context, orgID int64, slug string) (bool, error)
	GetOrg(ctx context.Context, name string) (*store.Org, error)
	GetProvider(ctx context.Context, orgID int64, slug string) (*store.Provider, error)
}

// Admin is what the importer writes through: *admin.Service, so an
// imported resource passes exactly the checks the admin API applies.
type Admin interface {
	CreateOrg(ctx context.Context, in admin.OrgInput) (admin.OrgView, error)
	CreateProject(ctx context.Context, org string, in admin.ProjectInput) (admin.ProjectView, error)
	CreateProvider(ctx context.Context, org string, in admin.ProviderInput) (admin.ProviderView, error)
	CreateRoute(ctx context.Context, org, project string, in admin.RouteInput) (admin.RouteView, error)
}

// Options say where to import.
type Options struct {
	Org     string // (default "default")
	Project string // (default "default")
	// DryRun plans and prints without writing.
	DryRun bool
}

func (o *Options) defaults() {
	if o.Org == "" {
		o.Org = "default"
	}
	if o.Project == "" {
		o.Project = "default"
	}
}

// Plan is what an import creates and what it finds already present.
type Plan struct {
	Org, Project       string
	NewOrg, NewProject bool
	// Providers are the distinct (kind, base URL, key) of the file, in
	// file order.
	Providers []*Provider
	// Routes are the distinct model names of the file, in file order.
	Routes []*Route
}

// Provider is one provider of a plan.
type Provider struct {
	Name, Kind, BaseURL string
	Key                 secret.Secret
	// BaseSlug is derived from Name; Slug is the backfill's final slug, or
	// the slug of the existing provider this one matched.
	BaseSlug, Slug string
	// Exists: a live provider of the org has the same kind, base URL and
	// key (a key of its pool); it is reused, not created.
	Exists bool
	// ID is the existing or created provider's id; 0 until created.
	ID int64
	// Entries are the model_list positions this provider serves.
	Entries []int
}

// Adjusted reports whether the backfill moved a new provider off its base
// slug.
func (p *Provider) Adjusted() bool { return !p.Exists && p.Slug != p.BaseSlug }

// Route is one route of a plan.
type Route struct {
	Model   string
	Targets []Target
	// Exists: the project has this route already; it is left unchanged.
	Exists bool
}

// Target is one route target of a plan.
type Target struct {
	Provider      *Provider
	UpstreamModel string
	Weight        int
}

// identity is what makes two entries the same provider.
type identity struct{ kind, baseURL, key string }

// NewPlan compares cfg with the store: which providers and routes exist,
// and which slugs the new providers get.
func NewPlan(ctx context.Context, st Store, cfg *Config, opts Options) (*Plan, error) {
	opts.defaults()
	state, err := st.Load(ctx)
	if err != nil {
		return nil, fmt.Errorf("read the store: %w", err)
	}
	plan := &Plan{Org: opts.Org, Project: opts.Project}
	var (
		org      *store.Org
		project  *store.Project
		existing []store.Provider // the org's, soft-deleted included, by id
		held     []string
	)
	for i := range state.Orgs {
		if state.Orgs[i].Name == opts.Org {
			org = &state.Orgs[i]
		}
	}
	if org != nil {
		for i := range state.Projects {
			if p := &state.Projects[i]; p.OrgID == org.ID && p.Name == opts.Project {
				project = p
			}
		}
		for _, p := range state.Providers {
			if p.OrgID == org.ID {
				existing = append(existing, p)
				held = append(held, p.Slug)
			}
		}
		slices.SortFunc(existing, func(a, b store.Provider) int { return cmp.Compare(a.ID, b.ID) })
		for _, g := range state.Groups {
			if g.OrgID == org.ID {
				held = append(held, g.Slug)
			}
		}
	}
	// An empty model_list imports nothing, not even the org and project.
	some := len(cfg.Entries) > 0
	plan.NewOrg, plan.NewProject = org == nil && some, project == nil && some

	byID := map[identity]*Provider{}
	routes := map[string]*Route{}
	for _, e := range cfg.Entries {
		id := identity{e.Kind, e.BaseURL, e.Key.Reveal()}
		p, ok := byID[id]
		if !ok {
			p = &Provider{Name: ProviderName(e.Kind, e.BaseURL), Kind: e.Kind, BaseURL: e.BaseURL, Key: e.Key}
			if m := match(existing, id); m != nil {
				p.Exists, p.ID, p.Slug, p.BaseSlug = true, m.ID, m.Slug, BaseSlug(m.Name)
			}
			byID[id] = p
			plan.Providers = append(plan.Providers, p)
		}
		p.Entries = append(p.Entries, e.Index)
		r, ok := routes[e.ModelName]
		if !ok {
			r = &Route{Model: e.ModelName}
			routes[e.ModelName] = r
			plan.Routes = append(plan.Routes, r)
		}
		r.Targets = append(r.Targets, Target{Provider: p, UpstreamModel: e.UpstreamModel, Weight: e.Weight})
	}
	if project != nil {
		for _, r := range state.Routes {
			if rt, ok := routes[r.Model]; ok && r.ProjectID == project.ID {
				rt.Exists = true
			}
		}
	}
	if err := plan.assignSlugs(ctx, st, org, existing, held); err != nil {
		return nil, err
	}
	return plan, nil
}

// match finds the org's live provider with the same kind and base URL that
// holds the same key (or, for an entry without a key, has no keys): the one
// an earlier import created. The lowest id wins.
func match(existing []store.Provider, id identity) *store.Provider {
	for i := range existing {
		p := &existing[i]
		if p.DeletedAt != nil || p.Kind != id.kind || strings.TrimRight(p.BaseURL, "/") != id.baseURL {
			continue
		}
		if id.key == "" && len(p.Keys) == 0 {
			return p
		}
		for _, k := range p.Keys {
			if id.key != "" && k.Secret.Reveal() == id.key {
				return p
			}
		}
	}
	return nil
}

// assignSlugs runs the backfill for the new providers. The state read by
// Load is checked once more against the store's namespace (which also holds
// slugs Load may not show); a clash makes that slug held and the backfill
// runs again, so the result still never fails on a collision.
func (plan *Plan) assignSlugs(ctx context.Context, st Store, org *store.Org, existing []store.Provider, held []string) error {
	claimants := make([]Claimant, 0, len(existing)+len(plan.Providers))
	for _, p := range existing {
		claimants = append(claimants, Claimant{Name: p.Name, Slug: p.Slug})
	}
	var fresh []*Provider
	for _, p := range plan.Providers {
		if !p.Exists {
			fresh = append(fresh, p)
			claimants = append(claimants, Claimant{Name: p.Name})
		}
	}
	for round := 0; ; round++ {
		got := Backfill(claimants, held)[len(existing):]
		clash := false
		for i, p := range fresh {
			p.BaseSlug, p.Slug = got[i].Base, got[i].Final
			if org == nil {
				continue
			}
			taken, err := st.SlugTaken(ctx, org.ID, p.Slug)
			if err != nil {
				return fmt.Errorf("check slug %s: %w", p.Slug, err)
			}
			if taken {
				held, clash = append(held, p.Slug), true
			}
		}
		if !clash {
			return nil
		}
		if round > 100 {
			return errors.New("the org's slug namespace keeps changing during the import; retry")
		}
	}
}

// Apply writes the plan: org and project if missing, new providers with
// their backfilled slugs, then new routes. Everything has been checked
// before; a failure here is the store's, or a concurrent change, and a
// re-run resumes where this one stopped.
func (plan *Plan) Apply(ctx context.Context, adm Admin, st Store) error {
	if plan.NewOrg {
		if _, err := adm.CreateOrg(ctx, admin.OrgInput{Name: plan.Org, Description: "created by rolter import"}); err != nil && !admin.AlreadyExists(err) {
			return describe(fmt.Sprintf("org %q", plan.Org), err)
		}
	}
	if plan.NewProject {
		if _, err := adm.CreateProject(ctx, plan.Org, admin.ProjectInput{Name: plan.Project, Description: "created by rolter import"}); err != nil && !admin.AlreadyExists(err) {
			return describe(fmt.Sprintf("project %q", plan.Project), err)
		}
	}
	if len(plan.Providers) == 0 {
		return nil
	}
	org, err := st.GetOrg(ctx, plan.Org)
	if err != nil {
		return fmt.Errorf("org %q: %w", plan.Org, err)
	}
	for _, p := range plan.Providers {
		if p.Exists {
			continue
		}
		in := admin.ProviderInput{Name: p.Name, Slug: p.Slug, Kind: p.Kind, BaseURL: p.BaseURL}
		if !p.Key.IsZero() {
			in.Keys = []admin.KeyInput{{Secret: p.Key}}
		}
		if _, err := adm.CreateProvider(ctx, plan.Org, in); err != nil {
			return describe(fmt.Sprintf("provider %s for %s", p.Slug, entries(p.Entries)), err)
		}
		got, err := st.GetProvider(ctx, org.ID, p.Slug)
		if err != nil {
			return fmt.Errorf("provider %s: read back: %w", p.Slug, err)
		}
		p.ID = got.ID
	}
	for _, r := range plan.Routes {
		if r.Exists {
			continue
		}
		in := admin.RouteInput{Model: r.Model}
		for _, t := range r.Targets {
			w := t.Weight
			in.Targets = append(in.Targets, admin.TargetInput{Provider: t.Provider.Slug, UpstreamModel: t.UpstreamModel, Weight: &w})
		}
		if _, err := adm.CreateRoute(ctx, plan.Org, plan.Project, in); err != nil {
			if admin.AlreadyExists(err) { // created meanwhile: never overwritten
				r.Exists = true
				continue
			}
			return describe(fmt.Sprintf("route %q", r.Model), err)
		}
	}
	return nil
}

func entries(idx []int) string {
	s := make([]string, len(idx))
	for i, n := range idx {
		s[i] = fmt.Sprintf("model_list[%d]", n)
	}
	return strings.Join(s, ", ")
}

// describe renders an admin error with its fields in a stable order.
func describe(what string, err error) error {
	var ae *admin.Error
	if !errors.As(err, &ae) {
		return fmt.Errorf("%s: %w", what, err)
	}
	msg := ae.Message
	for _, f := range slices.Sorted(maps.Keys(ae.Fields)) {
		msg += fmt.Sprintf("; %s %s", f, ae.Fields[f])
	}
	if ae.Suggestion != "" {
		msg += "; suggestion " + ae.Suggestion
	}
	return fmt.Errorf("%s: %s (%s)", what, msg, ae.Code)
}

// ReportHeader introduces the slug report: one line per provider whose
// slug the backfill adjusted, fields separated by ", ", a field holding a
// comma or a quote double-quoted as in CSV (encoding/csv reads the lines
// with TrimLeadingSpace). provider_id is "-" in a dry run.
const ReportHeader = "slug adjustments (org, provider_id, name, base_slug, final_slug):"

// Print writes what the plan does (or, after Apply, did) to w: one line
// per org, project, provider and route, the slug report, and a summary.
// Key secrets are never printed; a provider shows how many keys it has.
func (plan *Plan) Print(w io.Writer, dryRun bool) {
	verb := "created"
	if dryRun {
		verb = "would create"
	}
	if plan.NewOrg {
		fmt.Fprintf(w, "%s org %s\n", verb, plan.Org)
	}
	if plan.NewProject {
		fmt.Fprintf(w, "%s project %s/%s\n", verb, plan.Org, plan.Project)
	}
	var newP, oldP, newR, oldR int
	for _, p := range plan.Providers {
		keys := "no key"
		if !p.Key.IsZero() {
			keys = "1 key"
		}
		if p.Exists {
			oldP++
			fmt.Fprintf(w, "provider %s exists (same kind, base_url and key): reused\n", p.Slug)
			continue
		}
		newP++
		fmt.Fprintf(w, "%s provider %s: kind %s, base_url %s, %s\n", verb, p.Slug, p.Kind, p.BaseURL, keys)
	}
	for _, r := range plan.Routes {
		if r.Exists {
			oldR++
			fmt.Fprintf(w, "route %s exists: left unchanged\n", r.Model)
			continue
		}
		newR++
		ts := make([]string, len(r.Targets))
		for i, t := range r.Targets {
			ts[i] = fmt.Sprintf("%s/%s weight %d", t.Provider.Slug, t.UpstreamModel, t.Weight)
		}
		fmt.Fprintf(w, "%s route %s: %s\n", verb, r.Model, strings.Join(ts, ", "))
	}
	if adj := plan.Adjustments(); len(adj) > 0 {
		fmt.Fprintln(w, ReportHeader)
		for _, a := range adj {
			id := "-"
			if a.ID != 0 {
				id = strconv.FormatInt(a.ID, 10)
			}
			fmt.Fprintln(w, strings.Join([]string{csvField(plan.Org), id, csvField(a.Name), a.BaseSlug, a.Slug}, ", "))
		}
	}
	if dryRun {
		fmt.Fprintf(w, "dry run: would create %d providers, %d routes; would skip %d providers, %d routes (already present); nothing written\n", newP, newR, oldP, oldR)
		return
	}
	fmt.Fprintf(w, "created %d providers, %d routes; skipped %d providers, %d routes (already present)\n", newP, newR, oldP, oldR)
}

// Adjustments are the new providers the backfill moved off their base
// slug, in creation order.
func (plan *Plan) Adjustments() []*Provider {
	var out []*Provider
	for _, p := range plan.Providers {
		if p.Adjusted() {
			out = append(out, p)
		}
	}
	return out
}

func csvField(s string) string {
	if strings.ContainsAny(s, ",\"\r\n") || strings.TrimSpace(s) != s {
		return `"` + strings.ReplaceAll(s, `"`, `""`) + `"`
	}
	return s
}

// Run plans the import of cfg, applies it unless opts.DryRun, and prints
// the result to out.
func Run(ctx context.Context, st Store, adm Admin, cfg *Config, opts Options, out io.Writer) error {
	opts.defaults()
	plan, err := NewPlan(ctx, st, cfg, opts)
	if err != nil {
		return err
	}
	if !opts.DryRun {
		if err := plan.Apply(ctx, adm, st); err != nil {
			return fmt.Errorf("%w (what was created before stays; re-running the import resumes)", err)
		}
	}
	plan.Print(out, opts.DryRun)
	return nil
}
