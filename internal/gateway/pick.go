package gateway

import (
	"math/rand/v2"
	"sync/atomic"
	"time"
)

// pickTarget chooses a target the request may use: by the plan's strategy
// from the routable set (routable.go) of the best tier from x.tier on that
// has one it may pick, excluding what this request tried or its policy
// refuses, else (panic mode) the untried target of the plan's last tier
// whose cooldown ends first, so that a fully cooled pool still gets a
// chance instead of failing every request. A tier that yields nothing is
// passed for good (x.tier moves on). probe reports that this request holds
// the target's half-open probe.
func (g *Gateway) pickTarget(x *exchange, ex *exclusions) (int, bool) {
	plan := x.plan
	now := g.clock.Now()
	sets := g.routable(plan, x.facts, now)
	rr := plan.rr
	if rr == nil {
		rr = new(atomic.Uint64)
	}
	for x.tier < len(sets) {
		i := sets[x.tier].Pick(rr, ex)
		if i < 0 {
			if x.tier == len(sets)-1 {
				break
			}
			x.tier++ // the whole tier is unroutable for this request
			x.tierSpent = 0
			continue
		}
		tg := plan.targets[i]
		ok, probe := tg.breaker.Allow()
		if ok {
			return i, probe
		}
		if tg.breaker.Until().After(now) {
			// It began cooling after the set was built: skip it, not as
			// tried (panic mode may still choose it), and have the set
			// rebuilt, unless the counter moved since the plan's set was
			// built (a rebuild is due already, or another request asked).
			ex.cooling.add(i)
			if l := plan.live.Load(); l != nil {
				g.healthGen.CompareAndSwap(l.gen, l.gen+1)
			}
			continue
		}
		// Another request holds the half-open probe: not ours to send.
		ex.tried.add(i)
	}
	if plan.pinned {
		return -1, false
	}
	return g.panicTarget(x, ex), false
}

// panicTarget is the usable, untried target with a weight, in the plan's
// last tier that has usable targets, whose cooldown ends first; -1 when
// there is none, or when the request already spent its attempts on that
// tier. A better tier is never forced onto while cooling: a worse one
// serves instead. It scans the plan, which happens only when every
// routable target is cooling or tried.
func (g *Gateway) panicTarget(x *exchange, ex *exclusions) int {
	plan, f := x.plan, x.facts
	last := -1
	for i := range plan.targets {
		if x.usable(i) && plan.weights[i] > 0 {
			last = max(last, f.tier(i))
		}
	}
	if last < x.tier {
		return -1
	}
	best := -1
	var bestUntil time.Time
	for i, tg := range plan.targets {
		if f.tier(i) != last || !x.usable(i) || ex.tried.has(i) || plan.weights[i] == 0 {
			continue
		}
		if u := tg.breaker.Until(); best < 0 || u.Before(bestUntil) {
			best, bestUntil = i, u
		}
	}
	if best >= 0 && last != x.tier {
		x.tier, x.tierSpent = last, 0
	}
	return best
}

// pickKey chooses a pool key: random by weight among keys neither tried nor
// cooling, else the untried key whose cooldown ends first. A provider
// without keys sends no credential (ok, key nil). ok is false when every key
// was tried.
func (g *Gateway) pickKey(p *providerRT, tried map[int64]bool) (key *keyRT, probe, ok bool) {
	if len(p.keys) == 0 {
		return nil, false, true
	}
	now := g.clock.Now()
	for {
		total := 0
		for _, k := range p.keys {
			if !tried[k.id] && k.weight > 0 && !k.breaker.Until().After(now) {
				total += k.weight
			}
		}
		if total == 0 {
			break
		}
		n := rand.IntN(total)
		for _, k := range p.keys {
			if tried[k.id] || k.weight <= 0 || k.breaker.Until().After(now) {
				continue
			}
			if n -= k.weight; n < 0 {
				key = k
				break
			}
		}
		if ok, probe := key.breaker.Allow(); ok {
			return key, probe, true
		}
		tried[key.id] = true
	}
	// Panic mode for keys; a drained key (weight 0) stays out.
	for _, k := range p.keys {
		if tried[k.id] || k.weight <= 0 {
			continue
		}
		if key == nil || tried[key.id] || k.breaker.Until().Before(key.breaker.Until()) {
			key = k
		}
	}
	if key == nil || tried[key.id] {
		return nil, false, false
	}
	return key, false, true
}
