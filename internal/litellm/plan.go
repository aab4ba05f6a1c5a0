package litellm

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
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
