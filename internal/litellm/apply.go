package litellm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/rolter/rolter/internal/admin"
	"github.com/rolter/rolter/internal/store"
)

// Apply writes the plan through admin.Service.Apply, as --config does:
//
//  1. a create-only apply of the org and project if missing and the new
//     providers, with their backfilled slugs and import records;
//  2. an apply of the updates of the providers an earlier import created,
//     each matched by its slug and written as a whole entry: the provider
//     as it is (ProviderEntry: an operator's edits and keys added by hand
//     stay), with the plan's changes; the key it replaces dropped from the
//     pool and the new one added, which Apply does in that order (add,
//     then remove), so that the pool is never empty;
//  3. the import records: the id of the provider's key exists only once
//     the key does, and Apply neither compares nor writes the record (it
//     is no field of a provider's view), so it is written by a direct
//     UpdateProvider, as before;
//  4. a create-only apply of the new groups and routes.
//
// Everything has been checked before; a failure here is the store's, or
// a concurrent change, and a re-run resumes where this one stopped.
func (plan *Plan) Apply(ctx context.Context, adm Admin, st Store) error {
	if len(plan.Providers) == 0 {
		return nil
	}
	created := plan.newOrgAndProviders()
	res, err := plan.apply(ctx, adm, created, admin.ApplyOptions{CreateOnly: true})
	if err != nil {
		return err
	}
	// A slug taken since the plan was made matches the provider that took
	// it, which a create-only apply leaves alone: refuse to route to it.
	for _, c := range res.Changes {
		if c.Kind == admin.KindProvider && c.Action != admin.ActionCreate {
			return fmt.Errorf("%s: the slug was taken since the import read the store; re-run the import", created.what[c.Entry])
		}
	}
	org, err := st.GetOrg(ctx, plan.Org)
	if err != nil {
		return fmt.Errorf("org %q: %w", plan.Org, err)
	}
	if updates := plan.updates(org); len(updates.d.Orgs[0].Providers) > 0 {
		if _, err := plan.apply(ctx, adm, updates, admin.ApplyOptions{}); err != nil {
			return err
		}
	}
	// One transaction and one snapshot rebuild for all the records.
	if plan.recording() {
		if err := plan.records(ctx, adm, org); err != nil {
			return err
		}
	}
	routed := plan.groupsAndRoutes()
	if res, err = plan.apply(ctx, adm, routed, admin.ApplyOptions{CreateOnly: true}); err != nil {
		return err
	}
	for _, c := range res.Changes {
		switch {
		case c.Action == admin.ActionCreate:
		case c.Kind == admin.KindGroup: // created meanwhile: refused, as a create of it is
			return fmt.Errorf("%s: a group with this slug was created since the import read the store; re-run the import", routed.what[c.Entry])
		case c.Kind == admin.KindRoute: // created meanwhile: never overwritten
			routed.routes[c.Entry].Exists = true
		}
	}
	return nil
}

// desired is a desired state of one org the plan applies, with what each
// of its entries is called in the import's messages.
type desired struct {
	d      admin.Desired
	what   map[string]string // entry path → "provider x for model_list[0]"
	routes map[string]*Route // entry path → the plan's route
}

func (plan *Plan) desired(org admin.OrgInput) *desired {
	return &desired{d: admin.Desired{Orgs: []admin.DesiredOrg{{OrgInput: org}}},
		what: map[string]string{"orgs[0]": fmt.Sprintf("org %q", plan.Org)}, routes: map[string]*Route{}}
}

func (d *desired) org() *admin.DesiredOrg { return &d.d.Orgs[0] }

func (d *desired) addProvider(p *Provider, dp admin.DesiredProvider) {
	o := d.org()
	d.what[fmt.Sprintf("orgs[0].providers[%d]", len(o.Providers))] = fmt.Sprintf("provider %s for %s", p.Slug, entries(p.Entries))
	o.Providers = append(o.Providers, dp)
}

func (d *desired) project(name string) *admin.DesiredProject {
	o := d.org()
	o.Projects = append(o.Projects, admin.DesiredProject{ProjectInput: admin.ProjectInput{Name: name, Description: createdBy}})
	d.what["orgs[0].projects[0]"] = fmt.Sprintf("project %q", name)
	return &o.Projects[0]
}

const createdBy = "created by rolter import"

