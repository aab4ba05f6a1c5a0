package litellm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/rolter/rolter/internal/admin"
	"github.com/rolter/rolter/internal/store"
)

// Apply writes the plan: org and project if missing, new providers with
// their backfilled slugs and import records, the updates of the providers
// an earlier import created, then new groups and new routes. Everything
// has been checked before; a failure here is the store's, or a concurrent
// change, and a re-run resumes where this one stopped.
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
		switch {
		case !p.Exists:
			err = plan.create(ctx, adm, st, org, p)
		case p.Imported && p.update.write:
			err = plan.updateProvider(ctx, adm, p)
		}
		if err != nil {
			return err
		}
	}
	for _, g := range plan.Groups {
		if g.Exists {
			continue
		}
		in := admin.GroupInput{Slug: g.Slug, Name: g.Pattern + " (LiteLLM wildcard)"}
		for _, m := range g.Members {
			w := m.Weight
			in.Members = append(in.Members, admin.GroupMemberInput{Provider: m.Provider.Slug, Weight: &w})
		}
		if _, err := adm.CreateGroup(ctx, plan.Org, in); err != nil {
			return describe(fmt.Sprintf("group %s for %s", g.Slug, entries(g.Entries)), err)
		}
	}
	for _, r := range plan.Routes {
		if r.Exists {
			continue
		}
		in := admin.RouteInput{Model: r.Model, RPMLimit: r.Limits.RPM, TPMLimit: r.Limits.TPM}
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

// create creates a new provider with its import record, then records the
// id of its key, which exists only once the provider does. Should that
// second write fail, a re-run finds the key in the pool by its value and
// records it then.
func (plan *Plan) create(ctx context.Context, adm Admin, st Store, org *store.Org, p *Provider) error {
	what := fmt.Sprintf("provider %s for %s", p.Slug, entries(p.Entries))
	rec := &store.ProviderImport{IDs: slices.Sorted(slices.Values(p.IDs)), Name: p.Name, Kind: p.Kind, BaseURL: p.BaseURL}
	in := admin.ProviderInput{Name: p.Name, Slug: p.Slug, Kind: p.Kind, BaseURL: p.BaseURL, Import: rec}
	if !p.Key.IsZero() {
		in.Keys = []admin.KeyInput{{Secret: p.Key, Ref: p.keyRef()}}
	}
	if _, err := adm.CreateProvider(ctx, plan.Org, in); err != nil {
		return describe(what, err)
	}
	got, err := st.GetProvider(ctx, org.ID, p.Slug)
	if err != nil {
		return fmt.Errorf("provider %s: read back: %w", p.Slug, err)
	}
	p.ID = got.ID
	if len(got.Keys) == 1 {
		rec.KeyID = got.Keys[0].ID
		if _, err := adm.UpdateProvider(ctx, plan.Org, p.Slug, admin.ProviderPatch{Import: rec}, false); err != nil {
			return describe(what+": record its key", err)
		}
	}
	return nil
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

// updateProvider writes the update of a provider an earlier import
// created: the new key first, so that the pool is never empty, then the
// removal of the key it replaces, then the fields and the record.
func (plan *Plan) updateProvider(ctx context.Context, adm Admin, p *Provider) error {
	u := &p.update
	what := fmt.Sprintf("provider %s for %s", p.Slug, entries(p.Entries))
	if u.addKey {
		k, err := adm.AddProviderKey(ctx, plan.Org, p.Slug, admin.KeyInput{Secret: p.Key, Weight: u.keyWeight, Ref: p.keyRef()})
		if err != nil {
			return describe(what+": add its key", err)
		}
		u.record.KeyID = k.ID
	}
	if u.dropKey != 0 {
		if err := adm.DeleteProviderKey(ctx, plan.Org, p.Slug, strconv.FormatInt(u.dropKey, 10)); err != nil && !errors.Is(err, admin.ErrNotFound) {
			return describe(what+": remove its old key", err)
		}
	}
	patch := u.patch
	patch.Import = u.record
	if _, err := adm.UpdateProvider(ctx, plan.Org, p.Slug, patch, false); err != nil {
		return describe(what, err)
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
