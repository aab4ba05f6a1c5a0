package admin

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/rolter/rolter/internal/store"
)

// Fallback routes (issue 19): the stable codes of the refusals.
const (
	// CodeUnknownRoute: fallbacks or context_fallback names a route that
	// does not exist in the project.
	CodeUnknownRoute = "unknown_route"
	// CodeFallbackCycle: the route would reach itself through fallbacks
	// and context fallbacks (itself included).
	CodeFallbackCycle = "fallback_cycle"
	// CodeFallbackTooDeep: a chain of fallbacks would be longer than
	// store.MaxFallbackDepth.
	CodeFallbackTooDeep = "fallback_too_deep"
	// CodeRouteIsFallback: the route cannot be deleted or renamed while
	// another route names it as a fallback.
	CodeRouteIsFallback = "route_is_fallback"
)

// MaxFallbacks bounds a route's fallbacks list; MaxPriority a target's
// priority.
const (
	MaxFallbacks = 8
	MaxPriority  = 1000
)

// allRoutes reads every route of a project.
func (s *Service) allRoutes(ctx context.Context, projectID int64) ([]store.Route, error) {
	var out []store.Route
	page := store.Page{Limit: 1000}
	for {
		rows, err := s.st.ListRoutes(ctx, projectID, page)
		if err != nil {
			return nil, fromStore(err, "routes")
		}
		out = append(out, rows...)
		if len(rows) < page.Limit {
			return out, nil
		}
		page.After = rows[len(rows)-1].ID
	}
}

// fallbackEdges are the routes r falls back to: its fallbacks, then its
// context fallback.
func fallbackEdges(r *store.Route) []string {
	out := slices.Clone(r.Fallbacks)
	if r.ContextFallback != "" {
		out = append(out, r.ContextFallback)
	}
	return out
}

// namesAsFallback are the routes of rs (other than r) that name model as a
// fallback or context fallback.
func namesAsFallback(rs []store.Route, self int64, model string) []string {
	var by []string
	for i := range rs {
		if rs[i].ID != self && slices.Contains(fallbackEdges(&rs[i]), model) {
			by = append(by, rs[i].Model)
		}
	}
	return by
}

// refuseIfFallback refuses to delete or rename r while another route of
// its project names it as a fallback: the gateway would silently lose a
// fallback the operator chose. Edit those routes first.
func (s *Service) refuseIfFallback(ctx context.Context, r *store.Route, what string) error {
	rs, err := s.st.FallbackRoutes(ctx, r.ProjectID, nil)
	if err != nil {
		return fromStore(err, "routes")
	}
	if by := namesAsFallback(rs, r.ID, r.Model); len(by) > 0 {
		slices.Sort(by)
		return &Error{Kind: ErrConflict, Code: CodeRouteIsFallback,
			Message: fmt.Sprintf("route %s cannot be %s: it is the fallback of %s; change their fallbacks first",
				quote(r.Model), what, quoteList(by))}
	}
	return nil
}

func quoteList(names []string) string {
	q := make([]string, 0, min(len(names), 10))
	for i, n := range names {
		if i == 10 {
			q = append(q, fmt.Sprintf("and %d more", len(names)-10))
			break
		}
		q = append(q, quote(n))
	}
	return strings.Join(q, ", ")
}

// checkFallbacks validates r's fallbacks and context fallback against the
// project's routes as they will be once r is written: each names another
// existing route of the project, the graph of fallbacks has no cycle, and
// no chain is longer than store.MaxFallbackDepth. old is r's current name
// when it is being patched ("" on create); a rename is refused while
// another route names it.
func (s *Service) checkFallbacks(ctx context.Context, r *store.Route, old string) error {
	edges, err := checkFallbackFields(r)
	if err != nil {
		return err
	}
	renamed := old != "" && old != r.Model
	if len(edges) == 0 && !renamed {
		return nil // nothing can form a cycle through r
	}
	// The routes with fallbacks and those r names: a route with neither
	// is on no chain through r (issue 21: not every route of the project
	// per write).
	rs, err := s.st.FallbackRoutes(ctx, r.ProjectID, edges)
	if err != nil {
		return fromStore(err, "routes")
	}
	if renamed {
		if by := namesAsFallback(rs, r.ID, old); len(by) > 0 {
			slices.Sort(by)
			return &Error{Kind: ErrConflict, Code: CodeRouteIsFallback,
				Message: fmt.Sprintf("route %s cannot be renamed: it is the fallback of %s; change their fallbacks first", quote(old), quoteList(by))}
		}
	}
	graph := make(map[string][]string, len(rs)+1)
	for i := range rs {
		if rs[i].ID != r.ID || r.ID == 0 {
			graph[rs[i].Model] = fallbackEdges(&rs[i])
		}
	}
	return checkFallbackGraph(r, edges, graph)
}

// checkFallbackFields checks what of r's fallbacks needs no other route:
// their number and names, no repeat, none r itself. It answers r's edges
// (fallbackEdges).
func checkFallbackFields(r *store.Route) ([]string, error) {
	fe := fieldErrors{}
	if len(r.Fallbacks) > MaxFallbacks {
		fe.add("fallbacks", "holds %d routes; at most %d", len(r.Fallbacks), MaxFallbacks)
		return nil, fe.err()
	}
	if len(r.Fallbacks) == 0 {
		r.Fallbacks = nil
	}
	for i, f := range r.Fallbacks {
		field := fmt.Sprintf("fallbacks[%d]", i)
		checkModelName(fe, field, f)
		if slices.Index(r.Fallbacks, f) < i {
			fe.add(field, "repeats an earlier fallback")
		}
	}
	if r.ContextFallback != "" {
		checkModelName(fe, "context_fallback", r.ContextFallback)
	}
	if err := fe.err(); err != nil {
		return nil, err
	}
	edges := fallbackEdges(r)
	if slices.Contains(edges, r.Model) {
		return nil, &Error{Kind: ErrInvalid, Code: CodeFallbackCycle, Message: "a route cannot be its own fallback",
			Fields: selfFields(r, r.Model)}
	}
	return edges, nil
}

