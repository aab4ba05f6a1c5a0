package admin

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/rolter/rolter/internal/store"
)

// orgRun is what the apply knows of one org of the desired state.
type orgRun struct {
	name, where string
	// id is the existing org's; 0 when this apply creates it, so that
	// nothing of it exists yet.
	id    int64
	hosts []store.Host // every host, retired ones included
	// liveHosts are the hosts that are not retired, by address.
	liveHosts map[hostAddr]*store.Host
	// fleet are the providers the fleet registered for hosts, by id and
	// by slug.
	fleet      map[int64]bool
	fleetSlugs map[string]bool
	// providers are the org's live providers that are not the fleet's,
	// groups its groups: what entries are matched to.
	providers slugIndex[store.Provider]
	groups    slugIndex[store.Group]
	// keep are the slugs of the providers that stay after a prune: the
	// file's and the fleet's.
	keep map[string]bool
	// named are the slugs the file's providers and groups name, as slug
	// or previous_slug: no other entry takes them by name.
	named map[string]bool
	// claimed are the existing providers and groups matched so far, by
	// id.
	claimedProviders, claimedGroups map[int64]bool
	// backfilled are the entries whose slug the backfill suffixed, by
	// path, with the base they derive (backfill).
	backfilled map[string]string
	// providerBatch holds the new providers checked and not yet written,
	// queued their changes (flushProviders).
	providerBatch *providerBatch
	queued        []queuedCreate
}

func (a *applier) org(ctx context.Context, where string, do *DesiredOrg) error {
	c := Change{Kind: KindOrg, Name: do.Name, Entry: where}
	if err := CheckOrgScope(ctx, do.Name); err != nil {
		return a.fail(c, err)
	}
	o := &orgRun{name: do.Name, where: where, liveHosts: map[hostAddr]*store.Host{}, fleet: map[int64]bool{}, fleetSlugs: map[string]bool{},
		keep: map[string]bool{}, named: map[string]bool{}, claimedProviders: map[int64]bool{}, claimedGroups: map[int64]bool{}}
	if cur := a.ix.orgs[do.Name]; cur == nil {
		if err := a.create(ctx, c, func() (string, error) { _, err := a.s.CreateOrg(ctx, do.OrgInput); return "", err }); err != nil {
			return err
		}
	} else {
		if err := checkOrgID(ctx, cur); err != nil {
			return a.fail(c, err)
		}
		o.id = cur.ID
		before := orgView(*cur)
		if err := a.update(ctx, c, func(s *Service, _ *Change) ([]FieldChange, error) {
			v, err := s.PatchOrg(ctx, do.Name, orgPatch(do.OrgInput))
			return diffViews(before, v, only("description")), err
		}); err != nil {
			return err
		}
		hosts, err := allHosts(ctx, a.s.st, o.id)
		if err != nil {
			return a.fail(c, err)
		}
		o.hosts = hosts
		for i := range o.hosts {
			h := &o.hosts[i]
			if h.ProviderID != 0 {
				o.fleet[h.ProviderID] = true
				o.fleetSlugs[h.ProviderSlug] = true
				o.keep[h.ProviderSlug] = true
			}
			if h.State != store.HostRetired {
				o.liveHosts[hostAddr{h.IP, h.Port}] = h
			}
		}
	}
	o.providers = indexSlugs(a.ix.providers[o.id], func(p *store.Provider) bool { return p.DeletedAt == nil && !o.fleet[p.ID] },
		func(p *store.Provider) string { return p.Slug }, func(p *store.Provider) string { return p.Name })
	o.groups = indexSlugs(a.ix.groups[o.id], func(g *store.Group) bool { return g.DeletedAt == nil },
		func(g *store.Group) string { return g.Slug }, func(g *store.Group) string { return g.Name })
	do = a.backfill(o, do)
	for _, p := range do.Providers {
		name, slug := p.Name, p.Slug
		nameAndSlug(fieldErrors{}, &name, &slug)
		o.keep[slug], o.named[slug], o.named[p.PreviousSlug] = true, true, true
	}
	for _, g := range do.Groups {
		name, slug := g.Name, g.Slug
		nameAndSlug(fieldErrors{}, &name, &slug)
		o.named[slug], o.named[g.PreviousSlug] = true, true
	}
	if len(do.Providers) > 0 {
		pb, err := a.s.newProviderBatch(ctx, o.name)
		if err != nil {
			return a.fail(c, err)
		}
		o.providerBatch = pb
	}
	for i := range do.Providers {
		if err := a.provider(ctx, o, i, &do.Providers[i]); err != nil {
			return err
		}
	}
	if err := a.flushProviders(ctx, o); err != nil {
		return err
	}
	for i := range do.Groups {
		if err := a.group(ctx, o, i, &do.Groups[i]); err != nil {
			return err
		}
	}
	for i := range do.Projects {
		if err := a.project(ctx, o, i, &do.Projects[i]); err != nil {
			return err
		}
	}
	if err := a.hosts(ctx, o, do.Hosts); err != nil {
		return err
	}
	if a.opt.Prune && o.id != 0 {
		return a.prune(ctx, o, do)
	}
	return nil
}

