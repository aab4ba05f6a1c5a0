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
	// importer finds the providers it created before by their import
	// identity, and recognises others by their keys.
	Load(ctx context.Context) (*store.State, error)
	// SlugTaken reports whether slug is claimed in the org's namespace.
	SlugTaken(ctx context.Context, orgID int64, slug string) (bool, error)
	GetOrg(ctx context.Context, name string) (*store.Org, error)
	GetProvider(ctx context.Context, orgID int64, slug string) (*store.Provider, error)
}

// Admin is what the importer writes through: *admin.Service. Its writes
// go through Apply, the code of rolter apply and --config, so an imported
// resource passes exactly the checks the admin API applies; UpdateProvider
// writes the import record, which Apply does not manage (see Plan.Apply).
type Admin interface {
	Apply(ctx context.Context, d admin.Desired, opt admin.ApplyOptions) (admin.ApplyResult, error)
	UpdateProvider(ctx context.Context, org, slug string, in admin.ProviderPatch, allowSlugChange bool) (admin.ProviderView, error)
	// Batch runs fn's writes in one transaction, announced once.
	Batch(ctx context.Context, fn func(svc *admin.Service, st store.Store) error) error
}

// Options say where to import, and how.
type Options struct {
	Org     string // (default "default")
	Project string // (default "default")
	// DryRun plans and prints without writing.
	DryRun bool
	// Strict refuses a file with entries the import would skip: the
	// report is printed as for a dry run, nothing is written, and Run
	// returns an error (without it, skipped entries are only reported).
	Strict bool
	// Probe asks every openai-kind provider with its own address whether
	// it is a llama.cpp server (GET /props), to suggest kind llamacpp; see
	// probe.go. Off by default: an import otherwise makes no request to
	// an upstream.
	Probe bool
}

func (o *Options) defaults() {
	if o.Org == "" {
		o.Org = "default"
	}
	if o.Project == "" {
		o.Project = "default"
	}
}

// Plan is what an import creates, updates, and finds already present.
type Plan struct {
	Org, Project       string
	NewOrg, NewProject bool
	// Providers are the distinct (kind, base URL, key) of the file, in
	// file order.
	Providers []*Provider
	// Routes are the distinct model names of the file, in file order.
	Routes []*Route
	// Groups are the "prefix/*" wildcards mapped to groups, in file order.
	Groups []*Group
	// Addresses are the wildcard entries that no group serves: reachable
	// as provider-slug/<model> only.
	Addresses []*Address
	// Skipped and Unset are the file's (Config.Skipped, Config.Unset).
	Skipped []Skipped
	Unset   []UnsetVar
	// Suggestions are what a probe found (Options.Probe), one line each.
	Suggestions []string
	// Notes say what of the file's fallback settings the import leaves
	// out, one line each.
	Notes []string
}

// Provider is one provider of a plan.
type Provider struct {
	Name, Kind, BaseURL string
	Key                 secret.Secret
	// KeyRef and BaseRef name the variables key and base URL come from;
	// KeyUnset and BaseUnset: not set (dry run), so the value is unknown.
	KeyRef, BaseRef     string
	KeyUnset, BaseUnset bool
	// BaseSlug is derived from Name; Slug is the backfill's final slug, or
	// the slug of the existing provider this one matched.
	BaseSlug, Slug string
	// Exists: the provider is in the store already. Imported says how it
	// was found: by its import identity (it may be updated), or else by
	// the same kind, base URL and key (it is reused as it is).
	Exists, Imported bool
	// Changes are what the import changes on an imported provider, and
	// Kept the edits made since the import that it leaves alone, one
	// phrase each (no secret).
	Changes, Kept []string
	// ID is the existing or created provider's id; 0 until created.
	ID int64
	// Entries are the model_list positions this provider serves, and IDs
	// their import identities.
	Entries []int
	IDs     []string

	label     string
	storeKind string          // the kind of the provider matched in the store
	stored    *store.Provider // the imported provider as read, keys' secrets included
	update    update
}

// update is what Apply writes to an imported provider.
type update struct {
	patch     admin.ProviderPatch // the fields that change (Kind, BaseURL, Name)
	addKey    bool                // add Key to the pool
	keyWeight *int                // its weight (that of the key it replaces)
	dropKey   int64               // the pool key to remove; 0: none
	record    *store.ProviderImport
	write     bool // the record or the patch changed
}

// Adjusted reports whether the backfill moved a new provider off its base
// slug.
func (p *Provider) Adjusted() bool { return !p.Exists && p.Slug != p.BaseSlug }

