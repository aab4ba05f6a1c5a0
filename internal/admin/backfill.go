package admin

import (
	"maps"
	"slices"
	"strconv"
	"strings"
)

// suffixedBase is the longest base of a backfilled "base-N" (design 000,
// "Slug collision handling" 1), so that it fits in 63.
const suffixedBase = 58

// fallbackBase is the base of a name with no ASCII letter or digit.
const fallbackBase = "provider"

// SlugClaimant is one provider or group of an org taking part in a slug
// backfill.
type SlugClaimant struct {
	// Name is the provider's display name; its base slug is derived from it.
	Name string
	// Slug is the slug an existing provider already holds, which it keeps;
	// "" for a new provider that needs one.
	Slug string
}

// BackfilledSlug is the backfill's answer for one claimant.
type BackfilledSlug struct {
	// Base is the slug derived from the name (truncated to 63).
	Base string
	// Final is the slug the provider holds: Base, Base truncated to 58 with
	// "-N", or for an existing claimant the slug it already had.
	Final string
}

// BaseSlug is the backfill base of a provider name: DeriveSlug, or
// "provider" when the name has no ASCII letter or digit.
func BaseSlug(name string) string {
	if b := DeriveSlug(name); b != "" {
		return b
	}
	return fallbackBase
}

// Backfill assigns slugs to the new claimants of one org, the bulk backfill
// of design 000 ("Slug collision handling" 1). It is the one implementation
// every import path shares: the LiteLLM import (package litellm) and the
// rolter file's (Apply, for --config, rolter import and rolter apply). claimants are the org's providers in id order: existing
// ones first (they keep their slugs but count as claimants of their base),
// then the new ones in the order they will be created. held lists every
// slug already claimed in the org's namespace (providers, soft-deleted ones
// included, and groups).
//
// The first claimant of a base keeps it bare; the k-th claimant of the same
// base gets "base-k" with the base cut to 58 characters (and any '-' left at
// the cut trimmed). A candidate that is taken, by a held slug or by an
// earlier assignment, moves on to the next N until one is free, so the
// backfill never fails. The result depends only on the order of claimants
// and on the set of held slugs.
func Backfill(claimants []SlugClaimant, held []string) []BackfilledSlug {
	taken := make(map[string]bool, len(held)+len(claimants))
	for _, s := range held {
		taken[s] = true
	}
	for _, c := range claimants {
		if c.Slug != "" {
			taken[c.Slug] = true
		}
	}
	rows := map[string]int{} // claimants of each base so far
	out := make([]BackfilledSlug, len(claimants))
	for i, c := range claimants {
		base := BaseSlug(c.Name)
		rows[base]++
		if c.Slug != "" {
			out[i] = BackfilledSlug{Base: base, Final: c.Slug}
			continue
		}
		n := rows[base]
		cand := candidate(base, n)
		for taken[cand] {
			n++
			cand = candidate(base, n)
		}
		taken[cand] = true
		out[i] = BackfilledSlug{Base: base, Final: cand}
	}
	return out
}

// candidate is the slug of the n-th claimant of base: the base itself for
// n = 1 (a derived base is at most 63 characters), "base-n" otherwise.
func candidate(base string, n int) string {
	if n <= 1 {
		return base
	}
	return SuffixedSlug(base, n, suffixedBase)
}

// inFamily reports whether slug is base or a backfilled "base-N" (N >= 2).
func inFamily(slug, base string) bool {
	if slug == base {
		return true
	}
	i := strings.LastIndexByte(slug, '-')
	if i < 0 {
		return false
	}
	n, err := strconv.Atoi(slug[i+1:])
	return err == nil && n >= 2 && candidate(base, n) == slug
}

// slugEntry is a provider or group entry of a desired org, for the
// backfill of its slug.
type slugEntry struct {
	name, prev string
	slug       *string // the entry's slug, filled in when it names none
	where      string
}

// slugHolder is an existing provider or group an entry may turn out to be.
type slugHolder struct{ slug, name string }

// backfillEntries gives every entry that names no slug (and whose name
// has an ASCII letter or digit: the others are refused as the API refuses
// them) a slug, the backfill of design 000 ("Slug collision handling"):
//
//   - an entry is first matched to an existing one of its kind (mine, in
//     id order) of the same name whose slug is its base or a backfilled
//     "base-N", that no other entry names or matched: it keeps that slug,
//     so that re-applying a file maps every entry to the slug it got the
//     first time, however its entries are reordered;
//   - the others, in file order, go through Backfill: the first claimant
//     of a base keeps it bare, the later ones get "base-2", "base-3", …,
//     skipping held (what the namespace holds that an entry of this kind
//     may not take: another kind's slugs, deleted and fleet ones) and
//     every slug the file names or has assigned.
//
// A slug mine holds that no entry matched by name stays takeable: an
// entry that derives it is that provider or group, as before (the slug is
// its identity). It returns, by entry path, the base of every entry that
// was given another slug than its base (not of one matched by name).
func backfillEntries(entries []slugEntry, mine []slugHolder, held []string, named map[string]bool) map[string]string {
	var (
		claimants []SlugClaimant
		which     []int // the entry of each claimant
		taken     = map[string]bool{}
	)
	for i, e := range entries {
		if *e.slug != "" || DeriveSlug(e.name) == "" {
			continue
		}
		c := SlugClaimant{Name: e.name}
		if e.prev == "" {
			base := DeriveSlug(e.name)
			for _, m := range mine {
				if m.name == e.name && !taken[m.slug] && !named[m.slug] && inFamily(m.slug, base) {
					c.Slug, taken[m.slug] = m.slug, true
					break
				}
			}
		}
		claimants, which = append(claimants, c), append(which, i)
	}
	bases := map[string]string{}
	for k, got := range Backfill(claimants, append(held, slices.Collect(maps.Keys(named))...)) {
		e := entries[which[k]]
		*e.slug = got.Final
		if claimants[k].Slug == "" && got.Final != got.Base {
			bases[e.where] = got.Base
		}
	}
	return bases
}
