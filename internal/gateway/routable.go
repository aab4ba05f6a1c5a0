package gateway

import (
	"errors"
	"net"
	"slices"
	"syscall"
	"time"

	"github.com/rolter/rolter/internal/balancer"
	"github.com/rolter/rolter/internal/policy"
	"github.com/rolter/rolter/internal/readiness"
	"github.com/rolter/rolter/internal/snapshot"
	"github.com/rolter/rolter/internal/store"
)

// A request's cost must not grow with its route's pool (issue 24). What
// admission needs of the targets (readiness, draining, the pool's context,
// the distinct policies) is computed with the plan: for a route when the
// table is built, and the table is rebuilt whenever readiness or
// discovered metadata change (Refresh). Which targets may be picked now is
// the plan's routable set (liveSet): its members minus those cooling,
// rebuilt when a target begins cooling (healthGen) or a cooldown ends,
// never per request. A request then picks from it in O(1) or O(log n)
// (balancer.Set), excluding per request only what it tried and what its
// policy refuses.

// planFacts are a plan's admission facts.
type planFacts struct {
	down     []bool // per target: not routable (draining, not ready, model mismatch, stale model)
	ready    int    // targets not down
	draining int
	reason   string // why the first not-ready target is down, fit for any client
	pool     int    // the smallest known context of the ready targets; 0: unknown
	// policies are the distinct combined policies (the plan's and the
	// provider's, strictest) of the ready targets, in order of first
	// appearance; policyOf is each target's index into them, -1 when down.
	policies []store.Policy
	policyOf []int
	// translator is, per client API and policy, the translating pairing of
	// the first ready target under that policy that needs one; nil when
	// none does.
	translator [numAPIs][]*translating
	// tiers are the distinct target priorities of the plan, best (lowest)
	// first, and tierOf each target's index into them (issue 19; nil when
	// there is one tier): the strategy picks within the best tier that has
	// a routable target.
	tiers  []int
	tierOf []int
	// members are, per tier, the ready targets with a weight: the routable
	// sets when nothing cools.
	members [][]balancer.Member
}

// facts computes plan's admission facts; model is the client's string.
func (g *Gateway) facts(plan *routePlan, model string) *planFacts {
	return g.factsWith(plan, model, g.status)
}

// factsWith is facts with the providers' readiness from status: the
// live cache per request, the table's view when a table is derived.
func (g *Gateway) factsWith(plan *routePlan, model string, status func(*providerRT) readiness.Status) *planFacts {
	n := len(plan.targets)
	f := &planFacts{down: make([]bool, n), policyOf: make([]int, n)}
	f.tiers, f.tierOf = tiersOf(plan.targets)
	f.members = make([][]balancer.Member, len(f.tiers))
	for i, tg := range plan.targets {
		f.policyOf[i] = -1
		if tg.provider.draining { // its fleet host restarts: in-flight requests finish, no new ones
			f.down[i] = true
			f.draining++
			continue
		}
		st := status(tg.provider)
		why := ""
		if !st.Ready {
			// The class only: st.Reason may quote an upstream's error
			// text (a connection string, an internal address). The
			// details are logged and in the admin readiness view.
			why = "provider " + quoteModel(tg.provider.slug) + " is not ready (" + string(st.Class) + ")"
		} else {
			why = g.unroutable(tg, st, model)
		}
		if why != "" {
			f.down[i] = true
			if f.reason == "" {
				f.reason = why + "; the operator's readiness view says why"
			}
			continue
		}
		f.ready++
		// A pool advertises and admits against its smallest member, so
		// identical requests behave the same on any member (design 002).
		if c := contextOf(tg, st); c > 0 && (f.pool == 0 || c < f.pool) {
			f.pool = c
		}
		p := policy.Strictest(plan.policy, tg.provider.policy)
		j := 0
		for j < len(f.policies) && f.policies[j] != p {
			j++
		}
		if j == len(f.policies) {
			f.policies = append(f.policies, p)
			for api := range f.translator {
				f.translator[api] = append(f.translator[api], nil)
			}
		}
		f.policyOf[i] = j
		for api := range f.translator {
			if t, ok := tg.provider.pairs[api].(*translating); ok && f.translator[api][j] == nil {
				f.translator[api][j] = t
			}
		}
		if plan.weights[i] > 0 {
			t := f.tier(i)
			f.members[t] = append(f.members[t], balancer.Member{ID: i, Weight: plan.weights[i], Stats: tg.stats})
		}
	}
	return f
}

