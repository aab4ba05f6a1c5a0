package litellm

import (
	"fmt"
	"slices"

	"github.com/rolter/rolter/internal/admin"
)

// Limits are a route's requests and tokens per minute; 0: no limit.
type Limits struct{ RPM, TPM int }

// routeLimits maps litellm_params.rpm and tpm onto route limits.
//
// LiteLLM limits each deployment; rolter limits a route, all its targets
// together (docs/limits.md). So a route gets the sum of its deployments'
// rpm when every one of them sets rpm, and no rpm limit otherwise: a
// deployment without rpm is unbounded in LiteLLM, and any total would be a
// limit the file never set. tpm likewise. The total is what the route
// admits; rolter then balances by weight, so a deployment whose weight
// share is above its rpm share can see more than its own rpm.
//
// A wildcard entry makes a group, which has no limits. Every rpm or tpm
// not carried over is named in a warning, one per route and setting.
func routeLimits(es []Entry) (map[string]Limits, []string) {
	type acc struct {
		set, unset []int // entries that set the value, and those that do not
		sum        int
	}
	byRoute := map[string]*[2]acc{} // model_name -> rpm, tpm
	var order []string
	var warnings []string
	for _, e := range es {
		vals := [2]int{e.RPM, e.TPM}
		if e.Wildcard != "" {
			for i, v := range vals {
				if v != 0 {
					warnings = append(warnings, fmt.Sprintf("ignored litellm_params.%s in model_list[%d] (a wildcard becomes a group or a provider address, and rolter limits routes, keys and projects)",
						limitNames[i], e.Index))
				}
			}
			continue
		}
		a, ok := byRoute[e.ModelName]
		if !ok {
			a = &[2]acc{}
			byRoute[e.ModelName] = a
			order = append(order, e.ModelName)
		}
		for i, v := range vals {
			if v == 0 {
				a[i].unset = append(a[i].unset, e.Index)
				continue
			}
			a[i].set = append(a[i].set, e.Index)
			a[i].sum += v
		}
	}
	out := map[string]Limits{}
	for _, route := range order {
		a := byRoute[route]
		var got [2]int
		for i := range a {
			switch {
			case len(a[i].set) == 0:
			case len(a[i].unset) > 0:
				warnings = append(warnings, fmt.Sprintf("ignored litellm_params.%s in %s (route %s: %s %s no %s, so the deployments have no total to carry over; set %s_limit on the route or on keys)",
					limitNames[i], entries(a[i].set), route, entries(a[i].unset), setsOrSet(len(a[i].unset)), limitNames[i], limitNames[i]))
			case a[i].sum > admin.MaxRateLimit:
				warnings = append(warnings, fmt.Sprintf("ignored litellm_params.%s in %s (route %s: the sum is above rolter's limit of %d)",
					limitNames[i], entries(a[i].set), route, admin.MaxRateLimit))
			default:
				got[i] = a[i].sum
			}
		}
		if got != [2]int{} {
			out[route] = Limits{RPM: got[0], TPM: got[1]}
		}
	}
	slices.Sort(warnings)
	return out, warnings
}

var limitNames = [2]string{"rpm", "tpm"}

func setsOrSet(n int) string {
	if n == 1 {
		return "sets"
	}
	return "set"
}
