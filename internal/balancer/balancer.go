// Package balancer chooses which of a route's targets serves a request.
//
// The caller builds a []Candidate per attempt, marking with Skip the targets
// it must not use (already tried for this request, or cooling), and asks a
// Selector for an index. Selectors keep no per-target state of their own:
// what must outlive a routing-table rebuild (in-flight count, latency) lives
// in Stats, which the gateway keeps per target identity and hands in through
// the candidates. Weight 0 marks a drained target that is never chosen.
//
// Strategies, by the name New takes:
//   - "weighted" (the default): random, in proportion to Weight.
//   - "round_robin": in turn, ignoring Weight beyond draining.
//   - "least_busy": fewest requests in flight.
//   - "latency": the faster of two random targets, by latency EWMA.
//
// Picking takes no lock and does not allocate.
package balancer

import (
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"time"
)

// Stats is the runtime state of one target that outlives routing-table
// rebuilds; the gateway keeps one per target identity. The zero value is
// ready. Safe for concurrent use; atomics only.
//
// Every Begin must be matched by exactly one End.
type Stats struct {
	inFlight atomic.Int64
	ewma     atomic.Int64 // nanoseconds; 0 until the first sample
}

// alpha is the EWMA weight of a new sample, as alphaNum/alphaDen. At 0.3
// a sample's influence halves about every two requests, so a target that
// slows down (or recovers) shows within a handful of responses, while one
// slow outlier moves the average by less than a third of the gap.
const (
	alphaNum = 3
	alphaDen = 10
)

// Begin counts one more request in flight.
func (s *Stats) Begin() { s.inFlight.Add(1) }

// End counts one request less in flight. When ok, latency is folded into the
// EWMA; failures are not, so a target that fails fast does not look fast.
func (s *Stats) End(latency time.Duration, ok bool) {
	s.inFlight.Add(-1)
	if !ok {
		return
	}
	// 0 means "no samples", so the smallest sample is 1ns.
	sample := max(int64(latency), 1)
	for {
		old := s.ewma.Load()
		next := sample
		if old != 0 {
			next = max(old+(sample-old)*alphaNum/alphaDen, 1)
		}
		if s.ewma.CompareAndSwap(old, next) {
			return
		}
	}
}

// InFlight returns the number of requests begun and not yet ended.
func (s *Stats) InFlight() int64 { return s.inFlight.Load() }

// EWMA returns the moving average of successful latencies, or 0 before the
// first sample.
func (s *Stats) EWMA() time.Duration { return time.Duration(s.ewma.Load()) }

// Candidate is one choice offered to a Selector.
type Candidate struct {
	// Weight is the candidate's relative share; 0 means drained: never
	// chosen.
	Weight int
	// Stats may be nil for strategies that do not need it; least_busy and
	// latency treat nil as idle and unmeasured.
	Stats *Stats
	// Skip is set by the caller for candidates already tried or cooling;
	// they are never chosen.
	Skip bool
}

func (c *Candidate) usable() bool { return !c.Skip && c.Weight > 0 }

// Selector picks one candidate.
//
// Pick returns the index of a candidate with Skip==false and Weight>0, or -1
// if there is none. It must be safe for concurrent use, must not allocate,
// and must not modify cands. The caller must not modify cands during Pick.
type Selector interface {
	Pick(cands []Candidate) int
}

// Strategy names accepted by New.
const (
	Weighted   = "weighted"
	RoundRobin = "round_robin"
	LeastBusy  = "least_busy"
	Latency    = "latency"
)

// New returns the selector for a strategy name; "" means "weighted". Each call
// returns an independent selector (round_robin keeps its own position).
func New(strategy string) (Selector, error) {
	switch strategy {
	case "", Weighted:
		return weighted{}, nil
	case RoundRobin:
		return new(roundRobin), nil
	case LeastBusy:
		return leastBusy{}, nil
	case Latency:
		return latency{}, nil
	}
	return nil, fmt.Errorf("balancer: unknown strategy %q (want %s, %s, %s or %s)", strategy, Weighted, RoundRobin, LeastBusy, Latency)
}

// weighted picks at random in proportion to Weight among the usable
// candidates, so skipped candidates' share spreads over the rest by their
// own weights.
type weighted struct{}

