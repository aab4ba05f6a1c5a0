package admin

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