// matchSlug finds the existing provider or group (T) an entry is: the one
// with the entry's slug, else the one its previous_slug names, else the one
// unclaimed entry of the same name that no other entry names. A match
// under another slug is a slug change: refused without allow_slug_change.
// A create-only apply matches by slug alone.
func matchSlug[T any](a *applier, o *orgRun, kind string, ix slugIndex[T], id func(*T) int64, slugOf func(*T) string,
	claimed map[int64]bool, name, slug string, sc SlugChange) (*T, error) {
	by := lastUnclaimed(ix.bySlug[slug], id, claimed)
	if by == nil && !a.opt.CreateOnly {
		if sc.PreviousSlug != "" {
			by = lastUnclaimed(ix.bySlug[sc.PreviousSlug], id, claimed)
		} else {
			var same []*T
			for _, e := range ix.byName[name] {
				if slugOf(e) != slug && !claimed[id(e)] && !o.named[slugOf(e)] {
					if same = append(same, e); len(same) > 1 {
						break // not the one
					}
				}
			}
			if len(same) == 1 {
				by = same[0]
			}
		}
	}
	if by == nil {
		return nil, nil
	}
	claimed[id(by)] = true
	if old := slugOf(by); old != slug && !sc.AllowSlugChange {
		return nil, &Error{Kind: ErrInvalid, Code: CodeSlugImmutable,
			Message: fmt.Sprintf("the %s %s is %s in this file: a new slug changes every %s/<model> address, so it needs allow_slug_change: true on the entry (or give the entry another name to create a second %s)",
				kind, quote(old), quote(slug), quote(old), kind),
			Fields: map[string]string{"slug": "immutable"}}
	}
	return by, nil
}

// lastUnclaimed is the last of list that claimed lacks.
func lastUnclaimed[T any](list []*T, id func(*T) int64, claimed map[int64]bool) *T {
	for i := len(list) - 1; i >= 0; i-- {
		if !claimed[id(list[i])] {
			return list[i]
		}
	}
	return nil
}