// Route is one route of a plan.
type Route struct {
	Model   string
	Targets []Target
	Limits  Limits
	// Fallbacks and ContextFallback come from the file's fallbacks and
	// context_window_fallbacks settings (fallbacks.go).
	Fallbacks       []string
	ContextFallback string
	// Exists: the project has this route already; it is left unchanged.
	Exists bool
}

// Target is one route target or group member of a plan.
type Target struct {
	Provider      *Provider
	UpstreamModel string
	Weight        int
	Priority      int // litellm_params.order
}

// Group is a "prefix/*" wildcard of the file as a provider group.
type Group struct {
	Slug, Pattern string
	Members       []Target
	// Exists: the org has a group with this slug; it is left unchanged.
	Exists  bool
	Entries []int
}

// Address is a wildcard entry reachable only by its provider's address.
type Address struct {
	Entry     int
	ModelName string
	Provider  *Provider
	Why       string
}

// grouping is what makes two entries the same provider: kind, base URL
// and key, or the variables they come from where those are unset.
type grouping struct{ kind, base, key string }

func groupingOf(e Entry) grouping {
	g := grouping{e.Kind, e.BaseURL, e.Key.Reveal()}
	if e.BaseUnset {
		g.base = envPrefix + e.BaseRef
	}
	if e.KeyUnset {
		g.key = envPrefix + e.KeyRef
	}
	return g
}

// NewPlan compares cfg with the store: which providers, groups and routes
// exist, what the import changes on the providers it made before, and
// which slugs the new providers get.
func NewPlan(ctx context.Context, st Store, cfg *Config, opts Options) (*Plan, error) {
	opts.defaults()
	state, err := st.Load(ctx)
	if err != nil {
		return nil, fmt.Errorf("read the store: %w", err)
	}
	plan := &Plan{Org: opts.Org, Project: opts.Project, Skipped: cfg.Skipped, Unset: cfg.Unset}
	var (
		org      *store.Org
		project  *store.Project
		existing []store.Provider // the org's, soft-deleted included, by id
		held     []string
		groups   = map[string]bool{} // the org's group slugs
		provs    = map[string]bool{} // the org's provider slugs
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
				provs[p.Slug] = true
			}
		}
		slices.SortFunc(existing, func(a, b store.Provider) int { return cmp.Compare(a.ID, b.ID) })
		for _, g := range state.Groups {
			if g.OrgID == org.ID {
				held = append(held, g.Slug)
				groups[g.Slug] = true
			}
		}
	}
	// An empty model_list imports nothing, not even the org and project.
	some := len(cfg.Entries) > 0
	plan.NewOrg, plan.NewProject = org == nil && some, project == nil && some

	byGrouping := map[grouping]*Provider{}
	routes := map[string]*Route{}
	wild := map[string]*Group{}
	for _, e := range cfg.Entries {
		g := groupingOf(e)
		p, ok := byGrouping[g]
		if !ok {
			p = &Provider{Name: ProviderName(e.Label, e.BaseURL), Kind: e.Kind, BaseURL: e.BaseURL, Key: e.Key,
				KeyRef: e.KeyRef, KeyUnset: e.KeyUnset, BaseRef: e.BaseRef, BaseUnset: e.BaseUnset, label: e.Label}
			if e.BaseUnset {
				p.Name = e.Label + " " + strings.ToLower(e.BaseRef)
			}
			byGrouping[g] = p
			plan.Providers = append(plan.Providers, p)
		}
		p.Entries = append(p.Entries, e.Index)
		p.IDs = append(p.IDs, EntryID(opts.Project, e))
		switch {
		case e.Wildcard == "*":
			plan.Addresses = append(plan.Addresses, &Address{Entry: e.Index, ModelName: e.ModelName, Provider: p,
				Why: "rolter has no catch-all address"})
		case e.Wildcard != "":
			plan.addWildcard(wild, e, p, groups, provs)
		default:
			r, ok := routes[e.ModelName]
			if !ok {
				r = &Route{Model: e.ModelName, Limits: cfg.Limits[e.ModelName]}
				routes[e.ModelName] = r
				plan.Routes = append(plan.Routes, r)
			}
			r.Targets = append(r.Targets, Target{Provider: p, UpstreamModel: e.UpstreamModel, Weight: e.Weight, Priority: e.Priority})
		}
	}
	plan.match(existing)
	var projectRoutes []store.Route
	if project != nil {
		for _, r := range state.Routes {
			if r.ProjectID != project.ID {
				continue
			}
			projectRoutes = append(projectRoutes, r)
			if rt, ok := routes[r.Model]; ok {
				rt.Exists = true
			}
		}
	}
	plan.linkFallbacks(cfg, projectRoutes)
	for _, g := range plan.Groups {
		if !g.Exists {
			held = append(held, g.Slug)
		}
	}
	if err := plan.assignSlugs(ctx, st, org, existing, held); err != nil {
		return nil, err
	}
	return plan, nil
}

