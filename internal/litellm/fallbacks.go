package litellm

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/rolter/rolter/internal/store"
)

// LiteLLM's fallback settings (issue 19), in router_settings or
// litellm_settings: lists of {model_name: [fallback model_name, ...]}.
// fallbacks map onto a route's fallbacks; context_window_fallbacks onto
// its context_fallback, which is one route (the first listed).
const (
	keyFallbacks        = "fallbacks"
	keyContextFallbacks = "context_window_fallbacks"
)

// takeFallbacks reads the fallback settings out of the top-level blocks,
// removing the ones it maps (so settingWarnings does not name them), and
// returns them with warnings for what it cannot map. A block left empty is
// removed too.
func takeFallbacks(top map[string]any) (fallbacks map[string][]string, ctx map[string]string, warns []string) {
	fallbacks, ctx = map[string][]string{}, map[string]string{}
	for _, block := range []string{"router_settings", "litellm_settings"} {
		b, ok := top[block].(map[string]any)
		if !ok {
			continue
		}
		for _, key := range []string{keyFallbacks, keyContextFallbacks} {
			v, ok := b[key]
			if !ok {
				continue
			}
			pairs, ok := fallbackLists(v)
			if !ok {
				continue // another shape: settingWarnings names it as ignored
			}
			delete(b, key)
			for _, p := range pairs {
				if key == keyFallbacks {
					for _, to := range p.to {
						if !slices.Contains(fallbacks[p.from], to) {
							fallbacks[p.from] = append(fallbacks[p.from], to)
						}
					}
					continue
				}
				if len(p.to) == 0 {
					continue
				}
				if cur, set := ctx[p.from]; set && cur != p.to[0] {
					warns = append(warns, fmt.Sprintf("%s.%s: %s already has the context fallback %s; %s left out",
						block, key, quoted(p.from), quoted(cur), quoted(p.to[0])))
					continue
				}
				ctx[p.from] = p.to[0]
				if len(p.to) > 1 {
					warns = append(warns, fmt.Sprintf("%s.%s: a rolter route has one context fallback: %s keeps %s, not %s",
						block, key, quoted(p.from), quoted(p.to[0]), strings.Join(quotedAll(p.to[1:]), ", ")))
				}
			}
		}
		if len(b) == 0 {
			delete(top, block)
		}
	}
	return fallbacks, ctx, warns
}

type fallbackPair struct {
	from string
	to   []string
}

// fallbackLists reads [{from: [to, ...]}, ...] in file order (keys of one
// item sorted); ok is false for any other shape.
func fallbackLists(v any) ([]fallbackPair, bool) {
	list, ok := v.([]any)
	if !ok {
		return nil, false
	}
	var out []fallbackPair
	for _, item := range list {
		m, ok := item.(map[string]any)
		if !ok {
			return nil, false
		}
		for _, from := range slices.Sorted(maps.Keys(m)) {
			tos, ok := m[from].([]any)
			if !ok {
				return nil, false
			}
			p := fallbackPair{from: from}
			for _, to := range tos {
				s, ok := to.(string)
				if !ok {
					return nil, false
				}
				p.to = append(p.to, s)
			}
			out = append(out, p)
		}
	}
	return out, true
}

func quotedAll(names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = quoted(n)
	}
	return out
}

