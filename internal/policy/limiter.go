package policy

import "sync/atomic"

// Limiter is a route's in-flight limit (max_concurrency) on one replica. The
// zero value, and a nil *Limiter, are unlimited; InFlight is counted either
// way. All methods are safe for concurrent use.
type Limiter struct {
	max atomic.Int64 // <= 0: unlimited
	n   atomic.Int64
}

// NewLimiter returns a Limiter admitting at most max requests at once; max
// <= 0 means unlimited.
func NewLimiter(max int) *Limiter {
	l := new(Limiter)
	l.max.Store(int64(max))
	return l
}

// SetMax changes the limit in place, so that a policy change keeps the count
// of requests already in flight. Requests over a lowered limit are not
// interrupted; new ones wait for the count to fall below it.
func (l *Limiter) SetMax(max int) {
	if l != nil {
		l.max.Store(int64(max))
	}
}

// Acquire takes a slot and reports true, or reports false when the limit is
// reached (the gateway answers 429 with Retry-After: 1). Every true must be
// matched by one Release.
func (l *Limiter) Acquire() bool {
	if l == nil {
		return true
	}
	for {
		m, n := l.max.Load(), l.n.Load()
		if m > 0 && n >= m {
			return false
		}
		if l.n.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// Release gives back a slot taken by Acquire. Releasing more than was
// acquired is a bug in the caller and panics, as sync.WaitGroup does.
func (l *Limiter) Release() {
	if l == nil {
		return
	}
	if l.n.Add(-1) < 0 {
		l.n.Add(1)
		panic("policy: Limiter.Release without Acquire")
	}
}

// InFlight is the number of slots held now.
func (l *Limiter) InFlight() int {
	if l == nil {
		return 0
	}
	return int(l.n.Load())
}
