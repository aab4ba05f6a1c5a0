package admin

import (
	"context"

	"github.com/rolter/rolter/internal/store"
)

// Export is the current state as a Desired, without secrets, so that an
// Apply of it changes nothing (rolter export, GET /admin/v1/export): every
// org the caller may see with its live providers (pool keys as their ref
// and weight, never a secret), groups, projects with their routes and live
// virtual keys, and live fleet hosts. What the fleet owns is left out as
// Apply leaves it alone: hosts' providers and their route targets, and
// routes only they serve, and groups whose members are all theirs. So are
// soft-deleted providers, targets and members that name them (and groups
// left with no member), and revoked keys.
func (s *Service) Export(ctx context.Context) (Desired, error) {
	state, err := s.st.Load(ctx)
	if err != nil {
		return Desired{}, fromStore(err, "state")
	}
	ix := newStateIndex(state)
	d := Desired{Orgs: []DesiredOrg{}}
	sc := ScopeOf(ctx)
	for _, o := range state.Orgs {
		if !sc.Global() && o.ID != sc.OrgID {
			continue
		}
		hosts, err := allHosts(ctx, s.st, o.ID)
		if err != nil {
			return Desired{}, err
		}
		d.Orgs = append(d.Orgs, exportOrg(ix, o, hosts))
	}
	return d, nil
}

func exportOrg(ix *stateIndex, o store.Org, hosts []store.Host) DesiredOrg {
	fleet := map[int64]bool{}
	for _, h := range hosts {
		if h.ProviderID != 0 {
			fleet[h.ProviderID] = true
		}
	}
	live := map[int64]bool{} // providers a file may name
	do := DesiredOrg{OrgInput: OrgInput{Name: o.Name, Description: o.Description}}
	for _, p := range ix.providers[o.ID] {
		if p.DeletedAt != nil || fleet[p.ID] {
			continue
		}
		live[p.ID] = true
		do.Providers = append(do.Providers, DesiredProvider{ProviderInput: exportProvider(p)})
	}
	for _, g := range ix.groups[o.ID] {
		if g.DeletedAt != nil {
			continue
		}
		in := GroupInput{Slug: g.Slug, Name: g.Name, Strategy: g.Strategy, Policy: g.Policy}
		for _, m := range g.Members {
			if live[m.ProviderID] {
				w := m.Weight
				in.Members = append(in.Members, GroupMemberInput{Provider: m.ProviderSlug, Weight: &w, ModelMap: m.ModelMap})
			}
		}
		if len(in.Members) > 0 { // none: the fleet's alone, or nothing left
			do.Groups = append(do.Groups, DesiredGroup{GroupInput: in})
		}
	}
	for _, pj := range ix.projects[o.ID] {
		dp := DesiredProject{ProjectInput: ProjectInput{Name: pj.Name, Description: pj.Description, Budget: budgetInput(pj.Budget),
			RPMLimit: pj.RPMLimit, TPMLimit: pj.TPMLimit}}
		for _, r := range ix.routes[pj.ID] {
			in := RouteInput{Model: r.Model, Strategy: r.Strategy, Policy: r.Policy, RPMLimit: r.RPMLimit, TPMLimit: r.TPMLimit,
				Fallbacks: r.Fallbacks, ContextFallback: r.ContextFallback}
			for _, t := range r.Targets {
				if live[t.ProviderID] {
					w := t.Weight
					in.Targets = append(in.Targets, TargetInput{Provider: t.ProviderSlug, UpstreamModel: t.UpstreamModel, Weight: &w,
						Priority: t.Priority, ContextLimit: t.ContextLimit, Prices: pricesInput(t.Prices)})
				}
			}
			if len(in.Targets) > 0 { // none: the fleet's route, or one with nothing left to route to
				dp.Routes = append(dp.Routes, in)
			}
		}
		for _, k := range ix.keys[pj.ID] {
			if k.RevokedAt == nil {
				dp.Keys = append(dp.Keys, VirtualKeyInput{Name: k.Name, Models: k.Models, ExpiresAt: k.ExpiresAt,
					RPMLimit: k.RPMLimit, TPMLimit: k.TPMLimit, Budget: budgetInput(k.Budget)})
			}
		}
		do.Projects = append(do.Projects, dp)
	}
	for _, h := range hosts {
		if h.State != store.HostRetired {
			hi := HostInput{IP: h.IP, Port: h.Port, Project: ix.projectName(h.ProjectID), ModelName: h.ModelName,
				Recipe: h.Recipe, Notes: h.Notes, AutoApply: h.AutoApply}
			if h.DrainTimeout != 0 && h.DrainTimeout != store.DefaultDrainTimeout {
				dt := store.Duration(h.DrainTimeout)
				hi.DrainTimeout = &dt
			}
			do.Hosts = append(do.Hosts, hi)
		}
	}
	return do
}

// ProviderEntry is provider p as an entry of a desired state with its
// pool keys' secrets as p holds them: what Export writes for it, plus the
// secrets, so that an Apply of it changes nothing. rolter import builds
// the updates of the providers it made on it.
func ProviderEntry(p *store.Provider) DesiredProvider {
	in := exportProvider(p)
	for i := range in.Keys {
		in.Keys[i].Secret = p.Keys[i].Secret
	}
	return DesiredProvider{ProviderInput: in}
}

func exportProvider(p *store.Provider) ProviderInput {
	in := ProviderInput{Name: p.Name, Slug: p.Slug, Kind: p.Kind, BaseURL: p.BaseURL, MetadataSource: p.MetadataSource,
		ContextLimit: p.ContextLimit, Models: p.Models, FirstByteTimeout: p.Settings.FirstByteTimeout,
		IdleTimeout: p.Settings.IdleTimeout, ForwardHeaders: p.Settings.ForwardHeaders, Policy: p.Settings.Policy,
		Prices: pricesInput(p.Settings.Prices)}
	for _, k := range p.Keys {
		w := k.Weight
		in.Keys = append(in.Keys, KeyInput{Weight: &w, Ref: k.Ref})
	}
	return in
}
