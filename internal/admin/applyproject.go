package admin

import (
	"context"
	"fmt"
	"slices"
	"strconv"

	"github.com/rolter/rolter/internal/store"
)

func (a *applier) project(ctx context.Context, o *orgRun, i int, dp *DesiredProject) error {
	where := fmt.Sprintf("%s.projects[%d]", o.where, i)
	c := Change{Kind: KindProject, Name: o.name + "/" + dp.Name, Entry: where}
	cur := a.ix.project(o.id, dp.Name)
	if cur == nil {
		if err := a.create(ctx, c, func() (string, error) { _, err := a.s.CreateProject(ctx, o.name, dp.ProjectInput); return "", err }); err != nil {
			return err
		}
	} else {
		before := projectView(store.Org{Name: o.name}, *cur)
		if err := a.update(ctx, c, func(s *Service, _ *Change) ([]FieldChange, error) {
			v, err := s.PatchProject(ctx, o.name, dp.Name, projectPatch(dp.ProjectInput))
			return diffViews(before, v, ignoring(viewNoise...)), err
		}); err != nil {
			return err
		}
	}
	var pid int64
	if cur != nil {
		pid = cur.ID
	}
	// Routes the state lacks are created in batches (newRoutes), each
	// run of them in the order between the existing ones.
	order := fallbackOrder(dp.Routes)
	exists := func(k int) bool { return a.ix.routeByModel[childKey{pid, dp.Routes[order[k]].Model}] != nil }
	for k := 0; k < len(order); {
		if exists(k) {
			if err := a.route(ctx, o, dp.Name, pid, fmt.Sprintf("%s.routes[%d]", where, order[k]), &dp.Routes[order[k]]); err != nil {
				return err
			}
			k++
			continue
		}
		j := k + 1
		for j < len(order) && !exists(j) {
			j++
		}
		if err := a.newRoutes(ctx, o, dp, pid, where, order[k:j]); err != nil {
			return err
		}
		k = j
	}
	for ki := range dp.Keys {
		if err := a.virtualKey(ctx, o, dp.Name, pid, fmt.Sprintf("%s.keys[%d]", where, ki), &dp.Keys[ki]); err != nil {
			return err
		}
	}
	return nil
}

func (a *applier) route(ctx context.Context, o *orgRun, project string, pid int64, where string, r *RouteInput) error {
	c := Change{Kind: KindRoute, Name: o.name + "/" + project + "/" + r.Model, Entry: where}
	if err := a.keptProviders(o, "targets", len(r.Targets), func(j int) string { return r.Targets[j].Provider }); err != nil {
		return a.fail(c, err)
	}
	cur := a.ix.routeByModel[childKey{pid, r.Model}]
	if cur == nil {
		return a.create(ctx, c, func() (string, error) { _, err := a.s.CreateRoute(ctx, o.name, project, *r); return "", err })
	}
	var kept []TargetInput
	for _, t := range cur.Targets {
		if o.fleet[t.ProviderID] {
			w := t.Weight
			kept = append(kept, TargetInput{Provider: t.ProviderSlug, UpstreamModel: t.UpstreamModel, Weight: &w,
				Priority: t.Priority, ContextLimit: t.ContextLimit, Prices: pricesInput(t.Prices)})
		}
	}
	before := o.withoutFleet(routeView(*cur))
	return a.update(ctx, c, func(s *Service, _ *Change) ([]FieldChange, error) {
		v, err := s.PatchRoute(ctx, o.name, project, r.Model, routePatch(*r, kept))
		return diffViews(before, o.withoutFleet(v), ignoring(viewNoise...)), err
	})
}

// newRoutes creates the routes of dp at indexes idx, which the state
// lacks, in batches (routeBatch): each is checked as CreateRoute checks
// it, and the first that fails stops the apply, as a.route would, with the
// routes before it created. A batch the store refuses (a route that exists
// after all, created since the state was read) is created again a route
// at a time, so that a create-only apply leaves the existing one as it is
// and any other failure names its entry.
func (a *applier) newRoutes(ctx context.Context, o *orgRun, dp *DesiredProject, pid int64, where string, idx []int) error {
	change := func(ri int) Change {
		return Change{Kind: KindRoute, Name: o.name + "/" + dp.Name + "/" + dp.Routes[ri].Model, Entry: fmt.Sprintf("%s.routes[%d]", where, ri)}
	}
	b, err := a.s.newRouteBatch(ctx, o.name, dp.Name, len(idx))
	if err != nil {
		return a.fail(change(idx[0]), err)
	}
	var queued []int
	flush := func() error {
		_, err := b.flush(ctx)
		done := queued
		queued = nil
		if err != nil {
			for _, ri := range done {
				if err := a.route(ctx, o, dp.Name, pid, change(ri).Entry, &dp.Routes[ri]); err != nil {
					return err
				}
			}
			return nil
		}
		for _, ri := range done {
			c := change(ri)
			c.Action = ActionCreate
			a.add(c)
		}
		return nil
	}
	for _, ri := range idx {
		r := &dp.Routes[ri]
		err := a.keptProviders(o, "targets", len(r.Targets), func(j int) string { return r.Targets[j].Provider })
		if err == nil {
			err = b.add(ctx, *r)
		}
		if err != nil {
			if ferr := flush(); ferr != nil {
				return ferr
			}
			return a.fail(change(ri), err)
		}
		if queued = append(queued, ri); len(queued) == routeBatchSize {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	return flush()
}

// withoutFleet leaves the fleet's targets out of a route's view.
func (o *orgRun) withoutFleet(v RouteView) RouteView {
	v.Targets = slices.DeleteFunc(slices.Clone(v.Targets), func(t TargetView) bool { return o.fleetSlugs[t.Provider] })
	return v
}

func (a *applier) virtualKey(ctx context.Context, o *orgRun, project string, pid int64, where string, k *VirtualKeyInput) error {
	c := Change{Kind: KindVirtualKey, Name: o.name + "/" + project + "/" + k.Name, Entry: where}
	live := a.ix.liveKeys[childKey{pid, k.Name}]
	switch {
	case len(live) == 0:
		return a.create(ctx, c, func() (string, error) {
			v, err := a.s.CreateVirtualKey(ctx, o.name, project, *k)
			return v.Secret, err
		})
	case len(live) > 1 && !a.opt.CreateOnly:
		return a.fail(c, &Error{Kind: ErrConflict, Code: CodeConflict,
			Message: fmt.Sprintf("%d live virtual keys of the project are named %s: revoke all but one, or rename them, so that the entry names one key", len(live), quote(k.Name))})
	}
	cur := live[0]
	before := keyView(*cur)
	return a.update(ctx, c, func(s *Service, _ *Change) ([]FieldChange, error) {
		v, err := s.PatchVirtualKey(ctx, o.name, project, strconv.FormatInt(cur.ID, 10), keyPatch(*k, cur))
		return diffViews(before, v, ignoring(viewNoise...)), err
	})
}