func (a *applier) provider(ctx context.Context, o *orgRun, i int, dp *DesiredProvider) error {
	name, slug := dp.Name, dp.Slug
	nameAndSlug(fieldErrors{}, &name, &slug)
	c := Change{Kind: KindProvider, Name: o.name + "/" + slug, Entry: fmt.Sprintf("%s.providers[%d]", o.where, i)}
	o.backfillNote(&c)
	m, err := matchSlug(a, o, KindProvider, o.providers, func(p *store.Provider) int64 { return p.ID },
		func(p *store.Provider) string { return p.Slug }, o.claimedProviders, name, slug, dp.SlugChange)
	if err != nil {
		return a.fail(c, err)
	}
	if m == nil {
		in := dp.ProviderInput
		if a.opt.DryRun {
			in.Keys = slices.Clone(in.Keys)
			for k := range in.Keys {
				if in.Keys[k].Secret.IsZero() {
					in.Keys[k].Secret = dryRunSecret
				}
			}
		}
		alone := func() (string, error) { _, err := a.s.CreateProvider(ctx, o.name, in); return "", err }
		if err := o.providerBatch.add(in); err != nil {
			if ferr := a.flushProviders(ctx, o); ferr != nil {
				return ferr
			}
			return a.fail(c, err)
		}
		if o.queued = append(o.queued, queuedCreate{c: c, alone: alone}); len(o.queued) == providerBatchSize {
			return a.flushProviders(ctx, o)
		}
		return nil
	}
	// The creates before it first, so that changes keep the file's order.
	if err := a.flushProviders(ctx, o); err != nil {
		return err
	}
	before := providerView(*m)
	return a.update(ctx, c, func(s *Service, c *Change) ([]FieldChange, error) {
		v, err := s.UpdateProvider(ctx, o.name, m.Slug, providerPatch(dp.ProviderInput, name, slug), dp.AllowSlugChange)
		if err != nil {
			return nil, err
		}
		fields := diffViews(before, v, ignoring(append(viewNoise, "keys")...))
		keys, err := a.keys(ctx, s, c, o.name, slug, m.Keys, dp.Keys)
		return append(fields, keys...), err
	})
}

func (a *applier) group(ctx context.Context, o *orgRun, i int, dg *DesiredGroup) error {
	name, slug := dg.Name, dg.Slug
	nameAndSlug(fieldErrors{}, &name, &slug)
	c := Change{Kind: KindGroup, Name: o.name + "/" + slug, Entry: fmt.Sprintf("%s.groups[%d]", o.where, i)}
	o.backfillNote(&c)
	if err := a.keptProviders(o, "members", len(dg.Members), func(j int) string { return dg.Members[j].Provider }); err != nil {
		return a.fail(c, err)
	}
	m, err := matchSlug(a, o, KindGroup, o.groups, func(g *store.Group) int64 { return g.ID },
		func(g *store.Group) string { return g.Slug }, o.claimedGroups, name, slug, dg.SlugChange)
	if err != nil {
		return a.fail(c, err)
	}
	if m == nil {
		return a.create(ctx, c, func() (string, error) { _, err := a.s.CreateGroup(ctx, o.name, dg.GroupInput); return "", err })
	}
	// The fleet's members stay, as a route's fleet targets do, unless
	// the entry names them itself.
	named := map[string]bool{}
	for _, mb := range dg.Members {
		named[mb.Provider] = true
	}
	var kept []GroupMemberInput
	for _, mb := range m.Members {
		if o.fleet[mb.ProviderID] && !named[mb.ProviderSlug] {
			w := mb.Weight
			kept = append(kept, GroupMemberInput{Provider: mb.ProviderSlug, Weight: &w, ModelMap: mb.ModelMap})
		}
	}
	before := o.groupWithoutFleet(groupView(*m), named)
	return a.update(ctx, c, func(s *Service, _ *Change) ([]FieldChange, error) {
		v, err := s.UpdateGroup(ctx, o.name, m.Slug, groupPatch(dg.GroupInput, name, slug, kept), dg.AllowSlugChange)
		return diffViews(before, o.groupWithoutFleet(v, named), ignoring(viewNoise...)), err
	})
}

// groupWithoutFleet leaves the fleet's members out of a group's view,
// but those named.
func (o *orgRun) groupWithoutFleet(v GroupView, named map[string]bool) GroupView {
	v.Members = slices.DeleteFunc(slices.Clone(v.Members), func(m GroupMemberView) bool { return o.fleetSlugs[m.Provider] && !named[m.Provider] })
	return v
}

// keptProviders refuses, in a prune, an entry that names a provider the
// prune deletes: it would pass the Service's checks (the provider is still
// there) and break once the prune has run.
func (a *applier) keptProviders(o *orgRun, field string, n int, slug func(int) string) error {
	if !a.opt.Prune {
		return nil
	}
	fe := fieldErrors{}
	for j := range n {
		if s := slug(j); s != "" && !o.keep[s] {
			fe.add(fmt.Sprintf("%s[%d].provider", field, j), "names a provider that is not in the file, which --prune deletes")
		}
	}
	return fe.err()
}