// newOrgAndProviders is step 1 of Apply. The org and the project are
// always named: a create-only apply leaves them alone when they exist.
func (plan *Plan) newOrgAndProviders() *desired {
	d := plan.desired(admin.OrgInput{Name: plan.Org, Description: createdBy})
	for _, p := range plan.Providers {
		if p.Exists {
			continue
		}
		rec := &store.ProviderImport{IDs: slices.Sorted(slices.Values(p.IDs)), Name: p.Name, Kind: p.Kind, BaseURL: p.BaseURL}
		in := admin.ProviderInput{Name: p.Name, Slug: p.Slug, Kind: p.Kind, BaseURL: p.BaseURL, Import: rec}
		if !p.Key.IsZero() {
			in.Keys = []admin.KeyInput{{Secret: p.Key, Ref: p.keyRef()}}
		}
		d.addProvider(p, admin.DesiredProvider{ProviderInput: in})
	}
	d.project(plan.Project)
	return d
}

// updates is step 2 of Apply: the imported providers the plan changes,
// each the stored provider with the plan's changes. The org entry is the
// org as it is (an apply writes an org's description), so it is unchanged.
func (plan *Plan) updates(org *store.Org) *desired {
	d := plan.desired(admin.OrgInput{Name: org.Name, Description: org.Description})
	for _, p := range plan.Providers {
		u := &p.update
		if !p.Imported || !u.write {
			continue
		}
		dp := admin.ProviderEntry(p.stored)
		if u.patch.Kind != nil {
			dp.Kind = *u.patch.Kind
		}
		if u.patch.BaseURL != nil {
			dp.BaseURL = *u.patch.BaseURL
		}
		if u.patch.Name != nil {
			dp.Name = *u.patch.Name
		}
		if u.dropKey != 0 {
			var keys []admin.KeyInput // ProviderEntry keeps the pool's order
			for i, k := range p.stored.Keys {
				if k.ID != u.dropKey {
					keys = append(keys, dp.Keys[i])
				}
			}
			dp.Keys = keys
		}
		if u.addKey {
			dp.Keys = append(dp.Keys, admin.KeyInput{Secret: p.Key, Weight: u.keyWeight, Ref: p.keyRef()})
		}
		d.addProvider(p, dp)
	}
	return d
}

// record is step 3 of Apply for provider p: the id of the key a new
// provider was created with, and the record of an update, with the id of
// the key it added. Should this write fail, a re-run finds the key in the
// pool by its value and records it then.
func (plan *Plan) record(ctx context.Context, adm Admin, st Store, org *store.Org, p *Provider) error {
	what := fmt.Sprintf("provider %s for %s", p.Slug, entries(p.Entries))
	var rec *store.ProviderImport
	switch {
	case !p.Exists:
		rec = &store.ProviderImport{IDs: slices.Sorted(slices.Values(p.IDs)), Name: p.Name, Kind: p.Kind, BaseURL: p.BaseURL}
	case p.Imported && p.update.write:
		rec = p.update.record
	default:
		return nil
	}
	got, err := st.GetProvider(ctx, org.ID, p.Slug)
	if err != nil {
		return fmt.Errorf("provider %s: read back: %w", p.Slug, err)
	}
	p.ID = got.ID
	if !p.Exists {
		if len(got.Keys) != 1 {
			return nil // the record written with the provider stands
		}
		rec.KeyID = got.Keys[0].ID
	} else if p.update.addKey {
		// The key added is the one the stored pool lacked.
		rec.KeyID = 0
		for _, k := range got.Keys {
			if !slices.ContainsFunc(p.stored.Keys, func(s store.ProviderKey) bool { return s.ID == k.ID }) {
				rec.KeyID = k.ID
			}
		}
	}
	if _, err := adm.UpdateProvider(ctx, plan.Org, p.Slug, admin.ProviderPatch{Import: rec}, false); err != nil {
		return describe(what+": record the import", err)
	}
	return nil
}

// recording reports whether any provider has an import record to write.
func (plan *Plan) recording() bool {
	for _, p := range plan.Providers {
		if !p.Exists || p.Imported && p.update.write {
			return true
		}
	}
	return false
}

// records writes the import records (step 3 of Apply) in one transaction,
// announced once.
func (plan *Plan) records(ctx context.Context, adm Admin, org *store.Org) error {
	return adm.Batch(ctx, func(b *admin.Service, tx store.Store) error {
		for _, p := range plan.Providers {
			if err := plan.record(ctx, b, tx, org, p); err != nil {
				return err
			}
		}
		return nil
	})
}

