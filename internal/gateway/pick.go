package gateway

import (
	"math/rand/v2"
	"time"

	"github.com/rolter/rolter/internal/balancer"
)

// pickTarget chooses an untried target: by the route's strategy among those
// not cooling, else (panic mode) the untried one whose cooldown ends first,
// so that a fully cooled pool still gets a chance instead of failing every
// request. probe reports that this request holds the target's half-open
// probe.
func (g *Gateway) pickTarget(plan *routePlan, cands []balancer.Candidate, tried, down []bool) (int, bool) {
	now := g.clock.Now()
	for i := range tried {
		tried[i] = tried[i] || down[i] // not routable: never a candidate, not even in panic mode
	}
	for {
		for i, tg := range plan.targets {
			cands[i] = balancer.Candidate{Weight: plan.weights[i], Stats: tg.stats,
				Skip: tried[i] || tg.breaker.Until().After(now)}
		}
		i := plan.selector.Pick(cands)
		if i < 0 {
			if plan.pinned {
				return -1, false
			}
			return g.panicTarget(plan, tried), false
		}
		ok, probe := plan.targets[i].breaker.Allow()
		if ok {
			return i, probe
		}
		// Another request holds the half-open probe: not ours to send.
		tried[i] = true
	}
}

func (g *Gateway) panicTarget(plan *routePlan, tried []bool) int {
	best := -1
	var bestUntil time.Time
	for i, tg := range plan.targets {
		if tried[i] || plan.weights[i] == 0 {
			continue
		}
		if u := tg.breaker.Until(); best < 0 || u.Before(bestUntil) {
			best, bestUntil = i, u
		}
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
