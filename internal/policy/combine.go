package policy

import "github.com/rolter/rolter/internal/store"

// Strictest is the policy that refuses whatever a or b refuses and clamps
// to the lower of their ceilings: a request is governed by the strictest
// combination of its address's own policy (route or group) and the policy
// of the provider that serves it (SPEC §6). Zero values mean "no limit" /
// "allow", so a zero side leaves the other unchanged. MaxConcurrency is the
// lower of the two for display; each limit is enforced by its own Limiter.
func Strictest(a, b store.Policy) store.Policy {
	out := a
	out.MaxOutputTokens = lowerLimit(a.MaxOutputTokens, b.MaxOutputTokens)
	out.MaxConcurrency = lowerLimit(a.MaxConcurrency, b.MaxConcurrency)
	if b.Tools == "deny" {
		out.Tools = "deny"
	}
	if b.Media == "deny" {
		out.Media = "deny"
	}
	return out
}

// lowerLimit is the lower of two limits where 0 means none.
func lowerLimit(a, b int) int {
	switch {
	case a <= 0:
		return max(b, 0)
	case b <= 0:
		return a
	}
	return min(a, b)
}