func (weighted) Pick(cands []Candidate) int {
	var total uint64
	last := -1
	n := 0
	for i := range cands {
		if c := &cands[i]; c.usable() {
			total += uint64(c.Weight)
			last = i
			n++
		}
	}
	if n <= 1 {
		return last // no need to spend a random number
	}
	r := rand.Uint64N(total)
	for i := range cands {
		if c := &cands[i]; c.usable() {
			if r < uint64(c.Weight) {
				return i
			}
			r -= uint64(c.Weight)
		}
	}
	return last
}

// roundRobin hands out the usable candidates in turn. The counter indexes
// the usable candidates rather than all of them, so a skipped target's turn
// is spread over the rest instead of falling entirely on its neighbour.
type roundRobin struct{ next atomic.Uint64 }

func (r *roundRobin) Pick(cands []Candidate) int {
	n := 0
	for i := range cands {
		if cands[i].usable() {
			n++
		}
	}
	if n == 0 {
		return -1
	}
	k := (r.next.Add(1) - 1) % uint64(n)
	for i := range cands {
		if cands[i].usable() {
			if k == 0 {
				return i
			}
			k--
		}
	}
	return -1 // unreachable unless cands changed under us
}

// leastBusy picks the usable candidate with the fewest requests in flight.
// Ties are broken uniformly at random (reservoir sampling), so idle targets
// of equal load share the traffic instead of the first one taking it all.
type leastBusy struct{}

func (leastBusy) Pick(cands []Candidate) int {
	l := newLeast()
	for i := range cands {
		c := &cands[i]
		if c.usable() {
			l.offer(i, inFlight(c.Stats))
		}
	}
	return l.best
}

// least finds the index of the least load offered, ties broken uniformly
// at random by reservoir sampling; best is -1 until an offer.
type least struct {
	best, ties int
	load       int64
}

func newLeast() least { return least{best: -1} }

func (l *least) offer(i int, load int64) {
	switch {
	case l.best < 0 || load < l.load:
		l.best, l.load, l.ties = i, load, 1
	case load == l.load:
		l.ties++
		if rand.IntN(l.ties) == 0 {
			l.best = i
		}
	}
}

// latency is power of two choices: two distinct usable candidates drawn
// uniformly (Weight only drains: a heavy weight should not make a slow
// target more likely to be compared), and the cheaper one wins. Comparing
// two random targets instead of taking the global best keeps every target
// sampled now and then and avoids a herd on the single fastest one.
//
// Cost is EWMA*(InFlight+1), as in Finagle's and Linkerd's P2C: the EWMA of a
// target only moves as its responses come back, so on its own it would send
// a burst entirely to the target that was fastest before the burst.
// A target without samples wins so that new targets get explored, unless
// it already has more requests in flight than the other (then we are still
// waiting for its first answer and should not pile on).
type latency struct{}

func (latency) Pick(cands []Candidate) int {
	n := 0
	last := -1
	for i := range cands {
		if cands[i].usable() {
			n++
			last = i
		}
	}
	if n <= 1 {
		return last
	}
	ka := rand.IntN(n)
	kb := rand.IntN(n - 1)
	if kb >= ka {
		kb++
	}
	a, b := -1, -1
	for i, k := 0, 0; i < len(cands) && (a < 0 || b < 0); i++ {
		if !cands[i].usable() {
			continue
		}
		switch k {
		case ka:
			a = i
		case kb:
			b = i
		}
		k++
	}
	if a < 0 || b < 0 {
		return last // unreachable unless cands changed under us
	}
	if cheaper(cands[b].Stats, cands[a].Stats) {
		return b
	}
	return a
}

// cheaper reports whether x should be preferred over y.
func cheaper(x, y *Stats) bool {
	ex, ey := ewma(x), ewma(y)
	fx, fy := inFlight(x), inFlight(y)
	if ex == 0 || ey == 0 {
		// No latency to compare: the less busy one, and an unmeasured one on
		// a tie, so that it gets its first sample.
		return fx < fy || (fx == fy && ex == 0 && ey != 0)
	}
	return ex*(max(fx, 0)+1) < ey*(max(fy, 0)+1)
}

func inFlight(s *Stats) int64 {
	if s == nil {
		return 0
	}
	return s.InFlight()
}

func ewma(s *Stats) int64 {
	if s == nil {
		return 0
	}
	return s.ewma.Load()
}