// addWildcard plans the group of a "prefix/*" entry, or, where the prefix
// cannot be a group's slug, its provider address.
func (plan *Plan) addWildcard(wild map[string]*Group, e Entry, p *Provider, groups, provs map[string]bool) {
	slug := e.Wildcard
	switch {
	case admin.DeriveSlug(slug) != slug:
		plan.Addresses = append(plan.Addresses, &Address{Entry: e.Index, ModelName: e.ModelName, Provider: p,
			Why: fmt.Sprintf("%q cannot be a group's slug (lower-case letters, digits and '-')", slug)})
		return
	case provs[slug]:
		plan.Addresses = append(plan.Addresses, &Address{Entry: e.Index, ModelName: e.ModelName, Provider: p,
			Why: fmt.Sprintf("the slug %s belongs to a provider, so %s/<model> reaches that provider", slug, slug)})
		return
	}
	g, ok := wild[slug]
	if !ok {
		g = &Group{Slug: slug, Pattern: e.ModelName, Exists: groups[slug]}
		wild[slug] = g
		plan.Groups = append(plan.Groups, g)
	}
	g.Entries = append(g.Entries, e.Index)
	for _, m := range g.Members {
		if m.Provider == p { // a provider is a member once
			return
		}
	}
	g.Members = append(g.Members, Target{Provider: p, Weight: e.Weight})
}

// match finds the providers of the plan in the store: first those an
// earlier import created, by their import identity, then any other live
// provider with the same kind, base URL and key. A store provider matches
// one plan provider at most.
func (plan *Plan) match(existing []store.Provider) {
	claimed := map[int64]bool{}
	for _, p := range plan.Providers {
		if m := claim(existing, p.IDs, claimed); m != nil {
			claimed[m.ID] = true
			p.Exists, p.Imported, p.ID, p.Slug, p.BaseSlug, p.storeKind, p.stored = true, true, m.ID, m.Slug, admin.BaseSlug(m.Name), m.Kind, m
			p.plan(m)
		}
	}
	for _, p := range plan.Providers {
		if p.Exists || p.KeyUnset || p.BaseUnset {
			continue // an unknown key or address matches nothing for sure
		}
		if m := sameProvider(existing, p, claimed); m != nil {
			claimed[m.ID] = true
			p.Exists, p.ID, p.Slug, p.BaseSlug, p.storeKind = true, m.ID, m.Slug, admin.BaseSlug(m.Name), m.Kind
		}
	}
}

// sameProvider finds the org's live provider with the same kind and base
// URL that holds the same key (or, for an entry without a key, has no
// keys), among those not claimed. The lowest id wins.
func sameProvider(existing []store.Provider, p *Provider, claimed map[int64]bool) *store.Provider {
	key := p.Key.Reveal()
	for i := range existing {
		m := &existing[i]
		if m.DeletedAt != nil || claimed[m.ID] || m.Kind != p.Kind || strings.TrimRight(m.BaseURL, "/") != p.BaseURL {
			continue
		}
		if key == "" && len(m.Keys) == 0 {
			return m
		}
		for _, k := range m.Keys {
			if key != "" && k.Secret.Reveal() == key {
				return m
			}
		}
	}
	return nil
}