// linkFallbacks sets the plan's new routes' fallbacks from the file's
// settings. A fallback must be a route: one of the file's, or one the
// project has already. An edge that would make a cycle or a chain deeper
// than store.MaxFallbackDepth (LiteLLM allows both; the admin API does not)
// is left out, and so is everything else the import cannot map, each with
// a note. Routes the project has already are left unchanged, fallbacks
// included.
func (plan *Plan) linkFallbacks(cfg *Config, existing []store.Route) {
	graph := map[string][]string{}
	for _, r := range existing {
		graph[r.Model] = append(slices.Clone(r.Fallbacks), ctxEdge(r.ContextFallback)...)
	}
	for _, r := range plan.Routes {
		if _, ok := graph[r.Model]; !ok {
			graph[r.Model] = nil
		}
	}
	plan.Notes = append(plan.Notes, cfg.FallbackWarnings...)
	add := func(r *Route, to, what string) bool {
		switch _, known := graph[to]; {
		case !known:
			plan.Notes = append(plan.Notes, fmt.Sprintf("%s %s of route %s left out: it is no route of the file or the project", what, quoted(to), quoted(r.Model)))
		case to == r.Model || reaches(graph, to, r.Model):
			plan.Notes = append(plan.Notes, fmt.Sprintf("%s %s of route %s left out: it would make a cycle", what, quoted(to), quoted(r.Model)))
		default:
			graph[r.Model] = append(graph[r.Model], to)
			if depth(graph, r.Model) <= store.MaxFallbackDepth {
				return true
			}
			graph[r.Model] = graph[r.Model][:len(graph[r.Model])-1]
			plan.Notes = append(plan.Notes, fmt.Sprintf("%s %s of route %s left out: chains of fallbacks are at most %d deep",
				what, quoted(to), quoted(r.Model), store.MaxFallbackDepth))
		}
		return false
	}
	for _, r := range plan.Routes {
		fbs, ctx := cfg.Fallbacks[r.Model], cfg.ContextFallbacks[r.Model]
		if r.Exists {
			if len(fbs) > 0 || ctx != "" {
				plan.Notes = append(plan.Notes, fmt.Sprintf("the fallbacks of route %s are left as they are: the route exists already", quoted(r.Model)))
			}
			continue
		}
		for _, to := range fbs {
			if len(r.Fallbacks) < 8 && add(r, to, "fallback") {
				r.Fallbacks = append(r.Fallbacks, to)
			}
		}
		if ctx != "" && add(r, ctx, "context fallback") {
			r.ContextFallback = ctx
		}
	}
	for _, from := range slices.Sorted(maps.Keys(cfg.Fallbacks)) {
		if _, ok := graph[from]; !ok {
			plan.Notes = append(plan.Notes, fmt.Sprintf("fallbacks of %s left out: it is no route of the file", quoted(from)))
		}
	}
	for _, from := range slices.Sorted(maps.Keys(cfg.ContextFallbacks)) {
		if _, ok := graph[from]; !ok {
			plan.Notes = append(plan.Notes, fmt.Sprintf("context fallback of %s left out: it is no route of the file", quoted(from)))
		}
	}
}

func ctxEdge(m string) []string {
	if m == "" {
		return nil
	}
	return []string{m}
}

// reaches reports whether to is reachable from from.
func reaches(graph map[string][]string, from, to string) bool {
	seen := map[string]bool{}
	var walk func(n string) bool
	walk = func(n string) bool {
		if n == to {
			return true
		}
		if seen[n] {
			return false
		}
		seen[n] = true
		for _, m := range graph[n] {
			if walk(m) {
				return true
			}
		}
		return false
	}
	return walk(from)
}

// depth is the longest chain through n: the longest leading to it plus the
// longest leaving it (the graph has no cycle).
func depth(graph map[string][]string, n string) int {
	var down func(n string, d int) int
	down = func(n string, d int) int {
		best := 0
		if d > store.MaxFallbackDepth+1 {
			return d
		}
		for _, m := range graph[n] {
			best = max(best, 1+down(m, d+1))
		}
		return best
	}
	var up func(n string, d int) int
	up = func(n string, d int) int {
		best := 0
		if d > store.MaxFallbackDepth+1 {
			return d
		}
		for from, tos := range graph {
			if slices.Contains(tos, n) {
				best = max(best, 1+up(from, d+1))
			}
		}
		return best
	}
	return down(n, 0) + up(n, 0)
}

// fallbackPhrase is what the report adds to a route's line: its fallbacks
// and context fallback, when it has any.
func (r *Route) fallbackPhrase() string {
	out := ""
	if len(r.Fallbacks) > 0 {
		out += ", fallbacks " + strings.Join(r.Fallbacks, ", ")
	}
	if r.ContextFallback != "" {
		out += ", context fallback " + r.ContextFallback
	}
	return out
}
