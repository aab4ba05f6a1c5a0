package ratelimit

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rolter/rolter/internal/clock"
)

// shards spreads limits over independently locked maps.
const shards = 64

// DefaultMaxTracked bounds the limits Local remembers (about 100 bytes
// each).
const DefaultMaxTracked = 1 << 20

// Local keeps limits in this process's memory.
//
// Memory is bounded twice: a limit whose bucket is full again is forgotten
// (sweepEvery, and whenever a shard is full), and at most maxTracked limits
// are held; beyond that a tracked limit is dropped to make room, and that
// limit starts over with a full minute (counted in Evicted).
type Local struct {
	clock      clock.Clock
	perShard   int
	shard      [shards]localShard
	evicted    atomic.Int64
	sweepEvery time.Duration
}

type cellKey struct {
	scope Scope
	unit  Unit
	id    int64
}

type localShard struct {
	mu        sync.Mutex
	tat       map[cellKey]int64 // TAT in clock nanoseconds
	lastSweep int64
}

// NewLocal returns an in-memory limiter; maxTracked <= 0 takes
// DefaultMaxTracked.
func NewLocal(clk clock.Clock, maxTracked int) *Local {
	if clk == nil {
		clk = clock.System
	}
	if maxTracked <= 0 {
		maxTracked = DefaultMaxTracked
	}
	l := &Local{clock: clk, perShard: max(maxTracked/shards, 1), sweepEvery: time.Minute}
	for i := range l.shard {
		l.shard[i].tat = map[cellKey]int64{}
	}
	return l
}

// Tracked is the number of limits held now.
func (l *Local) Tracked() int {
	n := 0
	for i := range l.shard {
		s := &l.shard[i]
		s.mu.Lock()
		n += len(s.tat)
		s.mu.Unlock()
	}
	return n
}

// Evicted is the number of limits dropped, while still counting, to stay
// within the bound.
func (l *Local) Evicted() int64 { return l.evicted.Load() }

func shardOf(k cellKey) int {
	h := uint64(k.id)*0x9E3779B97F4A7C15 ^ uint64(k.scope)<<8 ^ uint64(k.unit)
	return int(h>>32) % shards
}

// lock takes the shards of limits in ascending order (so two requests
// never wait on each other crosswise) and returns them for unlock.
func (l *Local) lock(limits []Limit, buf *[8]int) []int {
	idx := buf[:0]
	for _, lm := range limits {
		i := shardOf(cellKey{lm.Scope, lm.Unit, lm.ID})
		if !slices.Contains(idx, i) {
			idx = append(idx, i)
		}
	}
	slices.Sort(idx)
	for _, i := range idx {
		l.shard[i].mu.Lock()
	}
	return idx
}

func (l *Local) unlock(idx []int) {
	for _, i := range idx {
		l.shard[i].mu.Unlock()
	}
}

// Take implements Limiter.
func (l *Local) Take(_ context.Context, limits []Limit) Result {
	now := l.clock.Now().UnixNano()
	var buf [8]int
	idx := l.lock(limits, &buf)
	defer l.unlock(idx)
	res := Result{Allowed: true, Denied: -1, States: make([]State, len(limits))}
	var news [8]int64
	next := news[:0]
	for i, lm := range limits {
		k := cellKey{lm.Scope, lm.Unit, lm.ID}
		tat := max(l.shard[shardOf(k)].tat[k], now)
		cost := lm.Cost
		if cost > lm.PerMinute {
			res.refuse(i, 0, true)
			res.States[i] = stateOf(lm.PerMinute, time.Duration(tat-now))
			next = append(next, tat)
			continue
		}
		n := tat + increment(cost, lm.PerMinute)
		if wait := n - minute - now; wait > 0 {
			res.refuse(i, time.Duration(wait), false)
			res.States[i] = stateOf(lm.PerMinute, time.Duration(tat-now))
			next = append(next, tat)
			continue
		}
		next = append(next, n)
		res.States[i] = stateOf(lm.PerMinute, time.Duration(n-now))
	}
	if !res.Allowed {
		for i, lm := range limits {
			if i != res.Denied {
				k := cellKey{lm.Scope, lm.Unit, lm.ID}
				res.States[i] = stateOf(lm.PerMinute, time.Duration(max(l.shard[shardOf(k)].tat[k], now)-now))
			}
		}
		return res
	}
	for i, lm := range limits {
		l.store(cellKey{lm.Scope, lm.Unit, lm.ID}, next[i], now)
	}
	return res
}

// refuse records a refusal by limit i; the verdict names the limit that
// admits last.
func (r *Result) refuse(i int, wait time.Duration, tooLarge bool) {
	switch {
	case r.Allowed, tooLarge && !r.TooLarge, !r.TooLarge && wait > r.RetryAfter:
		r.Allowed, r.Denied, r.RetryAfter, r.TooLarge = false, i, wait, tooLarge
	}
}

// Adjust implements Limiter.
func (l *Local) Adjust(_ context.Context, limits []Limit, _ bool) {
	now := l.clock.Now().UnixNano()
	var buf [8]int
	idx := l.lock(limits, &buf)
	defer l.unlock(idx)
	for _, lm := range limits {
		if lm.Cost == 0 {
			continue
		}
		k := cellKey{lm.Scope, lm.Unit, lm.ID}
		tat := max(l.shard[shardOf(k)].tat[k], now)
		l.store(k, tat+increment(clampCost(lm.Cost, lm.PerMinute), lm.PerMinute), now)
	}
}

// store sets a limit's TAT, forgetting it when its bucket is full; the
// shard is locked.
func (l *Local) store(k cellKey, tat, now int64) {
	s := &l.shard[shardOf(k)]
	if tat <= now {
		delete(s.tat, k)
		return
	}
	if _, ok := s.tat[k]; !ok {
		if len(s.tat) >= l.perShard || now-s.lastSweep >= int64(l.sweepEvery) {
			s.sweep(now)
		}
		if len(s.tat) >= l.perShard {
			for victim := range s.tat { // any one: map order is random
				delete(s.tat, victim)
				l.evicted.Add(1)
				break
			}
		}
	}
	s.tat[k] = tat
}

// sweep forgets limits whose bucket is full again.
func (s *localShard) sweep(now int64) {
	s.lastSweep = now
	for k, tat := range s.tat {
		if tat <= now {
			delete(s.tat, k)
		}
	}
}