// canonicalIP is ip as the Service stores it, for matching; ip itself
// when it is no address (the Service refuses it on create).
func canonicalIP(ip string) string {
	addr, err := netip.ParseAddr(strings.TrimSpace(ip))
	if err != nil {
		return ip
	}
	return addr.Unmap().String()
}

func hostName(org, ip string, port int) string {
	return org + "/" + net.JoinHostPort(canonicalIP(ip), strconv.Itoa(port))
}

// hosts applies the org's hosts: the existing ones updated entry by entry,
// then the new ones created in one batch (Service.createHosts: each pool
// read and checked once), their changes in the entries' order. A
// create-only apply creates each on its own, as it creates everything.
func (a *applier) hosts(ctx context.Context, o *orgRun, hs []HostInput) error {
	change := func(i int) Change {
		return Change{Kind: KindHost, Name: hostName(o.name, hs[i].IP, hs[i].Port), Entry: fmt.Sprintf("%s.hosts[%d]", o.where, i)}
	}
	var fresh []int // indexes of the entries that create a host
	isFresh := make([]bool, len(hs))
	for i := range hs {
		if o.liveHosts[hostAddr{canonicalIP(hs[i].IP), hs[i].Port}] == nil && !a.opt.CreateOnly {
			fresh, isFresh[i] = append(fresh, i), true
		}
	}
	mark := len(a.res.Changes)
	for i := range hs {
		if !isFresh[i] {
			if err := a.host(ctx, o, change(i), &hs[i]); err != nil {
				return err
			}
		}
	}
	if len(fresh) == 0 {
		return nil
	}
	ins := make([]HostInput, len(fresh))
	for j, i := range fresh {
		ins[j] = hs[i]
	}
	views, at, err := a.s.createHosts(ctx, o.name, ins, func(j int) string { return change(fresh[j]).Entry })
	if err != nil {
		if at < 0 { // no one entry's failure: the org's hosts list's
			return a.fail(Change{Kind: KindOrg, Name: o.name, Entry: o.where + ".hosts"}, err)
		}
		return a.fail(change(fresh[at]), err)
	}
	// The changes in the entries' order: the updates made above, with
	// the creates put in between.
	updates := slices.Clone(a.res.Changes[mark:])
	a.res.Changes = a.res.Changes[:mark]
	for i, j := 0, 0; i < len(hs); i++ {
		if isFresh[i] {
			c := change(i)
			c.Action = ActionCreate
			if !a.opt.DryRun {
				c.Secret = views[j].APIKey
			}
			a.add(c)
			j++
			continue
		}
		a.add(updates[0])
		updates = updates[1:]
	}
	return nil
}

func (a *applier) host(ctx context.Context, o *orgRun, c Change, h *HostInput) error {
	cur := o.liveHosts[hostAddr{canonicalIP(h.IP), h.Port}]
	if cur == nil {
		return a.create(ctx, c, func() (string, error) {
			v, err := a.s.CreateHost(ctx, o.name, *h)
			return v.APIKey, err
		})
	}
	project := h.Project
	if project == "" {
		project = "default"
	}
	curProject := a.ix.projectName(cur.ProjectID)
	before := a.s.hostView(cur, curProject)
	return a.update(ctx, c, func(s *Service, _ *Change) ([]FieldChange, error) {
		p := HostPatch{Recipe: &h.Recipe, Notes: &h.Notes, AutoApply: &h.AutoApply, DrainTimeout: h.DrainTimeout, HFToken: h.HFToken}
		// A host's project and model are its identity: the Service
		// refuses to change them, with its own error.
		if project != curProject {
			p.Project = &project
		}
		if h.ModelName != cur.ModelName {
			p.ModelName = &h.ModelName
		}
		v, err := s.PatchHost(ctx, o.name, strconv.FormatInt(cur.ID, 10), p)
		return diffViews(before, v, only("port", "recipe", "notes", "auto_apply")), err
	})
}
