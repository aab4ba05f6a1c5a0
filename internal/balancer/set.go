package balancer

import (
	"math/rand/v2"
	"sync/atomic"
)

// Set is a routable set prebuilt for picking: the members a route may
// send to now, with what each strategy needs to choose among them in time
// independent of their number. Selector.Pick walks every candidate on
// every call; a Set is built when the members change (a target starts or
// ends cooling, a table is rebuilt) and then picks in O(1) (round_robin,
// least_busy, latency) or O(log n) (weighted) per call.
//
// Picking excludes members per request (targets already tried, a policy
// that refuses the request) through a Skipper. For weighted, least_busy
// and latency, a few draws that land on excluded members are redrawn;
// after maxDraws of them the Set scans its members once, so a request that
// excludes most of a large set still gets an exact answer, in O(n) for
// that request only. Round robin scans the members (O(n)) whenever the
// member whose turn it is is excluded, to spread that turn evenly.
//
// A Set is immutable after NewSet and safe for concurrent use; the round
// robin position lives outside it (Pick's rr), so it survives rebuilds.
type Set struct {
	strategy string
	ids      []int    // the caller's index of each member
	stats    []*Stats // per member; may hold nils
	weights  []int    // per member, each > 0
	prefix   []uint64 // weighted: prefix[k] = sum of weights[0..k]
}

// Member is one element offered to NewSet.
type Member struct {
	ID     int // the caller's index, returned by Pick
	Weight int // members with Weight <= 0 are left out (drained)
	Stats  *Stats
}

// Skipper excludes members per request; Skip(id) reports whether the
// member with that ID must not be chosen.
type Skipper interface {
	Skip(id int) bool
}

// maxDraws is how many random draws Pick makes before it falls back to a
// scan: with a fraction f of the set excluded, a scan happens with
// probability f^maxDraws (one in 256 at half the set).
const maxDraws = 8

// exactBelow: least_busy compares every member of a set this small (the
// exact least busy), and two random members above it.
const exactBelow = 5

// NewSet builds the set of members for strategy ("" is weighted). An
// unknown strategy picks like weighted; New reports unknown names.
func NewSet(strategy string, members []Member) *Set {
	s := &Set{strategy: strategy}
	var total uint64
	for _, m := range members {
		if m.Weight <= 0 {
			continue
		}
		s.ids = append(s.ids, m.ID)
		s.stats = append(s.stats, m.Stats)
		s.weights = append(s.weights, m.Weight)
		total += uint64(m.Weight)
		s.prefix = append(s.prefix, total)
	}
	return s
}

// Len is the number of members.
func (s *Set) Len() int { return len(s.ids) }

// Pick returns the ID of a member skip does not exclude, chosen by the
// set's strategy, or -1 when skip excludes them all. rr is the round robin
// position (only round_robin uses it). skip may be nil.
func (s *Set) Pick(rr *atomic.Uint64, skip Skipper) int {
	n := len(s.ids)
	if n == 0 {
		return -1
	}
	ok := func(k int) bool { return skip == nil || !skip.Skip(s.ids[k]) }
	switch s.strategy {
	case RoundRobin:
		// The position counts picks. When the member whose turn it is is
		// skipped, the position indexes the members skip leaves instead
		// (O(n), for that request only), so a skipped member's turn is
		// spread evenly over the rest rather than falling on its
		// neighbour, as Selector's round robin does.
		pos := rr.Add(1) - 1
		if k := int(pos % uint64(n)); ok(k) {
			return s.ids[k]
		}
		left := 0
		for k := range n {
			if ok(k) {
				left++
			}
		}
		if left == 0 {
			return -1
		}
		j := int(pos % uint64(left))
		for k := range n {
			if !ok(k) {
				continue
			}
			if j == 0 {
				return s.ids[k]
			}
			j--
		}
		return -1 // unreachable
	case LeastBusy:
		if n < exactBelow {
			return s.leastBusyScan(ok)
		}
		return s.twoChoices(ok, func(a, b int) bool { return inFlight(s.stats[a]) < inFlight(s.stats[b]) })
	case Latency:
		return s.twoChoices(ok, func(a, b int) bool { return cheaper(s.stats[a], s.stats[b]) })
	}
	if n == 1 {
		if ok(0) {
			return s.ids[0]
		}
		return -1
	}
	total := s.prefix[n-1]
	for range maxDraws {
		if k := s.search(rand.Uint64N(total)); ok(k) {
			return s.ids[k]
		}
	}
	// Scan: a weighted draw among the members skip leaves.
	var left uint64
	for k := range n {
		if ok(k) {
			left += uint64(s.weights[k])
		}
	}
	if left == 0 {
		return -1
	}
	r := rand.Uint64N(left)
	for k := range n {
		if !ok(k) {
			continue
		}
		if r < uint64(s.weights[k]) {
			return s.ids[k]
		}
		r -= uint64(s.weights[k])
	}
	return -1 // unreachable
}

// search is the member whose weight range holds r: the first k with
// prefix[k] > r.
func (s *Set) search(r uint64) int {
	lo, hi := 0, len(s.prefix)-1
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if s.prefix[mid] > r {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return lo
}

// leastBusyScan is the member with the fewest requests in flight, ties
// broken uniformly at random.
func (s *Set) leastBusyScan(ok func(int) bool) int {
	l := newLeast()
	for k := range s.ids {
		if ok(k) {
			l.offer(k, inFlight(s.stats[k]))
		}
	}
	if l.best < 0 {
		return -1
	}
	return s.ids[l.best]
}

// twoChoices draws two distinct members skip leaves and returns the one
// better prefers (power of two choices); with one member left, that one.
func (s *Set) twoChoices(ok func(int) bool, better func(a, b int) bool) int {
	n := len(s.ids)
	a, b := -1, -1
	if n >= 2 {
		for range maxDraws {
			k := rand.IntN(n)
			if !ok(k) || k == a {
				continue
			}
			if a < 0 {
				a = k
				continue
			}
			b = k
			break
		}
	}
	if b < 0 {
		// Few members left: choose among all of them uniformly.
		a, b = s.scanTwo(ok)
	}
	switch {
	case a < 0:
		return -1
	case b < 0:
		return s.ids[a]
	case better(b, a):
		return s.ids[b]
	}
	return s.ids[a]
}

// scanTwo draws two distinct members skip leaves uniformly, by counting
// them: -1 for each that does not exist.
func (s *Set) scanTwo(ok func(int) bool) (int, int) {
	left := 0
	for k := range s.ids {
		if ok(k) {
			left++
		}
	}
	switch left {
	case 0:
		return -1, -1
	case 1:
		for k := range s.ids {
			if ok(k) {
				return k, -1
			}
		}
	}
	ka := rand.IntN(left)
	kb := rand.IntN(left - 1)
	if kb >= ka {
		kb++
	}
	a, b := -1, -1
	for k, j := 0, 0; k < len(s.ids); k++ {
		if !ok(k) {
			continue
		}
		switch j {
		case ka:
			a = k
		case kb:
			b = k
		}
		j++
	}
	return a, b
}