// groupsAndRoutes is step 4 of Apply.
func (plan *Plan) groupsAndRoutes() *desired {
	d := plan.desired(admin.OrgInput{Name: plan.Org})
	o := d.org()
	for _, g := range plan.Groups {
		if g.Exists {
			continue
		}
		in := admin.GroupInput{Slug: g.Slug, Name: g.Pattern + " (LiteLLM wildcard)"}
		for _, m := range g.Members {
			w := m.Weight
			in.Members = append(in.Members, admin.GroupMemberInput{Provider: m.Provider.Slug, Weight: &w})
		}
		d.what[fmt.Sprintf("orgs[0].groups[%d]", len(o.Groups))] = fmt.Sprintf("group %s for %s", g.Slug, entries(g.Entries))
		o.Groups = append(o.Groups, admin.DesiredGroup{GroupInput: in})
	}
	pj := d.project(plan.Project)
	for _, r := range plan.Routes {
		if r.Exists {
			continue
		}
		in := admin.RouteInput{Model: r.Model, RPMLimit: r.Limits.RPM, TPMLimit: r.Limits.TPM,
			Fallbacks: r.Fallbacks, ContextFallback: r.ContextFallback}
		for _, t := range r.Targets {
			w := t.Weight
			in.Targets = append(in.Targets, admin.TargetInput{Provider: t.Provider.Slug, UpstreamModel: t.UpstreamModel, Weight: &w,
				Priority: t.Priority})
		}
		where := fmt.Sprintf("orgs[0].projects[0].routes[%d]", len(pj.Routes))
		d.what[where], d.routes[where] = fmt.Sprintf("route %q", r.Model), r
		pj.Routes = append(pj.Routes, in)
	}
	return d
}

// apply runs d, naming a failed entry as the import does.
func (plan *Plan) apply(ctx context.Context, adm Admin, d *desired, opt admin.ApplyOptions) (admin.ApplyResult, error) {
	res, err := adm.Apply(ctx, d.d, opt)
	var ae *admin.ApplyError
	if errors.As(err, &ae) {
		if what, ok := d.what[ae.Entry]; ok {
			return res, describe(what, ae.Err)
		}
	}
	return res, err
}

// keyRef is the ref recorded with the provider's key: the variable it
// came from (os.environ/NAME), so that `rolter export` names it as a
// config file's env reference; "" for a literal key, or a name the admin
// API would refuse as a ref (LiteLLM reads any name).
func (p *Provider) keyRef() string {
	if !admin.ValidKeyRef(p.KeyRef) {
		return ""
	}
	return p.KeyRef
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

// Run plans the import of cfg, applies it unless opts.DryRun, and prints
// the result to out.
//
// With opts.Strict, a file with skipped entries is planned and printed as
// for a dry run and refused with ErrStrict; nothing is written.
func Run(ctx context.Context, st Store, adm Admin, cfg *Config, opts Options, out io.Writer) error {
	opts.defaults()
	plan, err := NewPlan(ctx, st, cfg, opts)
	if err != nil {
		return err
	}
	if opts.Probe {
		plan.Suggestions = probe(ctx, plan.Providers, probeTimeout)
	}
	refuse := opts.Strict && len(plan.Skipped) > 0
	if !opts.DryRun && !refuse {
		if len(cfg.Unset) > 0 { // a ParseDryRun config: its keys are unknown
			return fmt.Errorf("environment variables not set: %s; nothing written", unsetNames(cfg.Unset))
		}
		if err := plan.Apply(ctx, adm, st); err != nil {
			return fmt.Errorf("%w (what was written before stays; re-running the import resumes)", err)
		}
	}
	plan.Print(out, opts.DryRun || refuse)
	if refuse {
		return fmt.Errorf("%w: %d %s skipped (%s); nothing written", ErrStrict, len(plan.Skipped), plural(len(plan.Skipped), "entry", "entries"), skippedList(plan.Skipped))
	}
	return nil
}

// ErrStrict is Run's error when Options.Strict refuses a file.
var ErrStrict = errors.New("--strict")

func unsetNames(vs []UnsetVar) string {
	names := make([]string, len(vs))
	for i, v := range vs {
		names[i] = v.Name
	}
	return strings.Join(names, ", ")
}

func skippedList(ss []Skipped) string {
	idx := make([]int, len(ss))
	for i, s := range ss {
		idx[i] = s.Index
	}
	return entries(idx)
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