// checkFallbackGraph checks r's edges (fallbackEdges) against graph, the
// fallbacks of the project's other routes by model, which it completes with
// r's: every edge names a route of graph, none leads back to r, and no
// chain through r is deeper than store.MaxFallbackDepth.
func checkFallbackGraph(r *store.Route, edges []string, graph map[string][]string) error {
	graph[r.Model] = edges
	unknown := map[string]string{}
	for i, f := range r.Fallbacks {
		if _, ok := graph[f]; !ok {
			unknown[fmt.Sprintf("fallbacks[%d]", i)] = "no such route in this project"
		}
	}
	if f := r.ContextFallback; f != "" {
		if _, ok := graph[f]; !ok {
			unknown["context_fallback"] = "no such route in this project"
		}
	}
	if len(unknown) > 0 {
		return &Error{Kind: ErrInvalid, Code: CodeUnknownRoute,
			Message: "a fallback names a route that does not exist in this project", Fields: unknown}
	}
	if cyc := fallbackCycle(graph, r.Model); cyc != nil {
		return &Error{Kind: ErrInvalid, Code: CodeFallbackCycle,
			Message: "the fallbacks form a cycle: " + strings.Join(quoteAll(cyc), " -> "), Fields: selfFields(r, cyc[1])}
	}
	if d := chainDepth(graph, r.Model); d > store.MaxFallbackDepth {
		return &Error{Kind: ErrInvalid, Code: CodeFallbackTooDeep,
			Message: fmt.Sprintf("a chain of fallbacks through this route would be %d routes deep; at most %d", d, store.MaxFallbackDepth),
			Fields:  map[string]string{"fallbacks": fmt.Sprintf("chains are at most %d deep", store.MaxFallbackDepth)}}
	}
	return nil
}

func quoteAll(names []string) []string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = quote(n)
	}
	return q
}

// selfFields names the field of r that points at target.
func selfFields(r *store.Route, target string) map[string]string {
	if i := slices.Index(r.Fallbacks, target); i >= 0 {
		return map[string]string{fmt.Sprintf("fallbacks[%d]", i): "leads back to this route"}
	}
	return map[string]string{"context_fallback": "leads back to this route"}
}

// fallbackCycle is a cycle through start (start, ..., start), or nil.
// Only cycles through start are new: every other route was checked when it
// was written.
func fallbackCycle(graph map[string][]string, start string) []string {
	done := map[string]bool{}
	var path []string
	var visit func(n string) bool
	visit = func(n string) bool {
		path = append(path, n)
		for _, m := range graph[n] {
			if m == start {
				path = append(path, m)
				return true
			}
			if !done[m] {
				done[m] = true
				if visit(m) {
					return true
				}
			}
		}
		path = path[:len(path)-1]
		return false
	}
	if visit(start) {
		return path
	}
	return nil
}

// chainDepth is the longest chain of fallback edges that passes through
// start: the longest one leading to it plus the longest one leaving it.
// The graph has no cycle through start (fallbackCycle); the depth guards
// recursion anyway.
func chainDepth(graph map[string][]string, start string) int {
	reverse := map[string][]string{}
	for n, out := range graph {
		for _, m := range out {
			reverse[m] = append(reverse[m], n)
		}
	}
	return longest(graph, start, map[string]int{}, 0) + longest(reverse, start, map[string]int{}, 0)
}

func longest(graph map[string][]string, n string, memo map[string]int, depth int) int {
	if d, ok := memo[n]; ok {
		return d
	}
	best := 0
	if depth <= store.MaxFallbackDepth+1 {
		for _, m := range graph[n] {
			best = max(best, 1+longest(graph, m, memo, depth+1))
		}
	} else {
		best = depth // deeper than any allowed chain: stop counting
	}
	memo[n] = best
	return best
}

// fallbackOrder is the order to write a file's routes in: a route after
// the routes of the same file it names as fallbacks, so each one's
// fallbacks exist when it is validated; otherwise the file's order. Routes
// in a cycle keep their order (and the write refuses the cycle).
func fallbackOrder(rs []RouteInput) []int {
	index := make(map[string]int, len(rs))
	for i := range rs {
		index[rs[i].Model] = i
	}
	order := make([]int, 0, len(rs))
	state := make([]uint8, len(rs)) // 0 new, 1 visiting, 2 placed
	var place func(i int)
	place = func(i int) {
		if state[i] != 0 {
			return
		}
		state[i] = 1
		deps := rs[i].Fallbacks
		if rs[i].ContextFallback != "" {
			deps = append(slices.Clip(deps), rs[i].ContextFallback)
		}
		for _, d := range deps {
			if j, ok := index[d]; ok && state[j] == 0 {
				place(j)
			}
		}
		state[i] = 2
		order = append(order, i)
	}
	for i := range rs {
		place(i)
	}
	return order
}
