package admin

import (
	"fmt"
	"slices"
)

// backfill returns do with a slug in every provider and group entry that
// names none, backfilled against the org's namespace (backfillEntries):
// the one implementation of design 000's "Slug collision handling" that
// every import path shares. Providers come first, as Apply creates them
// first; a group's candidates skip what the providers took. An explicit
// slug is never changed: one that collides is refused (checkSlugs, or the
// Service's slug_taken at create). o.backfilled records, by entry path,
// the base of each entry that got a suffixed slug, for its change's
// report.
func (a *applier) backfill(o *orgRun, do *DesiredOrg) *DesiredOrg {
	out := *do
	out.Providers, out.Groups = slices.Clone(do.Providers), slices.Clone(do.Groups)
	named := map[string]bool{}
	for _, p := range do.Providers {
		named[p.Slug] = p.Slug != ""
	}
	for _, g := range do.Groups {
		named[g.Slug] = named[g.Slug] || g.Slug != ""
	}
	delete(named, "")
	var provHeld, groupHeld []string
	var provs, groups []slugHolder
	for _, p := range a.ix.providers[o.id] {
		groupHeld = append(groupHeld, p.Slug)
		if p.DeletedAt != nil || o.fleet[p.ID] {
			provHeld = append(provHeld, p.Slug)
			continue
		}
		provs = append(provs, slugHolder{slug: p.Slug, name: p.Name})
	}
	for _, g := range a.ix.groups[o.id] {
		provHeld = append(provHeld, g.Slug)
		if g.DeletedAt != nil {
			groupHeld = append(groupHeld, g.Slug)
			continue
		}
		groups = append(groups, slugHolder{slug: g.Slug, name: g.Name})
	}
	pe := make([]slugEntry, len(out.Providers))
	for i := range out.Providers {
		p := &out.Providers[i]
		pe[i] = slugEntry{name: p.Name, prev: p.PreviousSlug, slug: &p.Slug, where: fmt.Sprintf("%s.providers[%d]", o.where, i)}
	}
	o.backfilled = backfillEntries(pe, provs, provHeld, named)
	for _, p := range out.Providers {
		groupHeld = append(groupHeld, p.Slug)
	}
	ge := make([]slugEntry, len(out.Groups))
	for i := range out.Groups {
		g := &out.Groups[i]
		ge[i] = slugEntry{name: g.Name, prev: g.PreviousSlug, slug: &g.Slug, where: fmt.Sprintf("%s.groups[%d]", o.where, i)}
	}
	for where, base := range backfillEntries(ge, groups, groupHeld, named) {
		o.backfilled[where] = base
	}
	return &out
}

// backfillNote is the report of an entry whose slug the backfill
// suffixed.
func (o *orgRun) backfillNote(c *Change) {
	if base, ok := o.backfilled[c.Entry]; ok {
		c.SlugBase = base
		c.Notes = append(c.Notes, fmt.Sprintf("slug %s backfilled: %s, derived from the name, is taken (design 000: first claimant bare, later ones -2, -3, ...)",
			quote(slugOf(c.Name)), quote(base)))
	}
}

// slugOf is the slug part of a provider's or group's change name,
// "org/slug".
func slugOf(name string) string {
	for i := len(name) - 1; i >= 0; i-- {
		if name[i] == '/' {
			return name[i+1:]
		}
	}
	return name
}