var oneTier = []int{0}

// tier is target i's index into f.tiers.
func (f *planFacts) tier(i int) int {
	if f.tierOf == nil {
		return 0
	}
	return f.tierOf[i]
}

// tiersOf is the distinct priorities of targets, lowest first, and each
// target's index into them. Provider and group plans have one tier.
func tiersOf(targets []*targetRT) (tiers, tierOf []int) {
	for _, tg := range targets {
		if !slices.Contains(tiers, tg.priority) {
			tiers = append(tiers, tg.priority)
		}
	}
	if len(tiers) <= 1 {
		return oneTier, nil // every target in tier 0: nothing to allocate per request
	}
	slices.Sort(tiers)
	tierOf = make([]int, len(targets))
	for i, tg := range targets {
		tierOf[i] = slices.Index(tiers, tg.priority)
	}
	return tiers, tierOf
}

// cooling reports whether a breaker whose cooldown ends at until keeps its
// target out of the routable sets at now. healthGen moves only when this
// changes for some target (it began cooling), not when a cooldown is merely
// extended (a 429 storm on a target already out): the sets already leave
// that target out, and rebuild when the earliest cooldown they know of ends.
// A cooldown's end needs no bump either (liveSet.until).
func cooling(until, now time.Time) bool { return until.After(now) }

// liveSet is a plan's routable sets (one per tier) as of a health
// generation.
type liveSet struct {
	sets []*balancer.Set // per tier, best first
	gen  uint64
	// until is the earliest end of a member's cooldown: the set is rebuilt
	// then, so the member rejoins for its half-open probe. Zero: none cools.
	until time.Time
}

// routable returns the plan's routable set, rebuilding it when a target
// began cooling since (healthGen) or a member's cooldown has ended. While one
// request rebuilds it, others use the previous set: a member that began
// cooling meanwhile is refused by its breaker and redrawn.
func (g *Gateway) routable(plan *routePlan, f *planFacts, now time.Time) []*balancer.Set {
	if f != plan.facts { // facts read afresh for this request (admit): a set of its own
		return g.buildLive(plan, f, 0, now).sets
	}
	gen := g.healthGen.Load()
	l := plan.live.Load()
	if l != nil && l.gen == gen && (l.until.IsZero() || now.Before(l.until)) {
		return l.sets
	}
	if l != nil {
		if !plan.rebuilding.CompareAndSwap(false, true) {
			return l.sets
		}
		defer plan.rebuilding.Store(false)
	}
	next := g.buildLive(plan, f, gen, now)
	plan.live.Store(next)
	return next.sets
}

// buildLive is f's members that are not cooling at now.
func (g *Gateway) buildLive(plan *routePlan, f *planFacts, gen uint64, now time.Time) *liveSet {
	next := &liveSet{gen: gen, sets: make([]*balancer.Set, len(f.members))}
	for t, tier := range f.members {
		members := make([]balancer.Member, 0, len(tier))
		for _, m := range tier {
			if u := plan.targets[m.ID].breaker.Until(); u.After(now) {
				if next.until.IsZero() || u.Before(next.until) {
					next.until = u
				}
				continue
			}
			members = append(members, m)
		}
		next.sets[t] = balancer.NewSet(plan.strategy, members)
	}
	return next
}

// idxSet is a small set of target indices: a slice while small, a map
// beyond (a request that skips many busy providers).
type idxSet struct {
	small []int
	big   map[int]struct{}
}

