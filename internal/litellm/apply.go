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
)

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
