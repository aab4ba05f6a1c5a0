package admin

import (
	"context"
	"fmt"
	"slices"
	"strconv"

	"github.com/rolter/rolter/internal/store"
)

// prune deletes what org o holds and do does not.
func (a *applier) prune(ctx context.Context, o *orgRun, do *DesiredOrg) error {
	served := map[int64]map[string]bool{} // project id → models live hosts serve
	for _, h := range o.hosts {
		if h.State != store.HostRetired {
			if served[h.ProjectID] == nil {
				served[h.ProjectID] = map[string]bool{}
			}
			served[h.ProjectID][h.ModelName] = true
		}
	}
	// What the file holds, by name: each existing entry is looked up
	// once.
	projects := map[string]int64{}                           // the index of each in the file
	routes, keys := map[childKey]bool{}, map[childKey]bool{} // by that index
	for i, dp := range do.Projects {
		projects[dp.Name] = int64(i)
		for _, r := range dp.Routes {
			routes[childKey{int64(i), r.Model}] = true
		}
		for _, k := range dp.Keys {
			keys[childKey{int64(i), k.Name}] = true
		}
	}
	hosts := map[hostAddr]bool{}
	for _, h := range do.Hosts {
		hosts[hostAddr{canonicalIP(h.IP), h.Port}] = true
	}
	for _, pj := range a.ix.projects[o.id] {
		di, inFile := projects[pj.Name]
		pname := o.name + "/" + pj.Name
		fleetRoutes := 0
		for _, r := range a.ix.routes[pj.ID] {
			fleet := served[pj.ID][r.Model]
			for _, t := range r.Targets {
				fleet = fleet || o.fleet[t.ProviderID]
			}
			if fleet {
				fleetRoutes++
				continue
			}
			if inFile && routes[childKey{di, r.Model}] {
				continue
			}
			if err := a.remove(Change{Kind: KindRoute, Name: pname + "/" + r.Model}, func() error {
				return a.s.DeleteRoute(ctx, o.name, pj.Name, r.Model)
			}); err != nil {
				return err
			}
		}
		for _, k := range a.ix.keys[pj.ID] {
			if k.RevokedAt != nil || inFile && keys[childKey{di, k.Name}] {
				continue
			}
			c := Change{Kind: KindVirtualKey, Name: pname + "/" + k.Name, Notes: []string{"revoked; the record stays for the audit trail"}}
			if err := a.remove(c, func() error {
				_, err := a.s.RevokeVirtualKey(ctx, o.name, pj.Name, strconv.FormatInt(k.ID, 10))
				return err
			}); err != nil {
				return err
			}
		}
		if inFile {
			continue
		}
		c := Change{Kind: KindProject, Name: pname}
		if n := len(a.ix.keys[pj.ID]); n > 0 {
			c.Notes = []string{fmt.Sprintf("its %d virtual keys, revoked, are purged with it (usage records keep their ids)", n)}
		}
		if fleetRoutes > 0 {
			c.Notes = append(c.Notes, fmt.Sprintf("%d of its routes are served by fleet hosts: retire the hosts first", fleetRoutes))
		}
		if err := a.remove(c, func() error {
			for _, k := range a.ix.keys[pj.ID] {
				if err := a.s.PurgeVirtualKey(ctx, o.name, pj.Name, strconv.FormatInt(k.ID, 10)); err != nil {
					return err
				}
			}
			return a.s.DeleteProject(ctx, o.name, pj.Name)
		}); err != nil {
			return err
		}
	}
	for _, h := range o.hosts {
		if h.State == store.HostRetired || hosts[hostAddr{h.IP, h.Port}] {
			continue
		}
		c := Change{Kind: KindHost, Name: hostName(o.name, h.IP, h.Port), Notes: []string{"retired; the record stays"}}
		if err := a.remove(c, func() error {
			_, err := a.s.RetireHost(ctx, o.name, strconv.FormatInt(h.ID, 10))
			return err
		}); err != nil {
			return err
		}
	}
	for _, g := range a.ix.groups[o.id] {
		// Groups with a fleet member are the fleet's too, as its routes.
		if g.DeletedAt != nil || o.claimedGroups[g.ID] || slices.ContainsFunc(g.Members, func(m store.GroupMember) bool { return o.fleet[m.ProviderID] }) {
			continue
		}
		c := Change{Kind: KindGroup, Name: o.name + "/" + g.Slug, Notes: []string{"soft-deleted: its slug stays reserved until it is purged"}}
		if err := a.remove(c, func() error { return a.s.DeleteGroup(ctx, o.name, g.Slug, false, false) }); err != nil {
			return err
		}
	}
	for _, p := range a.ix.providers[o.id] {
		if p.DeletedAt != nil || o.fleet[p.ID] || o.claimedProviders[p.ID] {
			continue
		}
		c := Change{Kind: KindProvider, Name: o.name + "/" + p.Slug, Notes: []string{"soft-deleted: its slug stays reserved until it is purged"}}
		if err := a.remove(c, func() error { return a.s.DeleteProvider(ctx, o.name, p.Slug, false, false) }); err != nil {
			return err
		}
	}
	return nil
}