const idxSetSmall = 32

func (s *idxSet) has(i int) bool {
	if s.big != nil {
		_, ok := s.big[i]
		return ok
	}
	for _, j := range s.small {
		if j == i {
			return true
		}
	}
	return false
}

func (s *idxSet) add(i int) {
	switch {
	case s.has(i):
	case s.big != nil:
		s.big[i] = struct{}{}
	case len(s.small) < idxSetSmall:
		s.small = append(s.small, i)
	default:
		s.big = make(map[int]struct{}, 2*idxSetSmall)
		for _, j := range s.small {
			s.big[j] = struct{}{}
		}
		s.big[i] = struct{}{}
	}
}

// exclusions are the targets one request may not pick: those it tried (or
// whose half-open probe another request holds), those its policy refuses,
// and those it found cooling although the routable set still held them.
type exclusions struct {
	x       *exchange
	tried   idxSet
	cooling idxSet
	buf     [8]int
}

func newExclusions(x *exchange) *exclusions {
	e := &exclusions{x: x}
	e.tried.small = e.buf[:0]
	return e
}

// Skip implements balancer.Skipper.
func (e *exclusions) Skip(i int) bool {
	return !e.x.usable(i) || e.tried.has(i) || e.cooling.has(i)
}

// usable reports whether target i may serve this request at all: ready,
// and admitted by its policy.
func (x *exchange) usable(i int) bool {
	return !x.facts.down[i] && (x.adm == nil || x.adm.of(i) >= 0)
}

// MaxRefusals is how many refused connections one request may meet
// without using up its attempts (Config.MaxAttempts): a refusal is cheap
// and certain, so the request moves on to another distinct target, within
// the retry deadline. Beyond it a refusal counts as an attempt, so a pool
// of dead hosts still ends a request quickly.
const MaxRefusals = 10

// connRefused reports whether err is a refused connection: ECONNREFUSED, or a
// reset while dialling. Nothing reached the upstream, so it is certain
// that the target cannot serve now. A reset after the connection was
// established is an ordinary connect failure: the upstream may have read
// the request.
func connRefused(err error) bool {
	if errors.Is(err, syscall.ECONNREFUSED) {
		return true
	}
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial" && errors.Is(err, syscall.ECONNRESET)
}

// ProbeTrigger asks for an active probe of a provider now (package
// readiness implements it): the gateway calls it when a connection to the
// provider is refused, so its readiness follows within a probe's time
// instead of an interval.
type ProbeTrigger interface {
	ProbeSoon(providerID int64)
}

// refused takes a provider whose connection was refused out of routing at
// once, for every request: every deployment of it is tripped (the
// attempted one already is, by judge), the routable sets are rebuilt, and
// the readiness cache probes it now. A half-open probe after the cooldown
// brings it back, as for any cooled target. Route targets whose plan no
// request has built yet have no state (lazyplan.go): it is made here, so
// that they are tripped too.
func (g *Gateway) refused(tg *targetRT) {
	now := g.clock.Now()
	if t := g.table.Load(); t != nil {
		t.snap.RoutesOf(tg.provider.id, func(r *snapshot.Route) {
			for _, rt := range r.Targets {
				if id := (targetID{rt.Provider.ID, rt.UpstreamModel}); id.provider == tg.provider.id && t.routed.At(id) > 0 {
					g.state(id, true)
				}
			}
		})
	}
	moved := false
	g.states.Range(func(k, v any) bool {
		if id := k.(targetID); id.provider == tg.provider.id && id != tg.id {
			br := v.(*deployState).breaker
			was := br.Until()
			br.Trip()
			moved = moved || cooling(was, now) != cooling(br.Until(), now)
		}
		return true
	})
	if moved {
		g.healthGen.Add(1)
	}
	g.metrics.refusals.WithLabelValues(tg.provider.org, tg.provider.slug).Inc()
	if g.probes != nil {
		g.probes.ProbeSoon(tg.provider.id)
	}
}