// plan works out the update of a provider found by its import identity.
//
// The record holds what the import last wrote. A field the file changed
// since is written; a field only the provider changed (an operator's edit)
// is kept. The key is the one exception to comparing with the record,
// since no trace of a secret is stored: the pool key the import added
// (record.KeyID) is replaced when the file's key is no longer in the
// pool, and a key added by hand is never touched.
func (p *Provider) plan(m *store.Provider) {
	rec := m.Settings.Import
	next := &store.ProviderImport{IDs: slices.Sorted(slices.Values(p.IDs)), Kind: p.Kind, BaseURL: p.BaseURL,
		Name: ProviderName(p.label, p.BaseURL), KeyID: rec.KeyID}
	u := &p.update

	switch {
	case m.Kind == p.Kind:
	case p.Kind != rec.Kind:
		u.patch.Kind = &p.Kind
		p.Changes = append(p.Changes, fmt.Sprintf("kind %s -> %s", m.Kind, p.Kind))
	default:
		p.Kept = append(p.Kept, fmt.Sprintf("kind %s (edited since the import; the file still says %s)", m.Kind, p.Kind))
	}

	switch {
	case p.BaseUnset:
		next.BaseURL = rec.BaseURL
		p.Kept = append(p.Kept, fmt.Sprintf("base_url %s (api_base comes from %s%s, which is not set)", m.BaseURL, envPrefix, p.BaseRef))
	case strings.TrimRight(m.BaseURL, "/") == p.BaseURL:
	case p.BaseURL != rec.BaseURL:
		u.patch.BaseURL = &p.BaseURL
		p.Changes = append(p.Changes, fmt.Sprintf("base_url %s -> %s", m.BaseURL, p.BaseURL))
	default:
		p.Kept = append(p.Kept, fmt.Sprintf("base_url %s (edited since the import; the file still says %s)", m.BaseURL, p.BaseURL))
	}

	// The name is derived from kind and address: it follows them when the
	// file changes them, unless the provider was renamed since.
	if (u.patch.Kind != nil || u.patch.BaseURL != nil) && m.Name == rec.Name && next.Name != m.Name {
		u.patch.Name = &next.Name
		p.Changes = append(p.Changes, fmt.Sprintf("name %q -> %q", m.Name, next.Name))
	} else {
		next.Name = rec.Name
	}

	p.planKey(m, next)
	u.record = next
	u.write = u.patch.Kind != nil || u.patch.BaseURL != nil || u.addKey || u.dropKey != 0 || !sameRecord(rec, next)
}

// planKey works out the key part of an imported provider's update.
func (p *Provider) planKey(m *store.Provider, next *store.ProviderImport) {
	u := &p.update
	var ours *store.ProviderKey // the key the import added, if still there
	for i := range m.Keys {
		if k := &m.Keys[i]; k.ID == next.KeyID && next.KeyID != 0 {
			ours = k
		}
	}
	key := p.Key.Reveal()
	var inPool *store.ProviderKey // a pool key with the file's value, ours first
	for i := range m.Keys {
		if k := &m.Keys[i]; key != "" && k.Secret.Reveal() == key && (inPool == nil || k == ours) {
			inPool = k
		}
	}
	from := "the file's api_key"
	if p.KeyRef != "" {
		from = envPrefix + p.KeyRef
	}
	switch {
	case p.KeyUnset:
		p.Kept = append(p.Kept, fmt.Sprintf("its keys (api_key comes from %s, which is not set, so the dry run cannot tell whether it changed)", from))
	case key == "" && ours != nil:
		u.dropKey, next.KeyID = ours.ID, 0
		p.Changes = append(p.Changes, fmt.Sprintf("key %d removed (the entry has no api_key now)", ours.ID))
	case key == "":
	case inPool != nil && ours != nil && inPool != ours:
		// The file's new value is a key added by hand: it becomes ours,
		// and the key it replaces goes.
		u.dropKey, next.KeyID = ours.ID, inPool.ID
		p.Changes = append(p.Changes, fmt.Sprintf("key %d removed (the new value of %s is key %d, already in the pool)", ours.ID, from, inPool.ID))
	case inPool != nil:
		next.KeyID = inPool.ID
	case ours != nil:
		w := ours.Weight
		u.addKey, u.keyWeight, u.dropKey = true, &w, ours.ID
		p.Changes = append(p.Changes, fmt.Sprintf("key %d replaced by the new value of %s", ours.ID, from))
	case next.KeyID != 0:
		p.Kept = append(p.Kept, fmt.Sprintf("its keys (the key the import added was removed since; the value of %s is not added back)", from))
	default:
		u.addKey = true
		p.Changes = append(p.Changes, "key added from "+from)
	}
}

func sameRecord(a, b *store.ProviderImport) bool {
	return slices.Equal(slices.Sorted(slices.Values(a.IDs)), b.IDs) && a.Name == b.Name && a.Kind == b.Kind &&
		a.BaseURL == b.BaseURL && a.KeyID == b.KeyID
}

// assignSlugs runs the backfill for the new providers. The state read by
// Load is checked once more against the store's namespace (which also holds
// slugs Load may not show); a clash makes that slug held and the backfill
// runs again, so the result still never fails on a collision.
func (plan *Plan) assignSlugs(ctx context.Context, st Store, org *store.Org, existing []store.Provider, held []string) error {
	claimants := make([]admin.SlugClaimant, 0, len(existing)+len(plan.Providers))
	for _, p := range existing {
		claimants = append(claimants, admin.SlugClaimant{Name: p.Name, Slug: p.Slug})
	}
	var fresh []*Provider
	for _, p := range plan.Providers {
		if !p.Exists {
			fresh = append(fresh, p)
			claimants = append(claimants, admin.SlugClaimant{Name: p.Name})
		}
	}
	for round := 0; ; round++ {
		got := admin.Backfill(claimants, held)[len(existing):]
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
